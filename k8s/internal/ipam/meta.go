// Package ipam is the Cluster API IPAM provider of ipledger-k8s: the pool
// controller (LedgerIPPool, GlobalLedgerIPPool: status from ipledger's pool
// stats) and the claim controller (IPAddressClaim → allocation in ipledger
// → IPAddress), following the ipam.cluster.x-k8s.io v1beta2 contract. See
// docs/kubernetes.md.
package ipam

import (
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
)

// Names this provider writes on the objects it handles.
const (
	// Finalizer keeps a claim until its value is released in ipledger and
	// its IPAddress deleted.
	Finalizer = "ipam.ipledger.io/release-address"
	// PoolAnnotation on a claim names the ipledger pool its value comes
	// from, so that deletion releases it also when the Kubernetes pool is
	// gone.
	PoolAnnotation = "ipam.ipledger.io/pool"
	// OwnerIDAnnotation on a claim is its owner id in ipledger.
	OwnerIDAnnotation = "ipam.ipledger.io/owner-id"
)

// Reasons of a pool's Ready condition. The claim's reasons are the
// contract's (ipamv1.IPAddressClaimReady*Reason).
const (
	ReasonReady             = "Ready"
	ReasonPoolNotFound      = "PoolNotFound"
	ReasonNotAnAddressPool  = "NotAnAddressPool"
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonLedgerUnreachable = "LedgerUnreachable"
)

// isOurs tells whether a claim's poolRef names one of this provider's
// pool kinds.
func isOurs(ref ipamv1.IPPoolReference) bool {
	return ref.APIGroup == v1alpha1.GroupVersion.Group &&
		(ref.Kind == v1alpha1.LedgerIPPoolKind || ref.Kind == v1alpha1.GlobalLedgerIPPoolKind)
}

// claimCluster is the name of the Cluster a claim belongs to:
// spec.clusterName, else the cluster.x-k8s.io/cluster-name label.
func claimCluster(c *ipamv1.IPAddressClaim) string {
	if c.Spec.ClusterName != "" {
		return c.Spec.ClusterName
	}
	return c.Labels[clusterNameLabel]
}

const clusterNameLabel = "cluster.x-k8s.io/cluster-name"
