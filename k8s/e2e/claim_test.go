package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
	"github.com/ipledger/ipledger/k8s/internal/ipam"
	"github.com/ipledger/ipledger/k8s/internal/testenv"
)

// Hundreds of claims created at once on one pool: each gets a value of
// its own (each value once in ipledger and in the IPAddresses), all become
// Ready, the IPAddresses carry the contract's fields, and ipledger's audit
// log shows each allocation made by the manager's token. Deleting them
// all releases every value.
func TestManyClaimsAtOnce(t *testing.T) {
	t.Parallel()
	const n = 300
	for _, db := range testenv.Databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			f := setup(t, db)
			f.l.CreatePool(t, "nodes", "ipv4", "10.30.0.0", "10.30.1.255", "")
			f.manager("site-a", 10*time.Hour)
			pool := f.pool("nodes", "nodes", 23, "10.30.0.1")

			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Go(func() {
					errs <- f.c.Create(ctx, f.newClaim(fmt.Sprintf("m-%03d", i), poolRef(v1alpha1.LedgerIPPoolKind, "nodes"), "wl-1"))
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			t0 := time.Now()
			seen := map[string]string{}
			for i := range n {
				name := fmt.Sprintf("m-%03d", i)
				ip := f.ready(name)
				if other, dup := seen[ip.Spec.Address]; dup {
					t.Fatalf("%s and %s both got %s", other, name, ip.Spec.Address)
				}
				seen[ip.Spec.Address] = name
				checkIPAddress(t, ip, f.get(name), pool.UID, 23, "10.30.0.1", "wl-1")
			}
			t.Logf("%d claims Ready %s after the last was created", n, time.Since(t0).Round(time.Millisecond))

			holders := f.holders("nodes")
			if len(holders) != n {
				t.Fatalf("ipledger holds %d values of nodes, want %d", len(holders), n)
			}
			for addr, name := range seen {
				want := ipam.OwnerID("site-a", f.ns, name)
				if h := holders[addr]; len(h) != 1 || h[0] != want {
					t.Fatalf("ipledger: %s held by %v, want %s", addr, h, want)
				}
			}
			created := map[string]bool{}
			for _, ev := range f.l.Audit(t, "allocation.create") {
				if ev.Pool == "nodes" {
					if ev.Actor != "token:ipledger-k8s" || created[ev.Value] {
						t.Fatalf("audit event %+v: want one allocation.create per value by token:ipledger-k8s", ev)
					}
					created[ev.Value] = true
				}
			}
			for addr := range seen {
				if !created[addr] {
					t.Fatalf("no allocation.create event of %s in the audit log", addr)
				}
			}
			if len(created) != n {
				t.Fatalf("%d allocation.create events of nodes, want %d", len(created), n)
			}

			// Deleting every claim releases every value, then the
			// IPAddresses go.
			if err := f.c.DeleteAllOf(ctx, &ipamv1.IPAddressClaim{}, client.InNamespace(f.ns)); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, wait, func() error {
				var l ipamv1.IPAddressClaimList
				if err := f.c.List(ctx, &l, client.InNamespace(f.ns)); err != nil {
					return err
				}
				if len(l.Items) > 0 {
					return fmt.Errorf("%d claims left", len(l.Items))
				}
				return nil
			})
			if a := f.l.Allocations(t, "nodes"); len(a) != 0 {
				t.Fatalf("%d values still allocated after every claim was deleted: %v", len(a), a[:min(3, len(a))])
			}
			if len(f.l.Audit(t, "allocation.release")) != n {
				t.Fatalf("want %d allocation.release events", n)
			}
		})
	}
}

