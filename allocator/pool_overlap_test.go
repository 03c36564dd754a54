package allocator

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// Address pools never overlap one another, on every door that creates or
// grows a range: 409 conflict naming the other pool and its range, and
// nothing changes. integer pools may overlap.
func TestAddressPoolsNeverOverlap(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("lo-ip", "ipv4", 0, rng("10.0.0.1", "10.0.0.9", true), rng("10.0.0.100", "10.0.0.199", false))
		f.mkPool("lo-ip-v6", "ipv6", 0, rng("fd00::1", "fd00::ff", true))
		f.mkPool("blocks", "ipv6prefix", 96, rng("fd00:1::", "fd00:1::3:0:0", true))
		before := f.snap()

		_, err := f.a.CreatePool(f.ctx, PoolSpec{Name: "mgmt", Type: "ipv4", Ranges: []RangeSpec{rng("10.0.0.150", "10.0.0.160", true)}})
		testkit.WantCode(t, err, fault.CodeConflict, "", `pool "lo-ip"`, "10.0.0.100..10.0.0.199")
		_, err = f.a.AddRange(f.ctx, "lo-ip-v6", rng("fd00:1::2:0:5", "fd00:1::2:0:9", false))
		testkit.WantCode(t, err, fault.CodeConflict, "", `pool "blocks"`, "fd00:1::/96..fd00:1::3:0:0/96")
		// The last block starts at fd00:1::3:0:0 and covers up to
		// fd00:1::3:ffff:ffff: an address past its start still collides.
		_, err = f.a.CreatePool(f.ctx, PoolSpec{Name: "v6b", Type: "ipv6", Ranges: []RangeSpec{rng("fd00:1::3:ffff:ffff", "fd00:1::4:0:0", true)}})
		testkit.WantCode(t, err, fault.CodeConflict, "", `pool "blocks"`)
		f.unchanged(before, "a refused overlap")

		// Growing a range over another pool's is refused; growing into free
		// space is not.
		mg := f.mkPool("mgmt", "ipv4", 0, rng("10.0.1.0", "10.0.1.255", true))
		_, err = f.a.UpdateRange(f.ctx, "mgmt", mg.Ranges[0].ID, RangeUpdate{First: strp("10.0.0.199")})
		testkit.WantCode(t, err, fault.CodeConflict, "", `pool "lo-ip"`, "10.0.0.100..10.0.0.199")
		if _, err := f.a.UpdateRange(f.ctx, "mgmt", mg.Ranges[0].ID, RangeUpdate{First: strp("10.0.0.200")}); err != nil {
			t.Fatalf("growing into free space: %v", err)
		}
		// Touching is not overlapping; IPv4 and IPv6 are separate spaces;
		// integer pools may overlap.
		f.mkPool("mgmt2", "ipv4", 0, rng("10.0.0.10", "10.0.0.99", true))
		f.mkPool("vlan", "integer", 0, rng("1", "4094", true))
		f.mkPool("vni", "integer", 0, rng("1", "4094", true))
		if ov, err := f.a.CheckPools(f.ctx); err != nil || len(ov) != 0 {
			t.Fatalf("check of a clean site: %v %v", ov, err)
		}
	})
}

// A pool load (a pool file) reports a range that overlaps another address
// pool as drift and does not create it; a new pool all of whose ranges
// overlap is not created at all.
func TestPoolFileOverlapIsDrift(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("lo-ip", "ipv4", 0, rng("10.180.62.0", "10.180.62.127", true))
		res, err := f.a.LoadPools(f.ctx, []PoolSpec{
			{Name: "lo-ip", Type: "ipv4", Ranges: []RangeSpec{rng("10.180.62.0", "10.180.62.127", true), rng("10.180.64.0", "10.180.64.9", true)}},
			{Name: "mgmt", Type: "ipv4", Ranges: []RangeSpec{rng("10.180.62.100", "10.180.62.199", true), rng("10.180.63.0", "10.180.63.9", true)}},
			{Name: "other", Type: "ipv4", Ranges: []RangeSpec{rng("10.180.62.0", "10.180.62.14", true)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		drift := fmt.Sprint(res.Drift)
		if len(res.Drift) != 3 || !strings.Contains(drift, `10.180.62.100..10.180.62.199 overlaps range 10.180.62.0..10.180.62.127 of pool "lo-ip"`) ||
			!strings.Contains(drift, "pool not created") {
			t.Fatalf("drift %v", res.Drift)
		}
		if len(res.Created) != 2 {
			t.Fatalf("created %v", res.Created)
		}
		if _, err := f.a.GetPool(f.ctx, "other"); err == nil {
			t.Fatal("a pool whose every range overlaps was created")
		}
		p, err := f.a.GetPool(f.ctx, "mgmt")
		if err != nil || len(p.Ranges) != 1 || p.Ranges[0].First != "10.180.63.0" {
			t.Fatalf("mgmt %+v %v", p, err)
		}
	})
}

// Two pools created at once whose ranges overlap: exactly one is created,
// on both databases (the check runs under the family's lock).
func TestConcurrentOverlappingPools(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		for round := 0; round < 5; round++ {
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i := range errs {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					_, errs[i] = f.a.CreatePool(f.ctx, PoolSpec{Name: fmt.Sprintf("p%d-%d", round, i), Type: "ipv4",
						Ranges: []RangeSpec{rng(fmt.Sprintf("10.%d.0.%d", round, i), fmt.Sprintf("10.%d.0.%d", round, 10+i), true)}})
				}(i)
			}
			wg.Wait()
			ok := 0
			for _, err := range errs {
				if err == nil {
					ok++
				} else {
					testkit.WantCode(t, err, fault.CodeConflict, "", "address pools never overlap")
				}
			}
			if ok != 1 {
				t.Fatalf("round %d: %d pools created, want 1 (%v)", round, ok, errs)
			}
		}
	})
}

