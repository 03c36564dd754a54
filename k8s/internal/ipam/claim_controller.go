package ipam

import (
	"context"
	"fmt"
	"net/netip"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
	"github.com/ipledger/ipledger/k8s/internal/ledger"
)

// ClaimReconciler gives each IPAddressClaim of this provider's pools a
// value from ipledger and an IPAddress holding it (docs/kubernetes.md,
// "IPAddressClaims").
type ClaimReconciler struct {
	Client client.Client
	// APIReader reads past the cache, for the few reads that must not be
	// stale (an IPAddress that exists although the cache has none).
	APIReader   client.Reader
	Ledger      Ledger
	Recorder    events.EventRecorder
	ClusterName string
}

// Reconcile drives one claim to Ready, or releases it when it is deleted.
func (r *ClaimReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	claim := &ipamv1.IPAddressClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !isOurs(claim.Spec.PoolRef) {
		return reconcile.Result{}, nil
	}
	if !claim.DeletionTimestamp.IsZero() {
		return r.release(ctx, claim)
	}
	if paused, err := r.paused(ctx, claim); err != nil || paused {
		return reconcile.Result{}, err
	}

	pool, why, err := r.pool(ctx, claim)
	switch {
	case err != nil:
		return reconcile.Result{}, err
	case why != "":
		return reconcile.Result{}, r.setReady(ctx, claim, metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason, why)
	case pool == nil:
		return reconcile.Result{}, nil
	}
	owner, ledgerPool, fresh, err := r.adopt(ctx, claim, pool)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !fresh && claim.Status.AddressRef.Name == "" {
		// The cache may not show yet that the claim was given an
		// address; whether it was decides between looking its value up
		// and allocating one, so ask the API server.
		if err := r.APIReader.Get(ctx, req.NamespacedName, claim); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}

	alloc, reason, msg, err := r.value(ctx, claim, ledgerPool, owner)
	if reason != "" {
		if serr := r.setReady(ctx, claim, metav1.ConditionFalse, reason, msg); serr != nil && err == nil {
			err = serr
		}
		return reconcile.Result{}, err
	}

	addr, prefix, gateway, why := addressOf(alloc.Value, pool)
	if why != "" {
		return reconcile.Result{}, r.setReady(ctx, claim, metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason, why)
	}
	why, err = r.ensureIPAddress(ctx, claim, pool, addr, prefix, gateway)
	if err != nil {
		return reconcile.Result{}, err
	}
	if why != "" {
		return reconcile.Result{}, r.setReady(ctx, claim, metav1.ConditionFalse, ipamv1.IPAddressClaimReadyAllocationFailedReason, why)
	}
	before := claim.DeepCopy()
	claim.Status.AddressRef.Name = claim.Name
	return reconcile.Result{}, r.patchReady(ctx, claim, before, metav1.ConditionTrue, clusterv1.ReadyReason,
		fmt.Sprintf("%s/%d from ipledger pool %q", addr, prefix, ledgerPool))
}

// paused tells whether the claim is left alone: the claim or its Cluster
// carries the paused annotation, or the Cluster's spec.paused is true. A
// Cluster that does not exist pauses nothing.
func (r *ClaimReconciler) paused(ctx context.Context, claim *ipamv1.IPAddressClaim) (bool, error) {
	if _, ok := claim.Annotations[clusterv1.PausedAnnotation]; ok {
		return true, nil
	}
	name := claimCluster(claim)
	if name == "" {
		return false, nil
	}
	cl := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: name}, cl); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	_, ann := cl.Annotations[clusterv1.PausedAnnotation]
	return ann || ptr.Deref(cl.Spec.Paused, false), nil
}

