package ipam

import (
	"context"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
)

// Cache indexes the controllers look objects up by.
const (
	// indexOwnerID: a claim by its ipledger owner id (annotation).
	indexOwnerID = "ipledger.ownerID"
	// indexLedgerPool: a claim by the ipledger pool of its value
	// (annotation), and a pool object by spec.pool.
	indexLedgerPool = "ipledger.pool"
	// indexPoolRef: a claim by the pool object it names, "Kind/ns/name".
	indexPoolRef = "ipledger.poolRef"
	// indexCluster: a claim by its Cluster's name.
	indexCluster = "ipledger.cluster"
)

func poolRefKey(kind, namespace, name string) string {
	if kind == v1alpha1.GlobalLedgerIPPoolKind {
		namespace = ""
	}
	return kind + "/" + namespace + "/" + name
}

// SetupIndexes registers the indexes with mgr's cache.
func SetupIndexes(ctx context.Context, mgr manager.Manager) error {
	fi := mgr.GetFieldIndexer()
	claim := func(f func(c *ipamv1.IPAddressClaim) string) client.IndexerFunc {
		return func(o client.Object) []string {
			c := o.(*ipamv1.IPAddressClaim)
			if !isOurs(c.Spec.PoolRef) {
				return nil
			}
			if v := f(c); v != "" {
				return []string{v}
			}
			return nil
		}
	}
	for name, f := range map[string]func(c *ipamv1.IPAddressClaim) string{
		indexOwnerID:    func(c *ipamv1.IPAddressClaim) string { return c.Annotations[OwnerIDAnnotation] },
		indexLedgerPool: func(c *ipamv1.IPAddressClaim) string { return c.Annotations[PoolAnnotation] },
		indexPoolRef: func(c *ipamv1.IPAddressClaim) string {
			return poolRefKey(c.Spec.PoolRef.Kind, c.Namespace, c.Spec.PoolRef.Name)
		},
		indexCluster: claimCluster,
	} {
		if err := fi.IndexField(ctx, &ipamv1.IPAddressClaim{}, name, claim(f)); err != nil {
			return err
		}
	}
	pool := func(o client.Object) []string { return []string{o.(v1alpha1.PoolObject).PoolSpec().Pool} }
	if err := fi.IndexField(ctx, &v1alpha1.LedgerIPPool{}, indexLedgerPool, pool); err != nil {
		return err
	}
	return fi.IndexField(ctx, &v1alpha1.GlobalLedgerIPPool{}, indexLedgerPool, pool)
}
