package web

import (
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
)

// If-Match compares entity tags as strings: only the quoted canonical
// decimal of the version ("2", W/"2") matches it. An unquoted 2, "02" or
// "+2" is a tag that is not a version, so the write is refused with 412
// and nothing changes.
func TestIfMatchTagsAreStrings(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newEMHTTP(t, db)
		r := h.do("POST", "/api/v1/expected-machines", h.admin, `{"bmc_mac_address":"0a:00:00:00:07:01","metadata":{"name":"im"}}`, nil)
		if r.Code != 201 {
			t.Fatalf("create: %d %s", r.Code, r.Body)
		}
		loc := r.Header().Get("Location")
		r = h.do("PATCH", loc, h.admin, `{"sku_id":"s1"}`, map[string]string{"If-Match": `"1"`})
		if r.Code != 200 || r.Header().Get("ETag") != `"2"` {
			t.Fatalf("PATCH with the current tag: %d %s", r.Code, r.Body)
		}
		for _, tag := range []string{`2`, `"02"`, `"+2"`, `" 2"`, `W/ "2"`, `"2`, `abc`} {
			r = h.do("PATCH", loc, h.admin, `{"sku_id":"s2"}`, map[string]string{"If-Match": tag})
			h.wantError(r, 412, "stale_version", "")
			if strings.Contains(r.Body.String(), "-1") {
				t.Errorf("If-Match %s: message shows an internal -1: %s", tag, r.Body)
			}
			r = h.do("DELETE", loc, h.admin, "", map[string]string{"If-Match": tag})
			h.wantError(r, 412, "stale_version", "")
		}
		r = h.do("GET", loc, h.admin, "", nil)
		if r.Code != 200 || r.Header().Get("ETag") != `"2"` || !strings.Contains(r.Body.String(), `"sku_id":"s1"`) {
			t.Fatalf("a refused write changed the record: %d %s", r.Code, r.Body)
		}
		for _, tag := range []string{`W/"2"`, `"7", "2"`} {
			if r = h.do("PATCH", loc, h.admin, `{"sku_id":"s1"}`, map[string]string{"If-Match": tag}); r.Code != 200 {
				t.Fatalf("If-Match %s: %d %s", tag, r.Code, r.Body)
			}
		}
	})
}
