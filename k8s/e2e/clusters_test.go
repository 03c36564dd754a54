package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
	"github.com/ipledger/ipledger/k8s/internal/ipam"
	"github.com/ipledger/ipledger/k8s/internal/testenv"
)

// createClaims creates n claims m-000… of ref in the fixture's namespace
// at once.
func (f *fixture) createClaims(n int, ref ipamv1.IPPoolReference) {
	f.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() { errs <- f.c.Create(ctx, f.newClaim(fmt.Sprintf("m-%03d", i), ref, "")) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			f.t.Fatal(err)
		}
	}
}

// Two managers of two clusters (two --cluster-name, each with its own
// namespace and pool object) share one ipledger pool: claims of the same
// names in both get distinct values, each held in ipledger by its own
// cluster's owner id, and the pool runs out for both at once.
func TestTwoClustersShareOnePool(t *testing.T) {
	t.Parallel()
	for _, db := range testenv.Databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			const n = 50
			a := setup(t, db)
			b := &fixture{t: t, e: a.e, c: a.c, l: a.l, ns: a.e.Namespace(t)}
			a.l.CreatePool(t, "shared", "ipv4", "10.110.0.0", fmt.Sprintf("10.110.0.%d", 2*n-1), "")
			a.manager("site-a", 10*time.Hour)
			b.manager("site-b", 10*time.Hour)
			a.pool("shared", "shared", 24, "")
			b.pool("shared", "shared", 24, "")
			ref := poolRef(v1alpha1.LedgerIPPoolKind, "shared")
			var wg sync.WaitGroup
			wg.Go(func() { a.createClaims(n, ref) })
			wg.Go(func() { b.createClaims(n, ref) })
			wg.Wait()
			owners := map[string]string{}
			for _, f := range []*fixture{a, b} {
				for i := range n {
					name := fmt.Sprintf("m-%03d", i)
					ip := f.ready(name)
					if prev, dup := owners[ip.Spec.Address]; dup {
						t.Fatalf("%s given to %s/%s and %s", ip.Spec.Address, f.ns, name, prev)
					}
					owners[ip.Spec.Address] = f.ns + "/" + name
				}
			}
			holders := a.holders("shared")
			if len(holders) != 2*n {
				t.Fatalf("ipledger holds %d values, want %d", len(holders), 2*n)
			}
			perCluster := map[string]int{}
			for addr, h := range holders {
				if len(h) != 1 {
					t.Fatalf("%s held by %v", addr, h)
				}
				cluster := strings.SplitN(h[0], "/", 2)[0]
				perCluster[cluster]++
				want := ipam.OwnerID(cluster, strings.SplitN(owners[addr], "/", 2)[0], strings.SplitN(owners[addr], "/", 2)[1])
				if h[0] != want {
					t.Fatalf("%s held by %s in ipledger, given to %s in Kubernetes", addr, h[0], want)
				}
			}
			if perCluster["site-a"] != n || perCluster["site-b"] != n {
				t.Fatalf("values per cluster %v", perCluster)
			}
			// The shared pool is full for both clusters.
			a.claim("extra", ref, "")
			b.claim("extra", ref, "")
			a.condition("extra", "False", ipamv1.IPAddressClaimReadyPoolExhaustedReason)
			b.condition("extra", "False", ipamv1.IPAddressClaimReadyPoolExhaustedReason)
			// A value freed by one cluster goes to whichever waits.
			if err := a.c.Delete(ctx, a.get("m-000")); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, wait, func() error {
				r := 0
				for _, f := range []*fixture{a, b} {
					if readyOf(f.get("extra")) {
						r++
					}
				}
				if r != 1 {
					return fmt.Errorf("%d extra claims Ready, want 1", r)
				}
				return nil
			})
			if got := len(a.holders("shared")); got != 2*n {
				t.Fatalf("%d values held, want %d", got, 2*n)
			}
		})
	}
}