// pool returns the claim's Ready pool object, or why it cannot be used,
// or neither while the pool's status is not written yet.
func (r *ClaimReconciler) pool(ctx context.Context, claim *ipamv1.IPAddressClaim) (v1alpha1.PoolObject, string, error) {
	ref := claim.Spec.PoolRef
	var obj v1alpha1.PoolObject = &v1alpha1.LedgerIPPool{}
	key := types.NamespacedName{Namespace: claim.Namespace, Name: ref.Name}
	if ref.Kind == v1alpha1.GlobalLedgerIPPoolKind {
		obj, key.Namespace = &v1alpha1.GlobalLedgerIPPool{}, ""
	}
	if err := r.Client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("%s %s not found", ref.Kind, key), nil
		}
		return nil, "", err
	}
	c := meta.FindStatusCondition(obj.PoolStatus().Conditions, v1alpha1.ReadyCondition)
	switch {
	case c == nil || c.ObservedGeneration != obj.GetGeneration():
		// Its status (ipledger's type and gateway) is not written for
		// this spec yet; the pool's Ready change brings the claim back.
		return nil, "", nil
	case c.Status != metav1.ConditionTrue:
		return nil, fmt.Sprintf("%s %s is not ready: %s", ref.Kind, key, c.Message), nil
	}
	return obj, "", nil
}

// adopt puts the finalizer and the ipledger pool and owner id annotations
// on the claim, in one write before anything is allocated, and returns
// the owner, the ipledger pool and whether claim was just written (and so
// is fresh from the API server). Once written, the annotations are what
// the claim is known by in ipledger.
func (r *ClaimReconciler) adopt(ctx context.Context, claim *ipamv1.IPAddressClaim, pool v1alpha1.PoolObject) (ledger.Owner, string, bool, error) {
	id, lp := claim.Annotations[OwnerIDAnnotation], claim.Annotations[PoolAnnotation]
	if id != "" && lp != "" && controllerutil.ContainsFinalizer(claim, Finalizer) {
		return ledger.Owner{Type: OwnerType, ID: id}, lp, false, nil
	}
	before := claim.DeepCopy()
	if id == "" {
		id = OwnerID(r.ClusterName, claim.Namespace, claim.Name)
	}
	if lp == "" {
		lp = pool.PoolSpec().Pool
	}
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	claim.Annotations[OwnerIDAnnotation], claim.Annotations[PoolAnnotation] = id, lp
	controllerutil.AddFinalizer(claim, Finalizer)
	if err := r.Client.Patch(ctx, claim, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return ledger.Owner{}, "", false, err
	}
	return ledger.Owner{Type: OwnerType, ID: id}, lp, true, nil
}

// value returns the claim's value in ipledger. A claim that never had an
// address is given one (idempotent per owner: asked again, ipledger
// answers the value the owner holds). A claim that had one is only looked
// up: if ipledger no longer holds a value for it, someone released it
// there, and the claim says so instead of taking another address behind
// its machine's back. A non-empty reason is the Ready condition to show.
func (r *ClaimReconciler) value(ctx context.Context, claim *ipamv1.IPAddressClaim, pool string, owner ledger.Owner) (ledger.Allocation, string, string, error) {
	log := logf.FromContext(ctx)
	if claim.Status.AddressRef.Name != "" {
		held, err := r.Ledger.OwnerAllocations(ctx, pool, owner)
		if err != nil {
			return ledger.Allocation{}, ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("reading the claim's value in ipledger pool %q: %v", pool, err), ledger.Retryable(err)
		}
		if len(held) == 0 {
			msg := r.lostMessage(ctx, claim, pool, owner)
			r.Recorder.Eventf(claim, nil, "Warning", "AddressReleased", "Check", "%s", msg)
			return ledger.Allocation{}, ipamv1.IPAddressClaimReadyAllocationFailedReason, msg, nil
		}
		return held[0], "", "", nil
	}
	a, created, err := r.Ledger.Allocate(ctx, pool, owner)
	switch {
	case ledger.IsCode(err, "pool_exhausted"):
		return a, ipamv1.IPAddressClaimReadyPoolExhaustedReason, fmt.Sprintf("ipledger pool %q is exhausted; the claim is given a value as soon as one frees: %v", pool, err), nil
	case ledger.IsNotFound(err):
		return a, ipamv1.IPAddressClaimReadyPoolNotReadyReason, err.Error(), nil
	case err != nil:
		return a, ipamv1.IPAddressClaimReadyAllocationFailedReason, err.Error(), ledger.Retryable(err)
	}
	if created {
		log.Info("allocated", "pool", pool, "value", a.Value, "owner", owner.ID)
		r.Recorder.Eventf(claim, nil, "Normal", "Allocated", "Allocate", "allocated %s from ipledger pool %q to %s", a.Value, pool, owner)
	}
	return a, "", "", nil
}

