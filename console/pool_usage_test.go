package console

import (
	"context"
	"strconv"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit"
)

// TestConsolePoolUsage replays a known history: the counts per UTC day
// match what was allocated, released, quarantined and unquarantined that
// day, for this pool only.
func TestConsolePoolUsage(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		clock := testkit.NewClock(start)
		a := allocator.New(db, allocator.Options{Now: clock.Now})
		c := New(a, db)
		ctx := context.Background()
		auto := true
		for _, name := range []string{"p", "p2"} {
			if _, err := a.CreatePool(ctx, allocator.PoolSpec{Name: name, Type: "integer",
				Ranges: []allocator.RangeSpec{{First: "1", Last: "100", AutoAssign: &auto}}}); err != nil {
				t.Fatal(err)
			}
		}
		own := func(i int) allocator.Owner { return allocator.Owner{Type: "t", ID: strconv.Itoa(i)} }
		// Value 2 of p is held by a host, whose force delete quarantines it.
		host := allocator.HostMachineID("0a:00:00:00:00:01")
		if _, err := a.Report(ctx, allocator.ReportSpec{BmcMacAddress: "0a:00:00:00:00:01"}); err != nil {
			t.Fatal(err)
		}
		ownP := func(i int) allocator.Owner {
			if i == 1 {
				return allocator.Owner{Type: allocator.OwnerTypeMachine, ID: host}
			}
			return own(i)
		}
		// Day 0: +3. Day 1: +2, −1. Day 2: quarantine one (no change in
		// use). Day 3: unquarantine it (−1). Pool p2 moves too (ignored).
		for i := 0; i < 3; i++ {
			if _, _, err := a.Allocate(ctx, "p", ownP(i), ""); err != nil {
				t.Fatal(err)
			}
			if _, _, err := a.Allocate(ctx, "p2", own(i), ""); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(24 * time.Hour)
		for i := 3; i < 5; i++ {
			if _, _, err := a.Allocate(ctx, "p", own(i), ""); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Release(ctx, "p", "1", own(0)); err != nil {
			t.Fatal(err)
		}
		clock.Advance(24 * time.Hour)
		if _, err := a.DeleteMachine(ctx, host, true); err != nil {
			t.Fatal(err)
		}
		clock.Advance(24 * time.Hour)
		if err := a.Unquarantine(ctx, "p", "2"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(24 * time.Hour) // today: day 4, nothing happens

		pts, err := c.PoolUsage(ctx, "p", 6)
		if err != nil {
			t.Fatal(err)
		}
		want := []struct{ alloc, quar int64 }{{0, 0}, {3, 0}, {4, 0}, {3, 1}, {3, 0}, {3, 0}}
		if len(pts) != len(want) {
			t.Fatalf("%d points, want %d", len(pts), len(want))
		}
		for i, w := range want {
			if pts[i].Allocated != w.alloc || pts[i].Quarantined != w.quar {
				t.Errorf("day %d (%s): allocated %d quarantined %d, want %d %d", i, pts[i].Day.Format("Jan 2"),
					pts[i].Allocated, pts[i].Quarantined, w.alloc, w.quar)
			}
		}
		if !pts[5].Day.Equal(time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("last day %s, want today 2026-03-05", pts[5].Day)
		}
		if _, err := c.PoolUsage(ctx, "nope", 30); err == nil {
			t.Fatal("unknown pool accepted")
		}
		if _, err := c.PoolUsage(ctx, "p", 0); err == nil {
			t.Fatal("days=0 accepted")
		}
	})
}
