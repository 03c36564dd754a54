package ipam

import (
	"strings"
	"testing"
)

func TestOwnerIDReadableAndBounded(t *testing.T) {
	t.Parallel()
	if got := OwnerID("site-a", "capi", "node-0"); got != "site-a/capi/node-0" {
		t.Fatalf("short id: got %q", got)
	}
	ns := strings.Repeat("n", 63)
	long1 := strings.Repeat("x", 253)
	long2 := strings.Repeat("x", 252) + "y"
	a, b := OwnerID("site-a", ns, long1), OwnerID("site-a", ns, long2)
	for _, id := range []string{a, b} {
		if len(id) != 128 {
			t.Fatalf("long id %q has %d characters, want 128", id, len(id))
		}
		if !strings.HasPrefix(id, "site-a/"+ns+"/xxx") {
			t.Fatalf("long id %q does not start with cluster/namespace/name", id)
		}
	}
	if a == b {
		t.Fatalf("two names that share their first 111 characters got one id %q", a)
	}
	if OwnerID("site-a", "ns", "n") == OwnerID("site-b", "ns", "n") {
		t.Fatal("two clusters got one owner id")
	}
	exact := strings.Repeat("z", 128-len("c/ns/"))
	if got := OwnerID("c", "ns", exact); got != "c/ns/"+exact {
		t.Fatalf("an id of exactly 128 characters was changed: %q", got)
	}
}

func TestClusterNameRule(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "site-a", "dc1-mgmt", strings.Repeat("a", 63)} {
		if err := ValidateClusterName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Site", "a/b", "-a", "a-", strings.Repeat("a", 64), "a_b"} {
		if err := ValidateClusterName(bad); err == nil || !strings.Contains(err.Error(), "--cluster-name") {
			t.Errorf("%q accepted or error without the flag: %v", bad, err)
		}
	}
}
