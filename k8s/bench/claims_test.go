package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
	"github.com/ipledger/ipledger/k8s/internal/app"
	"github.com/ipledger/ipledger/k8s/internal/testenv"
)

const (
	// claims is the number of IPAddressClaims of each run.
	claims = 1000
	// writers is the number of goroutines of the plain client, in the
	// ceiling and when creating the claims the manager serves.
	writers = 32
	// wait bounds each run; nothing is timed by it.
	wait = 10 * time.Minute
)

var ctx = context.Background()

// run is one measured run: claims created until the last is Ready.
type run struct {
	name    string
	elapsed time.Duration
	waits   []time.Duration // from a claim's creation to its Ready, sorted
}

func (r run) perSecond() float64 { return float64(claims) / r.elapsed.Seconds() }

func (r run) quantile(q float64) time.Duration {
	if len(r.waits) == 0 {
		return 0
	}
	return r.waits[min(len(r.waits)-1, int(q*float64(len(r.waits))))]
}

// BenchmarkClaimsToReady measures, against one API server: the ceiling —
// a plain client creating 1,000 claims, their IPAddresses and Ready
// statuses with no allocation — then 1,000 claims driven to Ready by the
// ipledger-k8s binary (its default flags, plus IPLEDGER_BENCH_MANAGER_FLAGS)
// with one and with two `ipledger serve` processes on one PostgreSQL
// database. Run it once: -benchtime 1x (scripts/bench-k8s-claims.sh).
func BenchmarkClaimsToReady(b *testing.B) {
	e := testenv.Require(b)
	scheme, err := app.Scheme()
	if err != nil {
		b.Fatal(err)
	}
	// The plain client: no client-side rate limit, the API server's own
	// priority and fairness is the only limit.
	cfg := rest.CopyConfig(e.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig := e.WriteKubeconfig(b)
	var extra []string
	if f := strings.Fields(os.Getenv("IPLEDGER_BENCH_MANAGER_FLAGS")); len(f) > 0 {
		extra = f
	}

	ceiling := runCeiling(b, e, c)
	l1 := testenv.StartLedger(b, "postgres")
	one := runManager(b, e, c, l1, l1.URL, "ipledger-k8s, 1 ipledger serve", "bench-one", "10.41.0.0", "10.41.15.255", kubeconfig, extra)
	l2 := l1.StartAnother(b)
	two := runManager(b, e, c, l1, roundRobin(b, l1.URL, l2.URL), "ipledger-k8s, 2 ipledger serve", "bench-two", "10.42.0.0", "10.42.15.255", kubeconfig, extra)

	fmt.Printf("\n%d IPAddressClaims to Ready, one kube-apiserver and etcd; manager flags %q\n", claims, extra)
	fmt.Printf("%-44s %8s %10s %6s %9s %9s\n", "run", "seconds", "claims/s", "ratio", "wait p50", "wait max")
	for _, r := range []run{ceiling, one, two} {
		fmt.Printf("%-44s %8.2f %10.1f %6.2f %9s %9s\n", r.name, r.elapsed.Seconds(), r.perSecond(), r.perSecond()/ceiling.perSecond(),
			r.quantile(0.5).Round(time.Millisecond), r.quantile(1).Round(time.Millisecond))
	}
	b.ReportMetric(ceiling.perSecond(), "ceiling-claims/s")
	b.ReportMetric(one.perSecond(), "claims/s-1serve")
	b.ReportMetric(two.perSecond(), "claims/s-2serve")
	b.ReportMetric(one.perSecond()/ceiling.perSecond(), "ratio-1serve")
	b.ReportMetric(two.perSecond()/ceiling.perSecond(), "ratio-2serve")
}

// newClaim is claim i of pool in ns.
func newClaim(ns, pool string, i int) *ipamv1.IPAddressClaim {
	return &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m-%04d", i), Namespace: ns,
			Labels: map[string]string{clusterv1.ClusterNameLabel: "wl-1"}},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{
			APIGroup: v1alpha1.GroupVersion.Group, Kind: v1alpha1.LedgerIPPoolKind, Name: pool}},
	}
}

