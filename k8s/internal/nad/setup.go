package nad

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
	"github.com/ipledger/ipledger/k8s/internal/feed"
	"github.com/ipledger/ipledger/k8s/internal/ledger"
)

// Cache indexes of attachments.
const (
	indexOwnerID = "ipledger.nad.ownerID" // the owner id annotation
	indexPool    = "ipledger.nad.pool"    // each pool of spec.addresses
)

// freeingActions are the feed's actions after which a value may be free
// that was not: an attachment waiting on the pool tries again.
var freeingActions = map[string]bool{
	"allocation.release": true, "allocation.unquarantine": true, "allocation.quarantine_expired": true,
}

// Available tells whether the API server serves both kinds the controller
// needs: LedgerNetworkAttachment and NetworkAttachmentDefinition (Multus'
// CRD). A cluster without them runs the IPAM provider alone.
func Available(mgr ctrl.Manager) (bool, error) {
	for _, gvk := range []struct{ group, version, kind string }{
		{v1alpha1.GroupVersion.Group, v1alpha1.GroupVersion.Version, "LedgerNetworkAttachment"},
		{NADKind.Group, NADKind.Version, NADKind.Kind},
	} {
		_, err := mgr.GetRESTMapper().RESTMapping(schemaGK(gvk.group, gvk.kind), gvk.version)
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("looking up %s.%s: %w", gvk.kind, gvk.group, err)
		}
	}
	return true, nil
}

// Setup registers the controller with mgr when the API server serves its
// kinds, and says so in the log either way. Besides the attachments and
// their NetworkAttachmentDefinitions it follows ipledger's change feed:
// an event naming an attachment's owner (a value released or given by
// hand) reconciles it, a pool's event reconciles the attachments of the
// pool (its gateway may have changed), and a value freed in a pool
// reconciles the attachments waiting on it. Nothing is polled on a timer.
func Setup(ctx context.Context, mgr ctrl.Manager, r *Reconciler, w *feed.Watcher, opts controller.Options, log logr.Logger) error {
	ok, err := Available(mgr)
	if err != nil {
		return err
	}
	if !ok {
		log.Info("LedgerNetworkAttachment controller off: the API server does not serve LedgerNetworkAttachment and NetworkAttachmentDefinition (install Multus' CRD and ipledger's)")
		return nil
	}
	fi := mgr.GetFieldIndexer()
	if err := fi.IndexField(ctx, &v1alpha1.LedgerNetworkAttachment{}, indexOwnerID, func(o client.Object) []string {
		if id := o.GetAnnotations()[OwnerIDAnnotation]; id != "" {
			return []string{id}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := fi.IndexField(ctx, &v1alpha1.LedgerNetworkAttachment{}, indexPool, func(o client.Object) []string {
		var out []string
		for _, a := range o.(*v1alpha1.LedgerNetworkAttachment).Spec.Addresses {
			out = append(out, a.Pool)
		}
		return out
	}); err != nil {
		return err
	}

	c := mgr.GetClient()
	list := func(ctx context.Context, keep func(*v1alpha1.LedgerNetworkAttachment) bool, opts ...client.ListOption) []reconcile.Request {
		var l v1alpha1.LedgerNetworkAttachmentList
		if err := c.List(ctx, &l, opts...); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range l.Items {
			if keep == nil || keep(&l.Items[i]) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
			}
		}
		return out
	}
	notReady := func(a *v1alpha1.LedgerNetworkAttachment) bool {
		return !meta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ReadyCondition)
	}
	feedSrc := w.Source(func(ctx context.Context, resync bool, ev ledger.Event) []reconcile.Request {
		if resync {
			return list(ctx, nil)
		}
		var out []reconcile.Request
		for _, o := range ev.Owners() {
			if o.Type == OwnerType {
				out = append(out, list(ctx, nil, client.MatchingFields{indexOwnerID: o.ID})...)
			}
		}
		switch {
		case ev.Pool == "":
		case strings.HasPrefix(ev.Action, "pool."):
			out = append(out, list(ctx, nil, client.MatchingFields{indexPool: ev.Pool})...)
		case freeingActions[ev.Action]:
			out = append(out, list(ctx, notReady, client.MatchingFields{indexPool: ev.Pool})...)
		}
		return out
	})

	return ctrl.NewControllerManagedBy(mgr).
		Named("ledgernetworkattachment").
		For(&v1alpha1.LedgerNetworkAttachment{}, builder.WithPredicates(
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// A definition changed or deleted by hand is written again.
		Owns(newNAD("", ""), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
		})).
		WatchesRawSource(feedSrc).
		WithOptions(opts).
		Complete(r)
}
