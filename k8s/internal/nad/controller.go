package nad

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
	"github.com/ipledger/ipledger/k8s/internal/ledger"
)

// Ledger is what the controller asks of ipledger; *ledger.Client is one.
type Ledger interface {
	GetPool(ctx context.Context, name string) (ledger.Pool, error)
	AllocateOwner(ctx context.Context, owner ledger.Owner, pools []string) ([]ledger.Allocation, error)
	OwnerAllocations(ctx context.Context, pool string, owner ledger.Owner) ([]ledger.Allocation, error)
	Release(ctx context.Context, pool, value string, owner ledger.Owner) error
	ReleaseOwner(ctx context.Context, owner ledger.Owner) error
}

// Reconciler drives each LedgerNetworkAttachment: values in ipledger, a
// NetworkAttachmentDefinition carrying them, and the Ready condition.
type Reconciler struct {
	Client      client.Client
	Ledger      Ledger
	Recorder    events.EventRecorder
	ClusterName string
}

// notReady is why an attachment is not Ready: the condition's reason and
// message.
type notReady struct{ reason, msg string }

// Reconcile brings one attachment to Ready, or completes its deletion.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	lna := &v1alpha1.LedgerNetworkAttachment{}
	if err := r.Client.Get(ctx, req.NamespacedName, lna); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !lna.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, r.release(ctx, lna)
	}
	if err := r.adopt(ctx, lna); err != nil {
		return reconcile.Result{}, err
	}
	addrs, nr, err := r.sync(ctx, lna)
	if nr != nil {
		if serr := r.setStatus(ctx, lna, addrs, metav1.ConditionFalse, nr.reason, nr.msg); serr != nil && err == nil {
			err = serr
		}
		return reconcile.Result{}, err
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.setStatus(ctx, lna, addrs, metav1.ConditionTrue, ReasonReady,
		fmt.Sprintf("NetworkAttachmentDefinition %s carries %s from ipledger", lna.Name, strings.Join(cidrs(addrs), ", ")))
}