// each runs f(i) for i in [0, claims) on writers goroutines and fails b
// on the first error.
func each(b *testing.B, f func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= claims {
					return
				}
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// pool creates the LedgerIPPool name of ns naming the ipledger pool
// ledgerPool.
func pool(b *testing.B, c client.Client, ns, name, ledgerPool string) *v1alpha1.LedgerIPPool {
	b.Helper()
	p := &v1alpha1.LedgerIPPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.LedgerIPPoolSpec{Pool: ledgerPool, Prefix: ptr.To[int32](20), Gateway: ""},
	}
	if err := c.Create(ctx, p); err != nil {
		b.Fatal(err)
	}
	return p
}

// runCeiling is the API server's ceiling: for each claim, what the
// manager writes but the allocation — the claim created (as in the runs
// of the manager), its IPAddress created, its status patched Ready.
func runCeiling(b *testing.B, e *testenv.Env, c client.Client) run {
	ns := e.Namespace(b)
	p := pool(b, c, ns, "ceiling", "ceiling")
	created := make([]time.Time, claims)
	readyAt := make([]time.Time, claims)
	start := time.Now()
	each(b, func(i int) error {
		created[i] = time.Now()
		claim := newClaim(ns, p.Name, i)
		if err := c.Create(ctx, claim); err != nil {
			return err
		}
		ip := &ipamv1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Name: claim.Name, Namespace: ns,
				Labels: map[string]string{clusterv1.ClusterNameLabel: "wl-1"},
				OwnerReferences: []metav1.OwnerReference{
					{APIVersion: ipamv1.GroupVersion.String(), Kind: "IPAddressClaim", Name: claim.Name, UID: claim.UID,
						Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
					{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.LedgerIPPoolKind, Name: p.Name, UID: p.UID,
						BlockOwnerDeletion: ptr.To(true)},
				}},
			Spec: ipamv1.IPAddressSpec{ClaimRef: ipamv1.IPAddressClaimReference{Name: claim.Name}, PoolRef: claim.Spec.PoolRef,
				Address: fmt.Sprintf("10.40.%d.%d", i/250, 1+i%250), Prefix: ptr.To[int32](20)},
		}
		if err := c.Create(ctx, ip); err != nil {
			return err
		}
		before := claim.DeepCopy()
		claim.Status.AddressRef.Name = claim.Name
		meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{Type: ipamv1.IPAddressClaimReadyCondition,
			Status: metav1.ConditionTrue, Reason: clusterv1.ReadyReason, Message: ip.Spec.Address + "/20", ObservedGeneration: claim.Generation})
		if err := c.Status().Patch(ctx, claim, client.MergeFrom(before)); err != nil {
			return err
		}
		readyAt[i] = time.Now()
		return nil
	})
	r := run{name: "ceiling: plain client, no allocation", elapsed: time.Since(start)}
	for i := range claims {
		r.waits = append(r.waits, readyAt[i].Sub(created[i]))
	}
	slices.Sort(r.waits)
	return r
}

