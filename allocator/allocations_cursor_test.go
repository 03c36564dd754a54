package allocator

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
)

// An allocations cursor belongs to its pool: another pool's cursor, or a
// bare value key, is 422 invalid naming the cursor rather than a page read
// in the wrong value space (an IPv4 key given to an integer pool skipped
// every row; given to an IPv6 pool it restarted from the first).
func TestAllocationCursorBelongsToItsPool(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("lo-ip", "ipv4", 0, rng("10.0.0.1", "10.0.0.99", true))
		f.mkPool("vni", "integer", 0, rng("1", "200", true))
		for i := 0; i < 5; i++ {
			f.alloc("lo-ip", fmt.Sprint("l", i), "")
			f.alloc("vni", fmt.Sprint("v", i), "")
		}
		page, err := f.a.ListAllocations(f.ctx, "lo-ip", AllocationFilter{Limit: 2})
		if err != nil || page.NextCursor == "" {
			t.Fatalf("first lo-ip page: %+v %v", page, err)
		}
		next, err := f.a.ListAllocations(f.ctx, "lo-ip", AllocationFilter{Limit: 2, Cursor: page.NextCursor})
		if err != nil || len(next.Items) != 2 || next.Items[0].Value != "10.0.0.3" {
			t.Fatalf("second lo-ip page: %+v %v", next, err)
		}
		_, err = f.a.ListAllocations(f.ctx, "vni", AllocationFilter{Limit: 2, Cursor: page.NextCursor})
		testkit.WantCode(t, err, fault.CodeInvalid, "", "cursor")
		if e, ok := fault.AsError(err); !ok || e.Field != "cursor" {
			t.Fatalf("another pool's cursor: %v", err)
		}
		_, key, _ := strings.Cut(page.NextCursor, "-")
		_, err = f.a.ListAllocations(f.ctx, "lo-ip", AllocationFilter{Cursor: key})
		testkit.WantCode(t, err, fault.CodeInvalid, "", "cursor")
	})
}
