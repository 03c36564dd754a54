package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
	"github.com/ipledger/ipledger/k8s/internal/ipam"
	"github.com/ipledger/ipledger/k8s/internal/testenv"
)

func (f *fixture) cluster(name string, paused bool) *clusterv1.Cluster {
	f.t.Helper()
	// A v1beta2 Cluster's spec may not be empty.
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Spec: clusterv1.ClusterSpec{Paused: ptrTo(paused)}}
	if err := f.c.Create(ctx, cl); err != nil {
		f.t.Fatal(err)
	}
	return cl
}

// gone waits until the claim no longer exists.
func (f *fixture) gone(name string) {
	f.t.Helper()
	testenv.Eventually(f.t, wait, func() error {
		err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &ipamv1.IPAddressClaim{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("claim %s still there (%v)", name, err)
	})
}

// A claim of a paused Cluster (spec.paused, or the paused annotation on
// the Cluster or on the claim) is left alone until the pause ends;
// deleting a claim completes while its Cluster is paused.
func TestPausedCluster(t *testing.T) {
	t.Parallel()
	for _, db := range testenv.Databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			f := setup(t, db)
			f.l.CreatePool(t, "nodes", "ipv4", "10.60.0.10", "10.60.0.19", "")
			f.manager("site-a", 10*time.Hour)
			f.pool("nodes", "nodes", 24, "")
			ref := poolRef(v1alpha1.LedgerIPPoolKind, "nodes")
			f.cluster("spec-paused", true)
			annotated := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "ann-paused", Namespace: f.ns,
				Annotations: map[string]string{clusterv1.PausedAnnotation: ""}}, Spec: clusterv1.ClusterSpec{Paused: ptrTo(false)}}
			if err := f.c.Create(ctx, annotated); err != nil {
				t.Fatal(err)
			}
			live := f.cluster("live", false)
			f.claim("a", ref, "spec-paused")
			f.claim("b", ref, "ann-paused")
			own := f.newClaim("c", ref, "live")
			own.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
			if err := f.c.Create(ctx, own); err != nil {
				t.Fatal(err)
			}
			f.claim("ready-first", ref, "live")
			f.ready("ready-first")
			for _, name := range []string{"a", "b", "c"} {
				c := f.get(name)
				if len(c.Finalizers) != 0 || len(c.Status.Conditions) != 0 {
					t.Fatalf("paused claim %s was touched: %v %+v", name, c.Finalizers, c.Status)
				}
			}
			if h := f.holders("nodes"); len(h) != 1 {
				t.Fatalf("ipledger holds %v, want only the unpaused claim's value", h)
			}

			// Unpausing resumes each.
			cl := &clusterv1.Cluster{}
			if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "spec-paused"}, cl); err != nil {
				t.Fatal(err)
			}
			cl.Spec.Paused = ptrTo(false)
			if err := f.c.Update(ctx, cl); err != nil {
				t.Fatal(err)
			}
			f.ready("a")
			if err := f.c.Get(ctx, client.ObjectKeyFromObject(annotated), annotated); err != nil {
				t.Fatal(err)
			}
			annotated.Annotations = nil
			if err := f.c.Update(ctx, annotated); err != nil {
				t.Fatal(err)
			}
			f.ready("b")
			c := f.get("c")
			c.Annotations = map[string]string{}
			for k, v := range f.get("c").Annotations {
				if k != clusterv1.PausedAnnotation {
					c.Annotations[k] = v
				}
			}
			if err := f.c.Update(ctx, c); err != nil {
				t.Fatal(err)
			}
			f.ready("c")

			// Deletion completes under a paused Cluster.
			if err := f.c.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
				t.Fatal(err)
			}
			live.Spec.Paused = ptrTo(true)
			if err := f.c.Update(ctx, live); err != nil {
				t.Fatal(err)
			}
			if err := f.c.Delete(ctx, f.get("ready-first")); err != nil {
				t.Fatal(err)
			}
			f.gone("ready-first")
			if h := f.holders("nodes"); len(h) != 3 {
				t.Fatalf("ipledger holds %v after deleting a claim of a paused Cluster, want 3 values", h)
			}
		})
	}
}

