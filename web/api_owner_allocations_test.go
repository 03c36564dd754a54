package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/database/dbtest"
)

// ownerItems reads the "pool value" of each item of an owner answer.
func ownerItems(t *testing.T, got map[string]any) []string {
	t.Helper()
	items, _ := got["items"].([]any)
	out := make([]string, len(items))
	for i, it := range items {
		m := it.(map[string]any)
		if m["owner_type"] != "endpoint" || m["state"] != "allocated" || m["allocated_at"] == nil {
			t.Fatalf("item %d: %v", i, m)
		}
		out[i] = fmt.Sprint(m["pool"], " ", m["value"])
	}
	return out
}

// docs/api.md "Owner allocations": POST
// /api/v1/owners/{owner_type}/{owner_id}/allocations answers 200
// {"items": [...]} in request order (operator role), idempotently, and
// refuses a bad request as a whole naming pools[i] or pools[i].value,
// changing nothing; DELETE of the same path releases everything the owner
// holds (204, also when it holds nothing), with an event showing each
// release with its pool and value.
func TestOwnerAllocationsREST(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		p := newPoolAPI(t, db)
		for _, body := range []string{
			`{"name":"pod-v4","type":"ipv4","gateway":"10.1.0.254","ranges":[{"first":"10.1.0.1","last":"10.1.0.3"},{"first":"10.1.0.100","last":"10.1.0.110","auto_assign":false}]}`,
			`{"name":"endpoint-v6","type":"ipv6prefix","delegate_prefix_len":96,"ranges":[{"first":"fd00:10:ff01::/96","last":"fd00:10:ff01::ff:0:0/96"},{"first":"fd00:10:ff01:1::/96","last":"fd00:10:ff01:1::ff:0:0/96","auto_assign":false}]}`,
			`{"name":"vlan","type":"integer","ranges":[{"first":"1","last":"10"}]}`,
			`{"name":"tiny","type":"integer","ranges":[{"first":"500","last":"500"}]}`,
		} {
			p.want(http.StatusCreated, "POST", "/api/v1/pools", p.admin, body)
		}
		path := "/api/v1/owners/endpoint/pod-a/allocations"
		body := `{"pools":["pod-v4",{"pool":"endpoint-v6","value":"fd00:10:ff01:1:0:5::/96"},{"pool":"vlan"}]}`
		got := p.want(http.StatusOK, "POST", path, p.operator, body)
		want := "[pod-v4 10.1.0.1 endpoint-v6 fd00:10:ff01:1:0:5::/96 vlan 1]"
		if items := ownerItems(t, got); fmt.Sprint(items) != want {
			t.Fatalf("items %v, want %s", items, want)
		}
		// Idempotent: the same answer again, 200.
		again := p.want(http.StatusOK, "POST", path, p.operator, body)
		if fmt.Sprint(again["items"]) != fmt.Sprint(got["items"]) {
			t.Fatalf("repeat: %v, first %v", again, got)
		}
		// What the owner holds renders for galactic-ipam.
		ipam := p.want(http.StatusOK, "GET", "/api/v1/owners/endpoint/pod-a/cni-ipam", p.viewer, "")
		if b, _ := json.Marshal(ipam); !strings.Contains(string(b), `"address":"10.1.0.1/32","gateway":"10.1.0.254"`) ||
			!strings.Contains(string(b), `"address":"fd00:10:ff01:1:0:5::/96"`) {
			t.Fatalf("cni-ipam after the owner allocation: %s", b)
		}
		p.want(http.StatusCreated, "POST", "/api/v1/pools/tiny/allocations", p.operator, `{"owner_type":"endpoint","owner_id":"holder"}`)
		p.want(http.StatusCreated, "POST", "/api/v1/pools/pod-v4/allocations", p.operator, `{"owner_type":"endpoint","owner_id":"holder","value":"10.1.0.105"}`)

		before := p.state()
		other := "/api/v1/owners/endpoint/pod-b/allocations"
		refusals := []struct {
			path, body  string
			status      int
			code, field string
			words       []string
		}{
			{other, `{"pools":["vlan","nope"]}`, 422, "invalid", "pools[1]", []string{`"nope"`}},
			{other, `{"pools":["vlan",{"pool":"nope","value":"1"}]}`, 422, "invalid", "pools[1]", []string{`"nope"`}},
			{other, `{"pools":["vlan","pod-v4",{"pool":"vlan"}]}`, 422, "invalid", "pools[2]", []string{`"vlan"`, "pools[0]"}},
			{other, `{"pools":["vlan",{"pool":"pod-v4","value":"10.1.0.999"}]}`, 422, "invalid", "pools[1].value", []string{`"pod-v4"`, "10.1.0.999"}},
			{other, `{"pools":["vlan",{"pool":"pod-v4","value":"fd00::1"}]}`, 422, "invalid", "pools[1].value", []string{`"pod-v4"`, "fd00::1"}},
			{other, `{"pools":["vlan",{"pool":"pod-v4","value":"10.1.0.105"}]}`, 409, "not_available", "pools[1].value", []string{`"pod-v4"`, "10.1.0.105", "holder"}},
			{other, `{"pools":["vlan",{"pool":"pod-v4","value":"10.1.0.2"}]}`, 409, "not_available", "pools[1].value", []string{`"pod-v4"`, "10.1.0.2", "auto-assign"}},
			{other, `{"pools":["vlan","pod-v4","tiny"]}`, 409, "pool_exhausted", "pools[2]", []string{`"tiny"`}},
			{path, `{"pools":[{"pool":"endpoint-v6","value":"fd00:10:ff01:1:0:6::/96"}]}`, 409, "conflict", "pools[0].value", []string{`"endpoint-v6"`, "fd00:10:ff01:1:0:5::/96"}},
			// Strict bodies.
			{other, `{"pools":[]}`, 422, "invalid", "pools", nil},
			{other, `{}`, 422, "invalid", "pools", nil},
			{other, `{"pools":null}`, 422, "invalid", "pools", nil},
			{other, `{"pools":"vlan"}`, 422, "invalid", "pools", nil},
			{other, `{"pools":["vlan",7]}`, 422, "invalid", "pools[1]", []string{"number 7"}},
			{other, `{"pools":["vlan",null]}`, 422, "invalid", "pools[1]", []string{"null"}},
			{other, `{"pools":[{"value":"1"}]}`, 422, "invalid", "pools[0].pool", nil},
			{other, `{"pools":[{"pool":"vlan","valeu":"1"}]}`, 422, "invalid", "pools[0].valeu", []string{"valeu"}},
			{other, `{"pools":[{"pool":"vlan","value":1}]}`, 422, "invalid", "pools[0].value", nil},
			{other, `{"pools":[{"pool":"vlan","Pool":"tiny"}]}`, 422, "invalid", "pools[0].Pool", nil},
			{other, `{"pools":["vlan"],"pools":["tiny"]}`, 422, "invalid", "pools", nil},
			{other, `{"Pools":["vlan"]}`, 422, "invalid", "Pools", nil},
			{other, `{"pools":["vlan"],"owner_id":"x"}`, 422, "invalid", "owner_id", nil},
			{other, `{"pools":["vlan"`, 400, "bad_request", "", nil},
			{other, `["vlan"]`, 400, "bad_request", "", nil},
			// The owner in the path.
			{"/api/v1/owners/Bad%20Type/x/allocations", `{"pools":["vlan"]}`, 422, "invalid", "owner_type", nil},
			{"/api/v1/owners/endpoint/" + strings.Repeat("x", 129) + "/allocations", `{"pools":["vlan"]}`, 422, "invalid", "owner_id", nil},
		}
		for _, r := range refusals {
			msg := wantAPIError(t, p.do("POST", r.path, p.operator, "", r.body), r.status, r.code, r.field)
			for _, w := range r.words {
				if !strings.Contains(msg, w) {
					t.Fatalf("%s: message %q does not name %s", r.body, msg, w)
				}
			}
		}
		wantAPIError(t, p.do("POST", other, p.viewer, "", `{"pools":["vlan"]}`), 403, "forbidden", "")
		wantAPIError(t, p.do("DELETE", path, p.viewer, "", ""), 403, "forbidden", "")
		wantAPIError(t, p.do("DELETE", path+"?pool=vlan", p.operator, "", ""), 422, "invalid", "pool")
		wantAPIError(t, p.do("DELETE", "/api/v1/owners/Bad/x/allocations", p.operator, "", ""), 422, "invalid", "owner_type")
		if after := p.state(); after != before {
			t.Fatalf("a refused owner request changed stored state")
		}

		// Release: everything the owner holds, one event per value in the feed.
		p.want(http.StatusNoContent, "DELETE", path, p.operator, "")
		for _, pool := range []string{"pod-v4", "endpoint-v6", "vlan"} {
			list := p.want(http.StatusOK, "GET", "/api/v1/pools/"+pool+"/allocations?owner_type=endpoint&owner_id=pod-a", p.viewer, "")
			if items, _ := list["items"].([]any); len(items) != 0 {
				t.Fatalf("after release the owner still holds %v in %s", items, pool)
			}
		}
		// The audit log lists them newest first.
		evs := p.want(http.StatusOK, "GET", "/api/v1/events?action=allocation.release", p.viewer, "")
		var released []string
		for _, e := range evs["items"].([]any) {
			m := e.(map[string]any)
			released = append(released, fmt.Sprint(m["pool"], " ", m["value"]))
		}
		if fmt.Sprint(released) != "[vlan 1 pod-v4 10.1.0.1 endpoint-v6 fd00:10:ff01:1:0:5::/96]" {
			t.Fatalf("release events: %v", released)
		}
		// Nothing held: a no-op 204.
		before = p.state()
		p.want(http.StatusNoContent, "DELETE", path, p.operator, "")
		if p.state() != before {
			t.Fatal("releasing an owner that holds nothing changed stored state")
		}
	})
}

// A DPU's loopbacks are released only by decommission and delete: DELETE
// of its machine owner's allocations is 409 conflict naming the DPU, and
// nothing is released.
func TestOwnerReleaseRefusesLiveLoopbackREST(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		p := newPoolAPI(t, db)
		p.want(http.StatusCreated, "POST", "/api/v1/pools", p.admin, `{"name":"lo-ip","type":"ipv4","ranges":[{"first":"10.0.0.1","last":"10.0.0.9"}]}`)
		p.want(http.StatusOK, "POST", "/api/v1/site-explorer/reports", p.operator,
			`{"bmc_mac_address":"0a:00:00:00:09:01","chassis_serial_number":"CHS-1","dpus":[{"serial_number":"MT-REST-1"}]}`)
		mid := allocator.DPUMachineID("MT-REST-1")
		before := p.state()
		msg := wantAPIError(t, p.do("DELETE", "/api/v1/owners/machine/"+mid+"/allocations", p.operator, "", ""), 409, "conflict", "")
		if !strings.Contains(msg, "MT-REST-1") || !strings.Contains(msg, mid) {
			t.Fatalf("message %q does not name the DPU", msg)
		}
		if p.state() != before {
			t.Fatal("a refused release changed stored state")
		}
	})
}