// A database holding overlapping pools from before the rule migrates and
// keeps working: CheckPools lists each overlap once, the overlapping
// ranges may be used, shrunk or removed, never grown.
func TestExistingOverlapsReported(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			var u string
			if d == models.Postgres {
				u = dbtest.NewPostgresURL(t)
			} else {
				u = dbtest.NewSQLiteURL(t)
			}
			db, _, err := database.Open(u)
			if err != nil {
				t.Fatal(err)
			}
			if s, e := db.DB(); e == nil {
				t.Cleanup(func() { s.Close() })
			}
			if err := models.MigrateTo(db, 11); err != nil {
				t.Fatal(err)
			}
			f := newFnd(t, db, 0)
			f.mkPoolAtSchema11("lo-ip", "ipv4", 0, rng("10.0.0.1", "10.0.0.99", true))
			f.mkPoolAtSchema11("blocks", "ipv6prefix", 96, rng("fd00::", "fd00::1:0:0", true))
			// Overlaps written before the rule existed (the allocator
			// refuses them now): moved into place in SQL.
			for _, c := range []struct{ pool, typ, first, last, toFirst, toLast string }{
				{"mgmt", "ipv4", "10.0.1.50", "10.0.1.150", "10.0.0.50", "10.0.0.150"},
				{"v6", "ipv6", "fd00:9::1", "fd00:9::9", "fd00::1:0:1", "fd00::1:0:9"},
			} {
				ids := f.mkPoolAtSchema11(c.pool, c.typ, 0, rng(c.first, c.last, true))
				if err := db.Exec(`UPDATE pool_ranges SET first_key = ?, last_key = ?, first_value = ?, last_value = ? WHERE id = ?`,
					*lcKey(c.toFirst), *lcKey(c.toLast), c.toFirst, c.toLast, ids[0]).Error; err != nil {
					t.Fatal(err)
				}
			}
			if err := models.Migrate(db); err != nil {
				t.Fatalf("migrating a site with overlaps: %v", err)
			}
			// A fresh handle, as a server starting after the migration has
			// (cached statements know the old columns).
			db = dbtest.OpenURL(t, u)
			f = newFnd(t, db, 0)
			ov, err := f.a.CheckPools(f.ctx)
			if err != nil || len(ov) != 2 {
				t.Fatalf("overlaps %v %v", ov, err)
			}
			msgs := ov[0].Message() + " | " + ov[1].Message()
			if !strings.Contains(msgs, `range 10.0.0.1..10.0.0.99 of pool "lo-ip" overlaps range 10.0.0.50..10.0.0.150 of pool "mgmt"`) ||
				!strings.Contains(msgs, `pool "blocks"`) || !strings.Contains(msgs, `pool "v6"`) {
				t.Fatalf("messages: %s", msgs)
			}
			// Still usable; growth refused, shrink allowed.
			f.alloc("mgmt", "m1", "")
			p, _ := f.a.GetPool(f.ctx, "mgmt")
			_, err = f.a.UpdateRange(f.ctx, "mgmt", p.Ranges[0].ID, RangeUpdate{First: strp("10.0.0.40")})
			testkit.WantCode(t, err, fault.CodeConflict, "", `pool "lo-ip"`)
			lo, _ := f.a.GetPool(f.ctx, "lo-ip")
			if _, err := f.a.UpdateRange(f.ctx, "lo-ip", lo.Ranges[0].ID, RangeUpdate{Last: strp("10.0.0.49")}); err != nil {
				t.Fatalf("shrinking out of the overlap: %v", err)
			}
			p = lo
			ov, _ = f.a.CheckPools(f.ctx)
			if len(ov) != 1 {
				t.Fatalf("after the fix: %v", ov)
			}
			// On PostgreSQL the fixed range is under the exclusion
			// constraint again.
			if d == models.Postgres {
				var marked bool
				if err := db.Raw(`SELECT overlap_grandfathered FROM pool_ranges WHERE id = ?`, p.Ranges[0].ID).Scan(&marked).Error; err != nil || marked {
					t.Fatalf("fixed range still marked: %v %v", marked, err)
				}
			}
		})
	}
}

// mkPoolAtSchema11 creates a pool on a database migrated only to schema
// 11 and returns its range ids. Today's CreatePool writes there, but its
// answer reads range counts that later migrations added, so the pool is
// read back from its rows instead.
func (f *fnd) mkPoolAtSchema11(name, typ string, plen int, ranges ...RangeSpec) []int64 {
	f.t.Helper()
	_, err := f.a.CreatePool(f.ctx, PoolSpec{Name: name, Type: typ, DelegatePrefixLen: plen, Ranges: ranges})
	var ids []int64
	if e := f.a.DB().Raw(`SELECT r.id FROM pool_ranges r JOIN pools p ON p.id = r.pool_id WHERE p.name = ? ORDER BY r.id`, name).Scan(&ids).Error; e != nil || len(ids) != len(ranges) {
		f.t.Fatalf("create pool %s at schema 11: %v; ranges stored: %v (%v)", name, err, ids, e)
	}
	return ids
}