// Deleting a claim whose Cluster, and even whose pool object, no longer
// exists releases its value in ipledger, deletes the IPAddress and
// removes the finalizer.
func TestDeletedCluster(t *testing.T) {
	t.Parallel()
	for _, db := range testenv.Databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			f := setup(t, db)
			f.l.CreatePool(t, "nodes", "ipv4", "10.70.0.10", "10.70.0.19", "")
			f.manager("site-a", 10*time.Hour)
			pool := f.pool("nodes", "nodes", 24, "")
			cl := f.cluster("wl", false)
			ref := poolRef(v1alpha1.LedgerIPPoolKind, "nodes")
			f.claim("a", ref, "wl")
			f.claim("b", ref, "wl")
			ipA, _ := f.ready("a"), f.ready("b")
			if err := f.c.Delete(ctx, cl); err != nil {
				t.Fatal(err)
			}
			if err := f.c.Delete(ctx, f.get("a")); err != nil {
				t.Fatal(err)
			}
			f.gone("a")
			if err := f.c.Get(ctx, client.ObjectKeyFromObject(ipA), &ipamv1.IPAddress{}); !apierrors.IsNotFound(err) {
				t.Fatalf("IPAddress a: %v, want deleted", err)
			}
			if h := f.holders("nodes"); len(h) != 1 || h[ipA.Spec.Address] != nil {
				t.Fatalf("ipledger holds %v, want only b's value", h)
			}
			// Without the pool object too: the claim's annotation names
			// the ipledger pool.
			if err := f.c.Delete(ctx, pool); err != nil {
				t.Fatal(err)
			}
			if err := f.c.Delete(ctx, f.get("b")); err != nil {
				t.Fatal(err)
			}
			f.gone("b")
			if h := f.holders("nodes"); len(h) != 0 {
				t.Fatalf("ipledger holds %v, want nothing", h)
			}
		})
	}
}

// A claim waiting on an exhausted pool becomes Ready by itself when a
// value frees (another claim deleted) or the pool grows, driven by the
// change feed: the manager's resync period is 10 hours and the claim
// controller never requeues an exhausted claim on a timer.
func TestExhaustedPoolFrees(t *testing.T) {
	t.Parallel()
	for _, db := range testenv.Databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			f := setup(t, db)
			f.l.CreatePool(t, "tiny", "ipv4", "10.80.0.10", "10.80.0.11", "")
			const resync = 10 * time.Hour
			f.manager("site-a", resync)
			f.pool("tiny", "tiny", 24, "")
			ref := poolRef(v1alpha1.LedgerIPPoolKind, "tiny")
			f.claim("a", ref, "")
			f.claim("b", ref, "")
			f.ready("a")
			f.ready("b")
			f.claim("c", ref, "")
			cond := f.condition("c", metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolExhaustedReason)
			if !strings.Contains(cond.Message, "tiny") {
				t.Fatalf("PoolExhausted message %q does not name the pool", cond.Message)
			}
			f.event("c", ipamv1.IPAddressClaimReadyPoolExhaustedReason, "tiny")
			f.claim("d", ref, "")
			f.condition("d", metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolExhaustedReason)

			t0 := time.Now()
			if err := f.c.Delete(ctx, f.get("a")); err != nil {
				t.Fatal(err)
			}
			f.gone("a")
			// One of c and d takes the freed value; the other still waits.
			testenv.Eventually(t, wait, func() error {
				if n := len(f.holders("tiny")); n != 2 {
					return fmt.Errorf("%d values held", n)
				}
				return nil
			})
			var waiting string
			testenv.Eventually(t, wait, func() error {
				ready := 0
				waiting = ""
				for _, n := range []string{"c", "d"} {
					if readyOf(f.get(n)) {
						ready++
					} else {
						waiting = n
					}
				}
				if ready != 1 {
					return fmt.Errorf("%d of c, d Ready, want 1", ready)
				}
				return nil
			})
			// Growing the pool frees a value for the other.
			f.l.MustCall(t, http.StatusCreated, http.MethodPost, "/api/v1/pools/tiny/ranges",
				map[string]any{"first": "10.80.0.12", "last": "10.80.0.12", "auto_assign": true}, nil)
			f.ready(waiting)
			if took := time.Since(t0); took > resync/2 {
				t.Fatalf("took %s, as long as a resync", took)
			}
		})
	}
}