// adopt writes the finalizer and the owner id annotation, in one write
// before anything is allocated.
func (r *Reconciler) adopt(ctx context.Context, lna *v1alpha1.LedgerNetworkAttachment) error {
	if lna.Annotations[OwnerIDAnnotation] != "" && controllerutil.ContainsFinalizer(lna, Finalizer) {
		return nil
	}
	before := lna.DeepCopy()
	if lna.Annotations == nil {
		lna.Annotations = map[string]string{}
	}
	if lna.Annotations[OwnerIDAnnotation] == "" {
		lna.Annotations[OwnerIDAnnotation] = Owner(r.ClusterName, lna.Namespace, lna.Name).ID
	}
	controllerutil.AddFinalizer(lna, Finalizer)
	return r.Client.Patch(ctx, lna, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

func (r *Reconciler) owner(lna *v1alpha1.LedgerNetworkAttachment) ledger.Owner {
	return ledger.Owner{Type: OwnerType, ID: lna.Annotations[OwnerIDAnnotation]}
}

// sync makes ipledger hold the attachment's values and the
// NetworkAttachmentDefinition carry them. It returns the addresses
// written, or why the attachment is not Ready (with an error when a retry
// may help).
func (r *Reconciler) sync(ctx context.Context, lna *v1alpha1.LedgerNetworkAttachment) ([]Address, *notReady, error) {
	base, why := baseConfig(lna.Spec.CNI.Raw)
	if why != "" {
		return nil, &notReady{ReasonInvalidSpec, why}, nil
	}
	if nr, err := r.nadIsOurs(ctx, lna); nr != nil || err != nil {
		return nil, nr, err
	}
	pools := make([]ledger.Pool, len(lna.Spec.Addresses))
	for i, a := range lna.Spec.Addresses {
		p, nr, err := r.pool(ctx, i, a)
		if nr != nil || err != nil {
			return nil, nr, err
		}
		pools[i] = p
	}
	if err := r.releaseDropped(ctx, lna); err != nil {
		return nil, &notReady{ReasonLedgerUnreachable, err.Error()}, err
	}
	values, nr, err := r.values(ctx, lna)
	if nr != nil || err != nil {
		return nil, nr, err
	}

	var addrs []Address
	var lost []string
	for i, a := range lna.Spec.Addresses {
		v, ok := values[a.Pool]
		if !ok {
			lost = append(lost, a.Pool)
			continue
		}
		cidr, err := cidrOf(v, pools[i].Type)
		if err != nil {
			return nil, &notReady{ReasonNotAnAddressPool, fmt.Sprintf("spec.addresses[%d].pool %q: %v", i, a.Pool, err)}, nil
		}
		gw := a.Gateway
		if gw == "" {
			gw = pools[i].Gateway
		}
		addrs = append(addrs, Address{Address: cidr, Gateway: gw})
	}
	config, err := render(base, lna.Name, addrs)
	if err != nil {
		return nil, nil, err
	}
	if err := r.writeNAD(ctx, lna, config); err != nil {
		return addrs, nil, err
	}
	if len(lost) > 0 {
		msg := fmt.Sprintf("ipledger no longer holds a value of pool %s for %s: it was released there, and the NetworkAttachmentDefinition carries only what ipledger holds; allocate a value to that owner again in ipledger (ipledger owner allocate), or delete the attachment",
			strings.Join(quoteAll(lost), ", "), r.owner(lna))
		return addrs, &notReady{ReasonAddressReleased, msg}, nil
	}
	return addrs, nil, nil
}

// pool reads the ipledger pool of spec.addresses[i] and checks it holds
// addresses of the gateway's family.
func (r *Reconciler) pool(ctx context.Context, i int, a v1alpha1.AttachmentAddress) (ledger.Pool, *notReady, error) {
	p, err := r.Ledger.GetPool(ctx, a.Pool)
	switch {
	case ledger.IsNotFound(err):
		return p, &notReady{ReasonPoolNotFound, fmt.Sprintf("spec.addresses[%d].pool: ipledger has no pool %q", i, a.Pool)}, nil
	case ledger.IsUnreachable(err):
		return p, &notReady{ReasonLedgerUnreachable, fmt.Sprintf("reading ipledger pool %q: %v", a.Pool, err)}, err
	case err != nil:
		return p, &notReady{ReasonAllocationFailed, fmt.Sprintf("reading ipledger pool %q: %v", a.Pool, err)}, nil
	case !isAddressPool(p.Type):
		return p, &notReady{ReasonNotAnAddressPool, fmt.Sprintf("spec.addresses[%d].pool: ipledger pool %q is of type %s, not an address pool (ipv4, ipv6 or ipv6prefix)", i, a.Pool, p.Type)}, nil
	}
	if a.Gateway != "" {
		if why := gatewayFits(a.Gateway, p.Type); why != "" {
			return p, &notReady{ReasonInvalidSpec, fmt.Sprintf("spec.addresses[%d].gateway: %s (ipledger pool %q); nothing was allocated", i, why, a.Pool)}, nil
		}
	}
	return p, nil, nil
}

// values returns the value the owner holds in each pool of the spec. Pools
// the attachment never had a value of are allocated first, all in one
// request (all or nothing; idempotent, so a crash before the annotation
// records them neither leaks nor doubles a value). Pools it had are only
// read: one whose value is gone was released by hand, and is left out.
func (r *Reconciler) values(ctx context.Context, lna *v1alpha1.LedgerNetworkAttachment) (map[string]string, *notReady, error) {
	owner := r.owner(lna)
	had := allocatedPools(lna)
	var fresh []string
	for _, a := range lna.Spec.Addresses {
		if !had[a.Pool] {
			fresh = append(fresh, a.Pool)
		}
	}
	values := map[string]string{}
	if len(fresh) > 0 {
		got, err := r.Ledger.AllocateOwner(ctx, owner, fresh)
		if err != nil {
			return nil, allocationRefused(err, fresh), ledger.Retryable(err)
		}
		for _, a := range got {
			values[a.Pool] = a.Value
			logf.FromContext(ctx).Info("allocated", "pool", a.Pool, "value", a.Value, "owner", owner.ID)
		}
		r.Recorder.Eventf(lna, nil, "Normal", "Allocated", "Allocate", "ipledger holds %s for %s", strings.Join(poolValues(got), ", "), owner)
		if err := r.recordPools(ctx, lna); err != nil {
			return nil, nil, err
		}
	}
	for _, a := range lna.Spec.Addresses {
		if !had[a.Pool] {
			continue
		}
		held, err := r.Ledger.OwnerAllocations(ctx, a.Pool, owner)
		if err != nil {
			return nil, &notReady{ReasonLedgerUnreachable, fmt.Sprintf("reading %s's value in ipledger pool %q: %v", owner, a.Pool, err)}, ledger.Retryable(err)
		}
		if len(held) > 0 {
			values[a.Pool] = held[0].Value
		}
	}
	return values, nil, nil
}

// allocationRefused is the Ready condition of a refused allocation of
// pools; ipledger's error names the entry as pools[i].
func allocationRefused(err error, pools []string) *notReady {
	msg := err.Error()
	var e *ledger.Error
	if errors.As(err, &e) && e.Field != "" {
		var i int
		if _, serr := fmt.Sscanf(e.Field, "pools[%d]", &i); serr == nil && i >= 0 && i < len(pools) {
			msg = fmt.Sprintf("ipledger pool %q: %s", pools[i], e.Message)
		}
	}
	switch {
	case ledger.IsCode(err, "pool_exhausted"):
		return &notReady{ReasonPoolExhausted, msg + "; the attachment is given its values as soon as one frees"}
	case ledger.IsUnreachable(err):
		return &notReady{ReasonLedgerUnreachable, msg}
	default:
		return &notReady{ReasonAllocationFailed, msg}
	}
}

// allocatedPools reads PoolsAnnotation.
func allocatedPools(lna *v1alpha1.LedgerNetworkAttachment) map[string]bool {
	out := map[string]bool{}
	for p := range strings.SplitSeq(lna.Annotations[PoolsAnnotation], ",") {
		if p != "" {
			out[p] = true
		}
	}
	return out
}

// recordPools writes the spec's pools as PoolsAnnotation.
func (r *Reconciler) recordPools(ctx context.Context, lna *v1alpha1.LedgerNetworkAttachment) error {
	var pools []string
	for _, a := range lna.Spec.Addresses {
		pools = append(pools, a.Pool)
	}
	slices.Sort(pools)
	want := strings.Join(pools, ",")
	if lna.Annotations[PoolsAnnotation] == want {
		return nil
	}
	before := lna.DeepCopy()
	lna.Annotations[PoolsAnnotation] = want
	return r.Client.Patch(ctx, lna, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// releaseDropped releases the values of the pools the attachment had and
// its spec no longer names, and records the spec's pools.
func (r *Reconciler) releaseDropped(ctx context.Context, lna *v1alpha1.LedgerNetworkAttachment) error {
	owner := r.owner(lna)
	inSpec := map[string]bool{}
	for _, a := range lna.Spec.Addresses {
		inSpec[a.Pool] = true
	}
	had := allocatedPools(lna)
	dropped := false
	for pool := range had {
		if inSpec[pool] {
			continue
		}
		dropped = true
		held, err := r.Ledger.OwnerAllocations(ctx, pool, owner)
		if err != nil && !ledger.IsNotFound(err) {
			return fmt.Errorf("reading %s's value in ipledger pool %q: %w", owner, pool, err)
		}
		for _, a := range held {
			err := r.Ledger.Release(ctx, pool, a.Value, owner)
			if err != nil && !ledger.IsNotFound(err) && !ledger.IsCode(err, "not_owner") {
				return fmt.Errorf("releasing %s in ipledger pool %q: %w", a.Value, pool, err)
			}
			r.Recorder.Eventf(lna, nil, "Normal", "Released", "Release", "released %s in ipledger pool %q: the spec no longer names the pool", a.Value, pool)
		}
	}
	if !dropped {
		return nil
	}
	before := lna.DeepCopy()
	var keep []string
	for p := range had {
		if inSpec[p] {
			keep = append(keep, p)
		}
	}
	slices.Sort(keep)
	lna.Annotations[PoolsAnnotation] = strings.Join(keep, ",")
	return r.Client.Patch(ctx, lna, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// nadIsOurs checks that a NetworkAttachmentDefinition of the attachment's
// name, if there is one, is the attachment's to write.
func (r *Reconciler) nadIsOurs(ctx context.Context, lna *v1alpha1.LedgerNetworkAttachment) (*notReady, error) {
	nad := newNAD(lna.Namespace, lna.Name)
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(nad), nad)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	if ref := metav1.GetControllerOf(nad); ref == nil || ref.UID != lna.UID {
		return &notReady{ReasonNADConflict, fmt.Sprintf("a NetworkAttachmentDefinition %s exists that this attachment does not own: delete it, or name the attachment differently; nothing was allocated", lna.Name)}, nil
	}
	return nil, nil
}

func newNAD(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(NADKind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// writeNAD creates or updates the attachment's NetworkAttachmentDefinition
// with config, controlled by the attachment.
func (r *Reconciler) writeNAD(ctx context.Context, lna *v1alpha1.LedgerNetworkAttachment, config string) error {
	nad := newNAD(lna.Namespace, lna.Name)
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, nad, func() error {
		if err := controllerutil.SetControllerReference(lna, nad, r.Client.Scheme()); err != nil {
			return err
		}
		return unstructured.SetNestedField(nad.Object, config, "spec", "config")
	})
	if err != nil {
		return fmt.Errorf("writing NetworkAttachmentDefinition %s/%s: %w", lna.Namespace, lna.Name, err)
	}
	if op != controllerutil.OperationResultNone {
		logf.FromContext(ctx).Info("NetworkAttachmentDefinition written", "operation", op, "config", config)
		r.Recorder.Eventf(lna, nil, "Normal", "NetworkAttachmentDefinition", "Write", "NetworkAttachmentDefinition %s %s: %s", lna.Name, op, config)
	}
	return nil
}

// setStatus writes Ready, the addresses and the observed generation when
// any changed.
func (r *Reconciler) setStatus(ctx context.Context, lna *v1alpha1.LedgerNetworkAttachment, addrs []Address, status metav1.ConditionStatus, reason, msg string) error {
	before := lna.DeepCopy()
	changed := meta.SetStatusCondition(&lna.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ReadyCondition, Status: status, Reason: reason, Message: msg, ObservedGeneration: lna.Generation,
	})
	lna.Status.Addresses = cidrs(addrs)
	lna.Status.ObservedGeneration = lna.Generation
	if !changed && slices.Equal(before.Status.Addresses, lna.Status.Addresses) && before.Status.ObservedGeneration == lna.Generation {
		return nil
	}
	if status == metav1.ConditionFalse {
		logf.FromContext(ctx).Info("attachment not ready", "reason", reason, "message", msg)
		r.Recorder.Eventf(lna, nil, "Warning", reason, "Reconcile", "%s", msg)
	}
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, lna, client.MergeFrom(before)))
}

func cidrs(addrs []Address) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.Address)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func poolValues(as []ledger.Allocation) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = fmt.Sprintf("%s from %q", a.Value, a.Pool)
	}
	return out
}

func quoteAll(l []string) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
