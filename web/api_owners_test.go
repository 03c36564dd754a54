package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/cni"
	"github.com/ipledger/ipledger/database/dbtest"
)

func ownersCall(t *testing.T, srv http.Handler, method, path, token, body string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// An endpoint's IPv6 /96 block and IPv4 /32, allocated in ipledger, rendered
// as a galactic-ipam config and fed to the plugin, come out exactly as
// decided: prefix lengths, host bits and gateways.
func TestOwnerCNIIPAMRoundTrip(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		const tok = "owners-test-admin-token"
		site := newAPISite(t, db, allocator.Options{}, tok)
		srv := site.h
		for _, body := range []string{
			`{"name":"endpoint-v6","type":"ipv6prefix","delegate_prefix_len":96,"gateway":"fd00:10:ff01::1","ranges":[{"first":"fd00:10:ff01::/96","last":"fd00:10:ff01:0:ffff:ffff::/96"}]}`,
			`{"name":"endpoint-v4","type":"ipv4","gateway":"172.20.0.1","ranges":[{"first":"172.20.1.1","last":"172.20.1.254"}]}`,
			`{"name":"vlan","type":"integer","ranges":[{"first":"100","last":"200"}]}`,
		} {
			if code, b := ownersCall(t, srv, "POST", "/api/v1/pools", tok, body); code != 201 {
				t.Fatalf("create pool: %d %s", code, b)
			}
		}
		// Another endpoint first, so ours gets a block with a non-zero index.
		for _, owner := range []string{"other", "pod-a"} {
			for _, pool := range []string{"endpoint-v6", "endpoint-v4", "vlan"} {
				body := fmt.Sprintf(`{"owner_type":"endpoint","owner_id":%q}`, owner)
				if code, b := ownersCall(t, srv, "POST", "/api/v1/pools/"+pool+"/allocations", tok, body); code != 201 {
					t.Fatalf("allocate %s: %d %s", pool, code, b)
				}
			}
		}
		code, b := ownersCall(t, srv, "GET", "/api/v1/owners/endpoint/pod-a/cni-ipam", tok, "")
		if code != 200 {
			t.Fatalf("cni-ipam: %d %s", code, b)
		}
		var ipam cni.IPAMConfig
		if err := json.Unmarshal(b, &ipam); err != nil {
			t.Fatal(err)
		}
		want := []cni.Address{
			{Address: "172.20.1.2/32", Gateway: "172.20.0.1"},
			{Address: "fd00:10:ff01::1:0:0/96", Gateway: "fd00:10:ff01::1"},
		}
		if ipam.Type != "galactic-ipam" || fmt.Sprint(ipam.Addresses) != fmt.Sprint(want) {
			t.Fatalf("rendered %s, want type galactic-ipam with %v", b, want)
		}
		netconf, _ := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": "pods", "type": "ptp", "ipam": ipam})
		cfg, err := cni.ParseConfig(netconf)
		if err != nil {
			t.Fatalf("plugin rejects the rendered config: %v", err)
		}
		res := cfg.Result()
		if len(res.IPs) != 2 || res.IPs[0].Address.String() != "172.20.1.2/32" || res.IPs[1].Address.String() != "fd00:10:ff01::1:0:0/96" {
			t.Fatalf("plugin result IPs %v", res.IPs)
		}
		if res.IPs[0].Gateway.String() != "172.20.0.1" || res.IPs[1].Gateway.String() != "fd00:10:ff01::1" {
			t.Fatalf("plugin result gateways %v %v", res.IPs[0].Gateway, res.IPs[1].Gateway)
		}

		if code, b := ownersCall(t, srv, "GET", "/api/v1/owners/endpoint/nobody/cni-ipam", tok, ""); code != 404 || !strings.Contains(string(b), `"not_found"`) {
			t.Fatalf("owner without addresses: %d %s", code, b)
		}
		if code, b := ownersCall(t, srv, "GET", "/api/v1/owners/Bad%20Type/x/cni-ipam", tok, ""); code != 422 || !strings.Contains(string(b), `"owner_type"`) {
			t.Fatalf("bad owner type: %d %s", code, b)
		}
		if code, _ := ownersCall(t, srv, "GET", "/api/v1/owners/endpoint/pod-a/cni-ipam", "", ""); code != 401 {
			t.Fatalf("anonymous: %d", code)
		}
	})
}
