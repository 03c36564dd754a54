package ipam

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
)

// ensureIPAddress makes sure the IPAddress of the claim's name exists and
// holds addr. It is created when missing (also after someone deleted it:
// the claim keeps its value in ipledger, so the same address comes back).
// An IPAddress that exists with another address is left as it is, and the
// returned text says so for the claim's Ready condition.
func (r *ClaimReconciler) ensureIPAddress(ctx context.Context, claim *ipamv1.IPAddressClaim, pool v1alpha1.PoolObject, addr string, prefix int32, gateway string) (string, error) {
	key := client.ObjectKeyFromObject(claim)
	cur := &ipamv1.IPAddress{}
	err := r.Client.Get(ctx, key, cur)
	if err == nil {
		return mismatch(cur, claim, addr), nil
	}
	if !apierrors.IsNotFound(err) {
		return "", err
	}
	gv := v1alpha1.GroupVersion
	ip := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name: claim.Name, Namespace: claim.Namespace,
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: ipamv1.GroupVersion.String(), Kind: "IPAddressClaim", Name: claim.Name, UID: claim.UID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
				{APIVersion: gv.String(), Kind: claim.Spec.PoolRef.Kind, Name: pool.GetName(), UID: pool.GetUID(),
					BlockOwnerDeletion: ptr.To(true)},
			},
		},
		Spec: ipamv1.IPAddressSpec{
			ClaimRef: ipamv1.IPAddressClaimReference{Name: claim.Name},
			PoolRef:  claim.Spec.PoolRef,
			Address:  addr,
			Prefix:   ptr.To(prefix),
			Gateway:  gateway,
		},
	}
	if c := claimCluster(claim); c != "" {
		ip.Labels = map[string]string{clusterNameLabel: c}
	}
	err = r.Client.Create(ctx, ip)
	if apierrors.IsAlreadyExists(err) {
		// The cache had not seen it yet: read it from the API server.
		if err := r.APIReader.Get(ctx, key, cur); err != nil {
			return "", err
		}
		return mismatch(cur, claim, addr), nil
	}
	return "", err
}

// mismatch says why an existing IPAddress cannot stand for the claim's
// value addr, or "".
func mismatch(cur *ipamv1.IPAddress, claim *ipamv1.IPAddressClaim, addr string) string {
	if cur.Spec.ClaimRef.Name != claim.Name {
		return fmt.Sprintf("IPAddress %s/%s belongs to the claim %q, not to this one", cur.Namespace, cur.Name, cur.Spec.ClaimRef.Name)
	}
	if cur.Spec.Address != addr {
		return fmt.Sprintf("IPAddress %s/%s says %s but ipledger holds %s for this claim: delete the IPAddress to have it written again", cur.Namespace, cur.Name, cur.Spec.Address, addr)
	}
	return ""
}