// lostMessage says what became of the claim's value in ipledger.
func (r *ClaimReconciler) lostMessage(ctx context.Context, claim *ipamv1.IPAddressClaim, pool string, owner ledger.Owner) string {
	ip := &ipamv1.IPAddress{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(claim), ip); err != nil || ip.Spec.Address == "" {
		return fmt.Sprintf("ipledger pool %q no longer holds a value for %s: it was released there; delete the claim, or allocate its value to that owner again in ipledger", pool, owner)
	}
	value := ip.Spec.Address
	h, err := r.Ledger.Holder(ctx, pool, value)
	if err == nil && h == nil {
		// An ipv6prefix pool keys its values by CIDR.
		h, err = r.Ledger.Holder(ctx, pool, fmt.Sprintf("%s/%d", value, ptr.Deref(ip.Spec.Prefix, 128)))
	}
	switch {
	case err != nil:
		return fmt.Sprintf("%s was released in ipledger pool %q: delete the claim, or allocate %s to %s again in ipledger", value, pool, value, owner)
	case h == nil:
		return fmt.Sprintf("%s was released in ipledger pool %q and is free there; the claim's IPAddress still says %s: delete the claim, or allocate %s to %s again in ipledger", value, pool, value, value, owner)
	case h.OwnerType == "":
		return fmt.Sprintf("%s was released in ipledger pool %q and is %s there: delete the claim", value, pool, h.State)
	default:
		return fmt.Sprintf("%s was released in ipledger pool %q and is now held by %s/%s: delete the claim", value, pool, h.OwnerType, h.OwnerID)
	}
}

// addressOf splits an ipledger value into the IPAddress's address and
// prefix (an ipv6prefix block is a CIDR; a plain value takes spec.prefix)
// and picks the gateway (spec.gateway, else the ipledger pool's).
func addressOf(value string, pool v1alpha1.PoolObject) (addr string, prefix int32, gateway, why string) {
	spec, st := pool.PoolSpec(), pool.PoolStatus()
	gateway = spec.Gateway
	if gateway == "" {
		gateway = st.Gateway
	}
	if p, err := netip.ParsePrefix(value); err == nil {
		prefix = int32(p.Bits())
		if spec.Prefix != nil {
			prefix = *spec.Prefix
		}
		return p.Addr().String(), prefix, gateway, ""
	}
	a, err := netip.ParseAddr(value)
	if err != nil {
		return "", 0, "", fmt.Sprintf("ipledger pool %q gave %q, which is not an address: it is not an address pool", spec.Pool, value)
	}
	if spec.Prefix == nil {
		return "", 0, "", fmt.Sprintf("spec.prefix of the pool is required for the address %s", value)
	}
	return a.String(), *spec.Prefix, gateway, ""
}

// setReady writes the claim's Ready condition.
func (r *ClaimReconciler) setReady(ctx context.Context, claim *ipamv1.IPAddressClaim, status metav1.ConditionStatus, reason, msg string) error {
	return r.patchReady(ctx, claim, claim.DeepCopy(), status, reason, msg)
}

// patchReady sets the Ready condition on claim and patches the status
// against before when anything changed.
func (r *ClaimReconciler) patchReady(ctx context.Context, claim, before *ipamv1.IPAddressClaim, status metav1.ConditionStatus, reason, msg string) error {
	changed := meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{
		Type: ipamv1.IPAddressClaimReadyCondition, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: claim.Generation,
	})
	if !changed && before.Status.AddressRef == claim.Status.AddressRef {
		return nil
	}
	if status == metav1.ConditionFalse {
		logf.FromContext(ctx).Info("claim not ready", "reason", reason, "message", msg)
		r.Recorder.Eventf(claim, nil, "Warning", reason, "Allocate", "%s", msg)
	}
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, claim, client.MergeFrom(before)))
}