// runManager runs the manager binary against ledgerURL (one server, or a
// balancer over two) and measures its claims from the first created to
// the last Ready; then checks that ipledger holds one value per claim and
// stops the manager.
func runManager(b *testing.B, e *testenv.Env, c client.WithWatch, l *testenv.Ledger, ledgerURL, name, cluster, first, last, kubeconfig string, extra []string) run {
	ns := e.Namespace(b)
	ledgerPool := cluster
	l.CreatePool(b, ledgerPool, "ipv4", first, last, "")
	args := append([]string{"--kubeconfig", kubeconfig, "--cluster-name", cluster, "--ipledger-url", ledgerURL,
		"--watch-namespaces", ns, "--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--log-level", "warn"}, extra...)
	proc := testenv.StartManagerBinary(b, l, args...)
	p := pool(b, c, ns, "nodes", ledgerPool)
	// The manager is up, its caches synced, when it has written the
	// pool's status.
	testenv.Eventually(b, wait, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ReadyCondition) {
			return fmt.Errorf("pool %s not Ready: %+v", p.Name, p.Status.Conditions)
		}
		return nil
	})

	w := watchReady(b, c, ns)
	created := make([]time.Time, claims)
	start := time.Now()
	each(b, func(i int) error {
		created[i] = time.Now()
		return c.Create(ctx, newClaim(ns, p.Name, i))
	})
	readyAt := w.wait(b)
	r := run{name: name}
	for i := range claims {
		r.waits = append(r.waits, readyAt[fmt.Sprintf("m-%04d", i)].Sub(created[i]))
	}
	slices.Sort(r.waits)
	// The last Ready seen ends the run, not the watch's shutdown.
	var end time.Time
	for _, t := range readyAt {
		if t.After(end) {
			end = t
		}
	}
	r.elapsed = end.Sub(start)

	held := map[string]bool{}
	for _, a := range l.Allocations(b, ledgerPool) {
		if held[a.Value] {
			b.Fatalf("%s held twice", a.Value)
		}
		held[a.Value] = true
	}
	if len(held) != claims {
		b.Fatalf("ipledger holds %d values of %s, want %d", len(held), ledgerPool, claims)
	}
	proc.Kill(b)
	return r
}

// readyWatch records when each claim of a namespace is first seen Ready.
type readyWatch struct {
	done    chan struct{}
	mu      sync.Mutex
	readyAt map[string]time.Time
	err     error
}

// watchReady starts watching the claims of ns (before any exists).
func watchReady(b *testing.B, c client.WithWatch, ns string) *readyWatch {
	b.Helper()
	rw := &readyWatch{done: make(chan struct{}), readyAt: map[string]time.Time{}}
	wctx, cancel := context.WithCancel(ctx)
	b.Cleanup(cancel)
	wi, err := c.Watch(wctx, &ipamv1.IPAddressClaimList{}, client.InNamespace(ns))
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		defer close(rw.done)
		for {
			for ev := range wi.ResultChan() {
				cl, ok := ev.Object.(*ipamv1.IPAddressClaim)
				if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
					continue
				}
				if rw.see(cl) == claims {
					wi.Stop()
					return
				}
			}
			// The server ended the watch: list what is Ready, watch on.
			var list ipamv1.IPAddressClaimList
			if err := c.List(wctx, &list, client.InNamespace(ns)); err != nil {
				rw.err = err
				return
			}
			n := 0
			for i := range list.Items {
				n = rw.see(&list.Items[i])
			}
			if n == claims {
				return
			}
			if wi, err = c.Watch(wctx, &ipamv1.IPAddressClaimList{}, client.InNamespace(ns),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}}); err != nil {
				rw.err = err
				return
			}
		}
	}()
	return rw
}

// see records cl when it is Ready and returns how many are.
func (rw *readyWatch) see(cl *ipamv1.IPAddressClaim) int {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if _, seen := rw.readyAt[cl.Name]; !seen && cl.Status.AddressRef.Name != "" &&
		meta.IsStatusConditionTrue(cl.Status.Conditions, ipamv1.IPAddressClaimReadyCondition) {
		rw.readyAt[cl.Name] = time.Now()
	}
	return len(rw.readyAt)
}

// wait returns when every claim was seen Ready.
func (rw *readyWatch) wait(b *testing.B) map[string]time.Time {
	b.Helper()
	select {
	case <-rw.done:
	case <-time.After(wait):
		rw.mu.Lock()
		n := len(rw.readyAt)
		rw.mu.Unlock()
		b.Fatalf("%d of %d claims Ready after %s", n, claims, wait)
	}
	if rw.err != nil {
		b.Fatal(rw.err)
	}
	return rw.readyAt
}

// roundRobin listens on a local port and hands each connection to the
// next of the servers in turn, as a Kubernetes Service spreads
// connections over its endpoints; it returns its URL.
func roundRobin(b *testing.B, urls ...string) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			target := strings.TrimPrefix(urls[int(n.Add(1))%len(urls)], "http://")
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				go func() { _, _ = io.Copy(out, in); _ = out.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}
