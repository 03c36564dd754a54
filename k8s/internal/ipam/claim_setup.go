package ipam

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
	"github.com/ipledger/ipledger/k8s/internal/feed"
	"github.com/ipledger/ipledger/k8s/internal/ledger"
)

// Actions of ipledger's feed after which a value may be free that was
// not: a waiting claim of that pool tries again.
var freeingActions = map[string]bool{
	"allocation.release": true, "allocation.unquarantine": true, "allocation.quarantine_expired": true,
	"pool.create": true, "pool.update": true, "pool.range.add": true, "pool.range.update": true,
}

// SetupClaimController registers the claim controller with mgr. Besides
// the claims and their IPAddresses it follows the pool objects (a pool
// that becomes Ready wakes its waiting claims), the Clusters (unpausing
// one resumes its claims) and ipledger's change feed: an event naming a
// claim's owner id (a value released or taken by hand) reconciles that
// claim, and an event that may free a value in a pool reconciles the
// claims waiting on it. Nothing is polled on a timer.
func SetupClaimController(mgr ctrl.Manager, r *ClaimReconciler, w *feed.Watcher, opts controller.Options) error {
	c := mgr.GetClient()
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		cl, ok := o.(*ipamv1.IPAddressClaim)
		return ok && isOurs(cl.Spec.PoolRef)
	})
	changed := predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{})

	// waiting lists the claims matching opts that are not Ready.
	waiting := func(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
		var l ipamv1.IPAddressClaimList
		if err := c.List(ctx, &l, opts...); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range l.Items {
			if !meta.IsStatusConditionTrue(l.Items[i].Status.Conditions, ipamv1.IPAddressClaimReadyCondition) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
			}
		}
		return out
	}
	// lost lists the claims matching opts whose value was lost
	// (AllocationFailed).
	lost := func(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
		var l ipamv1.IPAddressClaimList
		if err := c.List(ctx, &l, opts...); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range l.Items {
			cond := meta.FindStatusCondition(l.Items[i].Status.Conditions, ipamv1.IPAddressClaimReadyCondition)
			if cond != nil && cond.Reason == ipamv1.IPAddressClaimReadyAllocationFailedReason {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
			}
		}
		return out
	}
	all := func(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
		var l ipamv1.IPAddressClaimList
		if err := c.List(ctx, &l, opts...); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(l.Items))
		for i := range l.Items {
			if isOurs(l.Items[i].Spec.PoolRef) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
			}
		}
		return out
	}

	feedSrc := w.Source(func(ctx context.Context, resync bool, ev ledger.Event) []reconcile.Request {
		if resync {
			return all(ctx)
		}
		var out []reconcile.Request
		for _, o := range ev.Owners() {
			if o.Type == OwnerType {
				out = append(out, all(ctx, client.MatchingFields{indexOwnerID: o.ID})...)
			}
		}
		if ev.Pool != "" && freeingActions[ev.Action] {
			out = append(out, waiting(ctx, client.MatchingFields{indexLedgerPool: ev.Pool})...)
		} else if ev.Pool != "" && strings.HasPrefix(ev.Action, "allocation.") {
			// A claim whose value was released by hand says who holds
			// the value now.
			out = append(out, lost(ctx, client.MatchingFields{indexLedgerPool: ev.Pool})...)
		}
		return out
	})

	poolToClaims := func(kind string) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			key := poolRefKey(kind, o.GetNamespace(), o.GetName())
			return waiting(ctx, client.MatchingFields{indexPoolRef: key})
		})
	}
	readyChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		a, b := e.ObjectOld.(v1alpha1.PoolObject), e.ObjectNew.(v1alpha1.PoolObject)
		return readyOf(a.PoolStatus().Conditions) != readyOf(b.PoolStatus().Conditions) ||
			a.PoolStatus().ObservedGeneration != b.PoolStatus().ObservedGeneration ||
			a.PoolStatus().Gateway != b.PoolStatus().Gateway
	}}
	clusterToClaims := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return all(ctx, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexCluster: o.GetName()})
	})
	pauseChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return isPaused(e.ObjectOld) != isPaused(e.ObjectNew)
	}}

	return ctrl.NewControllerManagedBy(mgr).
		Named("ipaddressclaim").
		For(&ipamv1.IPAddressClaim{}, builder.WithPredicates(ours, changed)).
		Owns(&ipamv1.IPAddress{}, builder.WithPredicates(predicate.Funcs{
			// Only a deleted or changed IPAddress needs the claim.
			CreateFunc: func(event.CreateEvent) bool { return false },
		})).
		Watches(&v1alpha1.LedgerIPPool{}, poolToClaims(v1alpha1.LedgerIPPoolKind), builder.WithPredicates(readyChanged)).
		Watches(&v1alpha1.GlobalLedgerIPPool{}, poolToClaims(v1alpha1.GlobalLedgerIPPoolKind), builder.WithPredicates(readyChanged)).
		Watches(&clusterv1.Cluster{}, clusterToClaims, builder.WithPredicates(pauseChanged)).
		WatchesRawSource(feedSrc).
		WithOptions(opts).
		Complete(r)
}

func readyOf(conds []metav1.Condition) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(conds, v1alpha1.ReadyCondition); c != nil {
		return c.Status
	}
	return metav1.ConditionUnknown
}

func isPaused(o client.Object) bool {
	if _, ok := o.GetAnnotations()[clusterv1.PausedAnnotation]; ok {
		return true
	}
	cl, ok := o.(*clusterv1.Cluster)
	return ok && cl.Spec.Paused != nil && *cl.Spec.Paused
}
