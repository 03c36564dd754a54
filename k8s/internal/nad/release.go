package nad

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
)

// release completes an attachment's deletion: first its
// NetworkAttachmentDefinition goes (no pod starts with the values any
// more), then every value the owner holds is released in ipledger in one
// request, then the finalizer is removed. Until ipledger answers, the
// finalizer stays (retried with backoff, and at once when the feed finds
// ipledger back), so no value is left allocated behind a deleted
// attachment.
func (r *Reconciler) release(ctx context.Context, lna *v1alpha1.LedgerNetworkAttachment) error {
	if !controllerutil.ContainsFinalizer(lna, Finalizer) {
		return nil
	}
	nad := newNAD(lna.Namespace, lna.Name)
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(nad), nad)
	switch {
	case err == nil:
		if ref := metav1.GetControllerOf(nad); ref != nil && ref.UID == lna.UID && nad.GetDeletionTimestamp().IsZero() {
			uid := nad.GetUID()
			if err := r.Client.Delete(ctx, nad, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	case !apierrors.IsNotFound(err):
		return err
	}
	if id := lna.Annotations[OwnerIDAnnotation]; id != "" {
		owner := r.owner(lna)
		if err := r.Ledger.ReleaseOwner(ctx, owner); err != nil {
			r.Recorder.Eventf(lna, nil, "Warning", "ReleaseFailed", "Release", "releasing %s's values in ipledger: %v", owner, err)
			return fmt.Errorf("releasing %s's values: %w", owner, err)
		}
		logf.FromContext(ctx).Info("released", "owner", owner.ID, "addresses", lna.Status.Addresses)
		r.Recorder.Eventf(lna, nil, "Normal", "Released", "Release", "released every value of %s in ipledger (%s)", owner, strings.Join(lna.Status.Addresses, ", "))
	}
	before := lna.DeepCopy()
	controllerutil.RemoveFinalizer(lna, Finalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, lna, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}
