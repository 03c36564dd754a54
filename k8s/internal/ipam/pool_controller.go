package ipam

import (
	"context"
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
	"github.com/ipledger/ipledger/k8s/internal/feed"
	"github.com/ipledger/ipledger/k8s/internal/ledger"
)

// Ledger is what the provider asks of ipledger; *ledger.Client is one.
type Ledger interface {
	GetPool(ctx context.Context, name string) (ledger.Pool, error)
	Allocate(ctx context.Context, pool string, owner ledger.Owner) (ledger.Allocation, bool, error)
	OwnerAllocations(ctx context.Context, pool string, owner ledger.Owner) ([]ledger.Allocation, error)
	Release(ctx context.Context, pool, value string, owner ledger.Owner) error
	Holder(ctx context.Context, pool, value string) (*ledger.Allocation, error)
}

// PoolReconciler writes a pool object's status from its ipledger pool:
// Ready, the type, the gateway and the counts of the automatic ranges.
type PoolReconciler struct {
	Client client.Client
	Ledger Ledger
	// New returns an empty object of the kind reconciled.
	New func() v1alpha1.PoolObject
}

// Reconcile reads the ipledger pool and writes the status.
func (r *PoolReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, nil
	}
	before := obj.DeepCopyObject().(v1alpha1.PoolObject)
	spec, st := obj.PoolSpec(), obj.PoolStatus()
	p, err := r.Ledger.GetPool(ctx, spec.Pool)
	cond := metav1.Condition{Type: v1alpha1.ReadyCondition, ObservedGeneration: obj.GetGeneration()}
	var retry error
	switch {
	case ledger.IsNotFound(err):
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonPoolNotFound
		cond.Message = fmt.Sprintf("ipledger has no pool %q", spec.Pool)
	case err != nil:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonLedgerUnreachable
		cond.Message = fmt.Sprintf("reading ipledger pool %q: %v", spec.Pool, err)
		retry = err
	default:
		st.Type, st.Gateway = p.Type, p.Gateway
		st.Size, st.Allocated, st.Free = p.Stats.Auto.Size, p.Stats.Auto.Allocated, p.Stats.Auto.Free
		if msg := checkPoolSpec(spec, p); msg != "" {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonInvalidSpec, msg
			if !isAddressType(p.Type) {
				cond.Reason = ReasonNotAnAddressPool
			}
		} else {
			cond.Status, cond.Reason = metav1.ConditionTrue, ReasonReady
			cond.Message = fmt.Sprintf("ipledger pool %q (%s): %s of %s free", spec.Pool, p.Type, p.Stats.Auto.Free, p.Stats.Auto.Size)
		}
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	st.ObservedGeneration = obj.GetGeneration()
	if !equality.Semantic.DeepEqual(before.PoolStatus(), st) {
		if err := r.Client.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	return reconcile.Result{}, retry
}

func isAddressType(t string) bool {
	return t == ledger.TypeIPv4 || t == ledger.TypeIPv6 || t == ledger.TypeIPv6Prefix
}

// checkPoolSpec says what in spec does not fit the ipledger pool p, or "".
func checkPoolSpec(spec *v1alpha1.LedgerIPPoolSpec, p ledger.Pool) string {
	if !isAddressType(p.Type) {
		return fmt.Sprintf("ipledger pool %q is of type %s; an IPAddress needs an ipv4, ipv6 or ipv6prefix pool", spec.Pool, p.Type)
	}
	bits := 128
	if p.Type == ledger.TypeIPv4 {
		bits = 32
	}
	if spec.Prefix == nil && p.Type != ledger.TypeIPv6Prefix {
		return fmt.Sprintf("spec.prefix is required for the %s pool %q (0 to %d)", p.Type, spec.Pool, bits)
	}
	if spec.Prefix != nil && (*spec.Prefix < 0 || int(*spec.Prefix) > bits) {
		return fmt.Sprintf("spec.prefix %d does not fit the %s pool %q (0 to %d)", *spec.Prefix, p.Type, spec.Pool, bits)
	}
	if spec.Gateway != "" {
		gw, err := netip.ParseAddr(spec.Gateway)
		if err != nil || gw.Zone() != "" || gw.Is4In6() {
			return fmt.Sprintf("spec.gateway %q is not an IP address", spec.Gateway)
		}
		if gw.Is4() != (p.Type == ledger.TypeIPv4) {
			return fmt.Sprintf("spec.gateway %s is not of the %s pool %q's family", spec.Gateway, p.Type, spec.Pool)
		}
	}
	return ""
}

// SetupPoolController registers the controller of one pool kind (kind is
// LedgerIPPoolKind or GlobalLedgerIPPoolKind).
func SetupPoolController(mgr ctrl.Manager, l Ledger, w *feed.Watcher, newObj func() v1alpha1.PoolObject, kind string, opts controller.Options) error {
	r := &PoolReconciler{Client: mgr.GetClient(), Ledger: l, New: newObj}
	list := func(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
		var out []reconcile.Request
		if kind == v1alpha1.LedgerIPPoolKind {
			var l v1alpha1.LedgerIPPoolList
			if err := mgr.GetClient().List(ctx, &l, opts...); err == nil {
				for i := range l.Items {
					out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: l.Items[i].Namespace, Name: l.Items[i].Name}})
				}
			}
			return out
		}
		var l v1alpha1.GlobalLedgerIPPoolList
		if err := mgr.GetClient().List(ctx, &l, opts...); err == nil {
			for i := range l.Items {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: l.Items[i].Name}})
			}
		}
		return out
	}
	// Every event of an ipledger pool (an allocation, a release, a range
	// grown) refreshes the pool objects that name it.
	src := w.Source(func(ctx context.Context, resync bool, ev ledger.Event) []reconcile.Request {
		if resync {
			return list(ctx)
		}
		if ev.Pool == "" {
			return nil
		}
		return list(ctx, client.MatchingFields{indexLedgerPool: ev.Pool})
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(newObj(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named(kind).
		WithOptions(opts).
		WatchesRawSource(src).
		Complete(r)
}