// event waits for a Kubernetes event of reason about the claim whose note
// holds text.
func (f *fixture) event(claim, reason, text string) {
	f.t.Helper()
	testenv.Eventually(f.t, wait, func() error {
		var l eventsv1.EventList
		if err := f.c.List(ctx, &l, client.InNamespace(f.ns)); err != nil {
			return err
		}
		for _, e := range l.Items {
			if e.Regarding.Kind == "IPAddressClaim" && e.Regarding.Name == claim && e.Reason == reason && strings.Contains(e.Note, text) {
				return nil
			}
		}
		return fmt.Errorf("no %s event of claim %s with %q among %d events", reason, claim, text, len(l.Items))
	})
}

func readyOf(c *ipamv1.IPAddressClaim) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == ipamv1.IPAddressClaimReadyCondition {
			return cond.Status == metav1.ConditionTrue
		}
	}
	return false
}

// A value released by hand in ipledger (an operator's DELETE) shows on
// the claim's Ready condition through the feed, the IPAddress is kept,
// another owner taking the value is named, and allocating the value to
// the claim's owner again in ipledger makes the claim Ready again.
func TestValueReleasedByHand(t *testing.T) {
	t.Parallel()
	for _, db := range testenv.Databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			f := setup(t, db)
			f.l.CreatePool(t, "nodes", "ipv4", "10.90.0.10", "10.90.0.19", "")
			f.manager("site-a", 10*time.Hour)
			f.pool("nodes", "nodes", 24, "")
			ip := f.ready(f.claim("a", poolRef(v1alpha1.LedgerIPPoolKind, "nodes"), "").Name)
			owner := f.get("a").Annotations[ipam.OwnerIDAnnotation]
			if owner != ipam.OwnerID("site-a", f.ns, "a") {
				t.Fatalf("owner id annotation %q", owner)
			}
			q := "?owner_type=" + ipam.OwnerType + "&owner_id=" + url.QueryEscape(owner)
			f.l.MustCall(t, http.StatusNoContent, http.MethodDelete, "/api/v1/pools/nodes/allocations/"+ip.Spec.Address+q, nil, nil)
			cond := f.condition("a", metav1.ConditionFalse, ipamv1.IPAddressClaimReadyAllocationFailedReason)
			if !strings.Contains(cond.Message, ip.Spec.Address) || !strings.Contains(cond.Message, "released") {
				t.Fatalf("message %q does not say %s was released", cond.Message, ip.Spec.Address)
			}
			kept := &ipamv1.IPAddress{}
			if err := f.c.Get(ctx, client.ObjectKeyFromObject(ip), kept); err != nil || kept.UID != ip.UID {
				t.Fatalf("IPAddress not kept: %v", err)
			}
			if h := f.holders("nodes"); len(h) != 0 {
				t.Fatalf("the manager took a value again behind the operator: %v", h)
			}
			f.event("a", "Allocated", ip.Spec.Address)
			f.event("a", "AddressReleased", ip.Spec.Address)

			// Reassigned by hand: the message names the new holder.
			f.l.MustCall(t, http.StatusCreated, http.MethodPost, "/api/v1/pools/nodes/allocations",
				map[string]string{"owner_type": "manual", "owner_id": "bench-7"}, nil)
			testenv.Eventually(t, wait, func() error {
				c := f.get("a")
				for _, cond := range c.Status.Conditions {
					if cond.Type == ipamv1.IPAddressClaimReadyCondition && strings.Contains(cond.Message, "manual/bench-7") {
						return nil
					}
				}
				return fmt.Errorf("conditions %+v do not name manual/bench-7", c.Status.Conditions)
			})

			// Given back to the claim's owner: Ready again, same value.
			f.l.MustCall(t, http.StatusNoContent, http.MethodDelete, "/api/v1/pools/nodes/allocations/"+ip.Spec.Address+"?owner_type=manual&owner_id=bench-7", nil, nil)
			f.l.MustCall(t, http.StatusCreated, http.MethodPost, "/api/v1/pools/nodes/allocations",
				map[string]string{"owner_type": ipam.OwnerType, "owner_id": owner}, nil)
			if again := f.ready("a"); again.Spec.Address != ip.Spec.Address {
				t.Fatalf("IPAddress %s, want %s", again.Spec.Address, ip.Spec.Address)
			}
		})
	}
}

