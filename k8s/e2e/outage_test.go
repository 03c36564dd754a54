package e2e

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
)

// While ipledger is down a new claim says so (AllocationFailed with the
// connection error) and a deleted claim keeps its finalizer, its value
// still allocated; when ipledger is back, the feed's reconnection retries
// both at once — the claim becomes Ready, the deletion completes —
// without waiting out the growing retry backoff.
func TestLedgerOutage(t *testing.T) {
	t.Parallel()
	f := setup(t, "sqlite")
	f.l.CreatePool(t, "nodes", "ipv4", "10.140.0.10", "10.140.0.19", "")
	f.manager("site-a", 10*time.Hour)
	f.pool("nodes", "nodes", 24, "")
	ref := poolRef(v1alpha1.LedgerIPPoolKind, "nodes")
	f.claim("a", ref, "")
	ipA := f.ready("a")

	f.l.Stop(t)
	f.claim("b", ref, "")
	cond := f.condition("b", metav1.ConditionFalse, ipamv1.IPAddressClaimReadyAllocationFailedReason)
	if !strings.Contains(cond.Message, "connection refused") {
		t.Fatalf("message %q does not say ipledger is unreachable", cond.Message)
	}
	if err := f.c.Delete(ctx, f.get("a")); err != nil {
		t.Fatal(err)
	}
	f.event("a", "ReleaseFailed", "connection refused")
	if c := f.get("a"); !containsString(c.Finalizers, "ipam.ipledger.io/release-address") {
		t.Fatalf("claim a lost its finalizer while ipledger was down: %v", c.Finalizers)
	}

	f.l.Restart(t)
	f.gone("a")
	ipB := f.ready("b")
	h := f.holders("nodes")
	if len(h) != 1 || h[ipB.Spec.Address] == nil {
		t.Fatalf("ipledger holds %v, want only b's %s (a's %s released)", h, ipB.Spec.Address, ipA.Spec.Address)
	}
}
