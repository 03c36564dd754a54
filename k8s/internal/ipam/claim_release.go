package ipam

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ipledger/ipledger/k8s/internal/ledger"
)

// release completes a claim's deletion, whether or not its Cluster or
// pool object still exists: the value is released in ipledger, then the
// IPAddress is deleted, then the finalizer removed. Until ipledger answers,
// the finalizer stays (retried with backoff), so no value is left
// allocated behind a deleted claim.
func (r *ClaimReconciler) release(ctx context.Context, claim *ipamv1.IPAddressClaim) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(claim, Finalizer) {
		return reconcile.Result{}, nil
	}
	log := logf.FromContext(ctx)
	pool, id := claim.Annotations[PoolAnnotation], claim.Annotations[OwnerIDAnnotation]
	if pool != "" && id != "" {
		owner := ledger.Owner{Type: OwnerType, ID: id}
		held, err := r.Ledger.OwnerAllocations(ctx, pool, owner)
		if err != nil && !ledger.IsNotFound(err) {
			r.Recorder.Eventf(claim, nil, "Warning", "ReleaseFailed", "Release", "releasing the claim's value in ipledger pool %q: %v", pool, err)
			return reconcile.Result{}, fmt.Errorf("listing %s's values in pool %q: %w", owner, pool, err)
		}
		for _, a := range held {
			err := r.Ledger.Release(ctx, pool, a.Value, owner)
			if err != nil && !ledger.IsNotFound(err) && !ledger.IsCode(err, "not_owner") {
				r.Recorder.Eventf(claim, nil, "Warning", "ReleaseFailed", "Release", "releasing %s in ipledger pool %q: %v", a.Value, pool, err)
				return reconcile.Result{}, fmt.Errorf("releasing %s in pool %q: %w", a.Value, pool, err)
			}
			log.Info("released", "pool", pool, "value", a.Value, "owner", owner.ID)
			r.Recorder.Eventf(claim, nil, "Normal", "Released", "Release", "released %s in ipledger pool %q", a.Value, pool)
		}
	}
	ip := &ipamv1.IPAddress{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(claim), ip)
	switch {
	case err == nil && ip.Spec.ClaimRef.Name == claim.Name && ip.DeletionTimestamp.IsZero():
		if err := r.Client.Delete(ctx, ip, client.Preconditions{UID: &ip.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return reconcile.Result{}, err
		}
	case err != nil && !apierrors.IsNotFound(err):
		return reconcile.Result{}, err
	}
	before := claim.DeepCopy()
	controllerutil.RemoveFinalizer(claim, Finalizer)
	return reconcile.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, claim, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}