// The pool objects' status: Ready with the counts of the automatic
// ranges (kept current through the feed), or False naming what is wrong.
func TestPoolStatus(t *testing.T) {
	t.Parallel()
	f := setup(t, "sqlite")
	f.l.CreatePool(t, "v4", "ipv4", "10.99.0.10", "10.99.0.19", "10.99.0.1")
	f.l.MustCall(t, http.StatusCreated, http.MethodPost, "/api/v1/pools",
		map[string]any{"name": "vlans", "type": "integer", "ranges": []map[string]any{{"first": "100", "last": "199", "auto_assign": true}}}, nil)
	f.manager("site-a", 10*time.Hour)
	f.pool("ok", "v4", 24, "")
	f.pool("missing", "nope", 24, "")
	f.pool("integer", "vlans", 24, "")
	f.pool("wide", "v4", 48, "")
	f.pool("v6gw", "v4", 24, "fd00::1")
	noPrefix := &v1alpha1.LedgerIPPool{ObjectMeta: metav1.ObjectMeta{Name: "noprefix", Namespace: f.ns}, Spec: v1alpha1.LedgerIPPoolSpec{Pool: "v4"}}
	if err := f.c.Create(ctx, noPrefix); err != nil {
		t.Fatal(err)
	}
	status := func(name string, want metav1.ConditionStatus, reason, text string) *v1alpha1.LedgerIPPool {
		t.Helper()
		p := &v1alpha1.LedgerIPPool{}
		testenv.Eventually(t, wait, func() error {
			if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, p); err != nil {
				return err
			}
			for _, c := range p.Status.Conditions {
				if c.Type == v1alpha1.ReadyCondition && c.Status == want && c.Reason == reason && strings.Contains(c.Message, text) {
					return nil
				}
			}
			return fmt.Errorf("pool %s: %+v, want %s %s %q", name, p.Status, want, reason, text)
		})
		return p
	}
	p := status("ok", metav1.ConditionTrue, ipam.ReasonReady, "")
	if p.Status.Size != "10" || p.Status.Free != "10" || p.Status.Allocated != "0" || p.Status.Type != "ipv4" || p.Status.Gateway != "10.99.0.1" {
		t.Fatalf("status %+v", p.Status)
	}
	status("missing", metav1.ConditionFalse, ipam.ReasonPoolNotFound, `"nope"`)
	status("integer", metav1.ConditionFalse, ipam.ReasonNotAnAddressPool, "integer")
	status("wide", metav1.ConditionFalse, ipam.ReasonInvalidSpec, "spec.prefix 48")
	status("v6gw", metav1.ConditionFalse, ipam.ReasonInvalidSpec, "spec.gateway")
	status("noprefix", metav1.ConditionFalse, ipam.ReasonInvalidSpec, "spec.prefix is required")

	// A claim of a pool that is not Ready says why.
	f.claim("c", poolRef(v1alpha1.LedgerIPPoolKind, "wide"), "")
	cond := f.condition("c", metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
	if !strings.Contains(cond.Message, "spec.prefix 48") {
		t.Fatalf("claim message %q", cond.Message)
	}
	// An allocation made in ipledger by someone else updates the counts.
	f.l.MustCall(t, http.StatusCreated, http.MethodPost, "/api/v1/pools/v4/allocations", map[string]string{"owner_type": "manual", "owner_id": "x"}, nil)
	testenv.Eventually(t, wait, func() error {
		if err := f.c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if p.Status.Free != "9" || p.Status.Allocated != "1" {
			return fmt.Errorf("status %+v", p.Status)
		}
		return nil
	})
	// The pool created in ipledger later: Ready by the feed.
	f.l.CreatePool(t, "nope", "ipv4", "10.98.0.10", "10.98.0.19", "")
	status("missing", metav1.ConditionTrue, ipam.ReasonReady, "")
}