// checkIPAddress checks the IPAddress of a Ready claim against the
// contract: owner references to the claim (controller) and the pool,
// claimRef, poolRef, bare address, prefix, gateway, cluster-name label.
func checkIPAddress(t *testing.T, ip *ipamv1.IPAddress, claim *ipamv1.IPAddressClaim, poolUID any, prefix int32, gateway, cluster string) {
	t.Helper()
	if ip.Spec.ClaimRef.Name != claim.Name || ip.Spec.PoolRef != claim.Spec.PoolRef {
		t.Fatalf("IPAddress %s: claimRef %+v poolRef %+v", ip.Name, ip.Spec.ClaimRef, ip.Spec.PoolRef)
	}
	if strings.Contains(ip.Spec.Address, "/") || ip.Spec.Prefix == nil || *ip.Spec.Prefix != prefix || ip.Spec.Gateway != gateway {
		t.Fatalf("IPAddress %s: address %q prefix %v gateway %q", ip.Name, ip.Spec.Address, ip.Spec.Prefix, ip.Spec.Gateway)
	}
	if ip.Labels["cluster.x-k8s.io/cluster-name"] != cluster {
		t.Fatalf("IPAddress %s: labels %v", ip.Name, ip.Labels)
	}
	var claimRef, poolRef bool
	for _, o := range ip.OwnerReferences {
		switch {
		case o.Kind == "IPAddressClaim" && o.UID == claim.UID && o.Controller != nil && *o.Controller:
			claimRef = true
		case o.Kind == claim.Spec.PoolRef.Kind && any(o.UID) == poolUID && (o.Controller == nil || !*o.Controller):
			poolRef = true
		}
	}
	if !claimRef || !poolRef {
		t.Fatalf("IPAddress %s: owner references %+v", ip.Name, ip.OwnerReferences)
	}
	if claim.Annotations[ipam.OwnerIDAnnotation] == "" || !containsString(claim.Finalizers, ipam.Finalizer) {
		t.Fatalf("claim %s: annotations %v finalizers %v", claim.Name, claim.Annotations, claim.Finalizers)
	}
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// An IPAddress deleted while its claim lives is written again with the
// same value (a GlobalLedgerIPPool here).
func TestIPAddressDeletedUnderLiveClaim(t *testing.T) {
	t.Parallel()
	for _, db := range testenv.Databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			f := setup(t, db)
			f.l.CreatePool(t, "edge", "ipv6", "fd00:40::10", "fd00:40::ff", "fd00:40::1")
			f.manager("site-a", 10*time.Hour)
			gp := &v1alpha1.GlobalLedgerIPPool{
				ObjectMeta: metav1.ObjectMeta{Name: "edge-" + f.ns, Labels: map[string]string{"test": f.ns}},
				Spec:       v1alpha1.LedgerIPPoolSpec{Pool: "edge", Prefix: ptrTo[int32](64)},
			}
			// Claims made before their pool wait for it, and for its
			// status: the ipledger pool's own gateway fills the
			// IPAddress's.
			f.claim("m-0", poolRef(v1alpha1.GlobalLedgerIPPoolKind, gp.Name), "")
			f.claim("m-1", poolRef(v1alpha1.GlobalLedgerIPPoolKind, gp.Name), "")
			f.condition("m-1", metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
			if err := f.c.Create(ctx, gp); err != nil {
				t.Fatal(err)
			}
			checkIPAddress(t, f.ready("m-0"), f.get("m-0"), gp.UID, 64, "fd00:40::1", "")
			first := f.ready("m-1")
			checkIPAddress(t, first, f.get("m-1"), gp.UID, 64, "fd00:40::1", "")
			if err := f.c.Delete(ctx, first); err != nil {
				t.Fatal(err)
			}
			// A claim created meanwhile takes the next value: m-1 keeps
			// its own.
			f.claim("m-2", poolRef(v1alpha1.GlobalLedgerIPPoolKind, gp.Name), "")
			testenv.Eventually(t, wait, func() error {
				again := &ipamv1.IPAddress{}
				if err := f.c.Get(ctx, client.ObjectKeyFromObject(first), again); err != nil {
					return err
				}
				if again.UID == first.UID {
					return fmt.Errorf("still the old IPAddress")
				}
				if again.Spec.Address != first.Spec.Address {
					t.Fatalf("IPAddress written again with %s, want %s", again.Spec.Address, first.Spec.Address)
				}
				return nil
			})
			f.ready("m-1")
			if ip := f.ready("m-2"); ip.Spec.Address == first.Spec.Address {
				t.Fatalf("m-2 got m-1's %s", ip.Spec.Address)
			}
			if h := f.holders("edge"); len(h) != 3 {
				t.Fatalf("ipledger holds %v, want 3 values", h)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// A claim of another provider's pool (another group or kind) is left
// alone: no finalizer, no status, no IPAddress, nothing in ipledger.
func TestOtherProvidersClaimLeftAlone(t *testing.T) {
	t.Parallel()
	f := setup(t, "sqlite")
	f.l.CreatePool(t, "nodes", "ipv4", "10.50.0.10", "10.50.0.19", "")
	f.manager("site-a", 10*time.Hour)
	f.pool("nodes", "nodes", 24, "")
	f.claim("theirs", ipamv1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "nodes"}, "")
	f.claim("kind", ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "OtherPool", Name: "nodes"}, "")
	// A claim of ours created after them becomes Ready: the manager has
	// seen the others by then.
	f.claim("ours", poolRef(v1alpha1.LedgerIPPoolKind, "nodes"), "")
	f.ready("ours")
	for _, name := range []string{"theirs", "kind"} {
		c := f.get(name)
		if len(c.Finalizers) != 0 || len(c.Annotations) != 0 || len(c.Status.Conditions) != 0 || c.Status.AddressRef.Name != "" {
			t.Fatalf("claim %s was touched: %+v %+v", name, c.ObjectMeta, c.Status)
		}
		err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &ipamv1.IPAddress{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("IPAddress %s: %v, want not found", name, err)
		}
	}
	if h := f.holders("nodes"); len(h) != 1 {
		t.Fatalf("ipledger holds %v, want only the claim of ours", h)
	}
}
