package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
)

// TestConsoleCountsHaveSeparators: counts in the console — pool sizes
// and free values (an IPv6 /64's 20-digit size included), the dashboard's
// tiles — carry thousands separators, while values, which are
// identifiers (a VNI, an address), are shown as stored.
func TestConsoleCountsHaveSeparators(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		ctx := context.Background()
		for _, p := range []allocator.PoolSpec{
			{Name: "vni", Type: "integer", Ranges: []allocator.RangeSpec{{First: "5000", Last: "9999"}}},
			{Name: "v6", Type: "ipv6", Ranges: []allocator.RangeSpec{{First: "fd00:1::", Last: "fd00:1::ffff:ffff:ffff:ffff"}}},
		} {
			if _, err := site.a.CreatePool(ctx, p); err != nil {
				t.Fatalf("create %s: %v", p.Name, err)
			}
		}
		if _, _, err := site.a.Allocate(ctx, "vni", allocator.Owner{Type: "network", ID: "tenant-a"}, ""); err != nil {
			t.Fatal(err)
		}
		b := site.login(auth.RoleViewer)
		pools := expect(t, b.get("/pools"), http.StatusOK, ">5,000<", ">4,999<", `title="18,446,744,073,709,551,616"`)
		if strings.Contains(pools, ">5000<") {
			t.Errorf("the pools page shows a count without separators:\n%s", clip(pools))
		}
		expect(t, b.get("/"), http.StatusOK, "size 5,000", "free 4,999")
		detail := expect(t, b.get("/pools/vni"), http.StatusOK, ">5,000<", "5000")
		if strings.Contains(detail, "5,000 – ") || strings.Contains(detail, ">5,000</a>") {
			t.Errorf("a value (an identifier) got a separator:\n%s", clip(detail))
		}
	})
}