// The manager binary killed with SIGKILL while it works through 120 claims,
// then started again: every claim ends Ready with a value of its own,
// ipledger holds exactly one value per claim (nothing leaked, nothing
// twice), and each IPAddress says what ipledger holds for its claim. The
// binary runs with leader election, so the restarted one also shows that
// a dead leader's Lease is taken over.
func TestManagerKilledMidReconcile(t *testing.T) {
	t.Parallel()
	for _, db := range testenv.Databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			const n = 120
			f := setup(t, db)
			f.l.CreatePool(t, "nodes", "ipv4", "10.120.0.0", "10.120.0.255", "")
			f.pool("nodes", "nodes", 24, "")
			kube := f.e.WriteKubeconfig(t)
			args := []string{"--kubeconfig", kube, "--ipledger-url", f.l.URL, "--cluster-name", "site-k",
				"--watch-namespaces", f.ns, "--global-pool-selector", "test=" + f.ns,
				"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
				"--leader-elect", "--leader-election-namespace", f.ns, "--workers", "4"}
			p := testenv.StartManagerBinary(t, f.l, args...)
			f.createClaims(n, poolRef(v1alpha1.LedgerIPPoolKind, "nodes"))
			// Kill it once ipledger has given some values but not all.
			testenv.Eventually(t, wait, func() error {
				if got := len(f.l.Allocations(t, "nodes")); got < 10 {
					return fmt.Errorf("%d values allocated so far", got)
				}
				return nil
			})
			p.Kill(t)
			allocated := len(f.l.Allocations(t, "nodes"))
			var l ipamv1.IPAddressClaimList
			if err := f.c.List(ctx, &l, client.InNamespace(f.ns)); err != nil {
				t.Fatal(err)
			}
			ready := 0
			for i := range l.Items {
				if readyOf(&l.Items[i]) {
					ready++
				}
			}
			t.Logf("killed with %d of %d values allocated and %d claims Ready", allocated, n, ready)
			if ready == n {
				t.Fatalf("every claim was Ready before the kill: nothing was cut mid-way")
			}

			// The restarted one serves its probes and metrics.
			probe, metrics := freeAddr(t), freeAddr(t)
			args = append(args, "--health-probe-bind-address", probe, "--metrics-bind-address", metrics)
			p2 := testenv.StartManagerBinary(t, f.l, args...)
			values := map[string]string{}
			for i := range n {
				name := fmt.Sprintf("m-%03d", i)
				ip := f.ready(name)
				if other, dup := values[ip.Spec.Address]; dup {
					t.Fatalf("%s given to %s and %s", ip.Spec.Address, other, name)
				}
				values[ip.Spec.Address] = name
			}
			holders := f.holders("nodes")
			if len(holders) != n {
				t.Fatalf("ipledger holds %d values for %d claims: a leak or a double", len(holders), n)
			}
			for addr, name := range values {
				if h := holders[addr]; len(h) != 1 || h[0] != ipam.OwnerID("site-k", f.ns, name) {
					t.Fatalf("%s: IPAddress of %s, held in ipledger by %v", addr, name, h)
				}
			}
			for _, u := range []string{"http://" + probe + "/healthz", "http://" + probe + "/readyz", "http://" + metrics + "/metrics"} {
				testenv.Eventually(t, wait, func() error {
					resp, err := http.Get(u)
					if err != nil {
						return err
					}
					defer resp.Body.Close()
					b, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != http.StatusOK {
						return fmt.Errorf("%s: %d %s", u, resp.StatusCode, b)
					}
					if strings.HasSuffix(u, "/metrics") && !strings.Contains(string(b), `controller_runtime_reconcile_total{controller="ipaddressclaim"`) {
						return fmt.Errorf("%s has no reconcile counter of the claim controller", u)
					}
					return nil
				})
			}
			if !p2.LogContains(`"msg":"Successfully acquired lease"`) {
				t.Fatalf("the restarted manager did not log taking the Lease:\n%s", p2.Log())
			}
			// And all released when the claims go.
			if err := f.c.DeleteAllOf(ctx, &ipamv1.IPAddressClaim{}, client.InNamespace(f.ns)); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, wait, func() error {
				if got := len(f.l.Allocations(t, "nodes")); got != 0 {
					return fmt.Errorf("%d values still allocated", got)
				}
				return nil
			})
		})
	}
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
