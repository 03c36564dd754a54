package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
)

// docs/api.md bulk allocation: POST /api/v1/pools/{name}/allocations:batch
// answers 200 {"items": [...]} in request order (operator role), is
// idempotent per owner, and refuses a bad body as a whole with the
// item's field, changing nothing.
func TestAllocationsBatchREST(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		p := newPoolAPI(t, db)
		p.want(http.StatusCreated, "POST", "/api/v1/pools", p.admin,
			`{"name":"vlan","type":"integer","ranges":[{"first":"1","last":"10","auto_assign":true},{"first":"100","last":"110","auto_assign":false}]}`)
		path := "/api/v1/pools/vlan/allocations:batch"
		body := `{"allocations":[{"owner_type":"net","owner_id":"a"},{"owner_type":"net","owner_id":"b","value":"105"},{"owner_type":"net","owner_id":"c"}]}`
		got := p.want(http.StatusOK, "POST", path, p.operator, body)
		items, _ := got["items"].([]any)
		if len(items) != 3 {
			t.Fatalf("items %v, want 3", got)
		}
		for i, want := range [][2]string{{"a", "1"}, {"b", "105"}, {"c", "2"}} {
			it := items[i].(map[string]any)
			if it["owner_id"] != want[0] || it["value"] != want[1] || it["pool"] != "vlan" || it["state"] != "allocated" || it["owner_type"] != "net" {
				t.Fatalf("item %d: %v, want owner %s value %s", i, it, want[0], want[1])
			}
		}
		// Idempotent: the same answer again.
		again := p.want(http.StatusOK, "POST", path, p.operator, body)
		if fmt.Sprint(again["items"]) != fmt.Sprint(got["items"]) {
			t.Fatalf("repeat: %v, first %v", again, got)
		}
		before := p.state()
		refusals := []struct {
			body        string
			status      int
			code, field string
		}{
			{`{"allocations":[{"owner_type":"net","owner_id":"x"},{"owner_type":"net","owner_id":"x"}]}`, 422, "invalid", "allocations[1].owner_id"},
			{`{"allocations":[{"owner_type":"net","owner_id":"x","value":"106"},{"owner_type":"net","owner_id":"y","value":"106"}]}`, 422, "invalid", "allocations[1].value"},
			{`{"allocations":[{"owner_type":"net","owner_id":"x"},{"owner_type":"net","owner_id":"y","value":"abc"}]}`, 422, "invalid", "allocations[1].value"},
			{`{"allocations":[{"owner_type":"net","owner_id":"x"},{"owner_type":"net","owner_id":"a","value":"107"}]}`, 409, "conflict", "allocations[1].value"},
			{`{"allocations":[{"owner_type":"net","owner_id":"x"},{"owner_type":"net","owner_id":"y","value":"105"}]}`, 409, "not_available", "allocations[1].value"},
			{`{"allocations":[{"owner_type":"net","owner_id":"x","vaule":"107"}]}`, 422, "invalid", "allocations[0].vaule"},
			{`{"allocations":[]}`, 422, "invalid", "allocations"},
			{`{}`, 422, "invalid", "allocations"},
			{`{"allocations":[`, 400, "bad_request", ""},
		}
		for _, r := range refusals {
			res := p.do("POST", path, p.operator, "", r.body)
			if r.field == "allocations[0].vaule" {
				// Misspelt members are refused by the shared strict decoder,
				// which names the member.
				if res.status != 422 || !strings.Contains(string(res.body), "vaule") {
					t.Fatalf("unknown field: %d %s", res.status, res.body)
				}
				continue
			}
			wantAPIError(t, res, r.status, r.code, r.field)
		}
		var many strings.Builder
		many.WriteString(`{"allocations":[`)
		for i := 0; i < 11; i++ {
			if i > 0 {
				many.WriteByte(',')
			}
			fmt.Fprintf(&many, `{"owner_type":"net","owner_id":"m%d"}`, i)
		}
		many.WriteString(`]}`)
		wantAPIError(t, p.do("POST", path, p.operator, "", many.String()), 409, "pool_exhausted", "allocations[8].value")
		if after := p.state(); after != before {
			t.Fatalf("a refused bulk request changed stored state")
		}
		wantAPIError(t, p.do("POST", path, p.viewer, "", body), 403, "forbidden", "")
		wantAPIError(t, p.do("POST", "/api/v1/pools/nope/allocations:batch", p.operator, "", body), 404, "not_found", "")
	})
}
