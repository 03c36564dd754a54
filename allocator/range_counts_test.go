package allocator

// The per-range counts of migration 6 (range_counts, kept by triggers) must
// equal a brute-force count of the allocations after every kind of write:
// allocate, release, quarantine, reclaim, unquarantine, range growth,
// shrink, auto_assign flip, removal, pool deletion by cascade, and many
// writers at once; and the usage roll-up must equal the audit events it
// rolls up. Runs on SQLite and PostgreSQL.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// reservedUnheldTruth recounts range_counts.reserved_unheld of the range
// r of pool p: the values ExpectedDpus reserve in it that no allocation of
// the pool holds, in any state (migration 29).
const reservedUnheldTruth = `(SELECT COUNT(*) FROM expected_dpus d WHERE
	  (p.name = 'lo-ip' AND d.loopback_ip_key BETWEEN r.first_key AND r.last_key
	   AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = r.pool_id AND a.value_key = d.loopback_ip_key))
	  OR (p.name = 'lo-ip-v6' AND d.loopback_ip_v6_key BETWEEN r.first_key AND r.last_key
	   AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = r.pool_id AND a.value_key = d.loopback_ip_v6_key)))`

// requireCountsTruth compares range_counts with COUNT(*) per range and
// state and with the reservations no allocation holds, and
// pool_usage_days with the audit events.
func requireCountsTruth(t *testing.T, db *gorm.DB, when string) {
	t.Helper()
	type rc struct {
		RangeID                int64
		Allocated, Quarantined int64
		ReservedUnheld         int64
		TrueA, TrueQ, TrueR    int64
	}
	var rows []rc
	err := db.Raw(`SELECT r.id AS range_id, COALESCE(c.allocated, -1) AS allocated, COALESCE(c.quarantined, -1) AS quarantined,
		COALESCE(c.reserved_unheld, -1) AS reserved_unheld,
		(SELECT COUNT(*) FROM allocations a WHERE a.pool_id = r.pool_id AND a.value_key BETWEEN r.first_key AND r.last_key AND a.state = 'allocated') AS true_a,
		(SELECT COUNT(*) FROM allocations a WHERE a.pool_id = r.pool_id AND a.value_key BETWEEN r.first_key AND r.last_key AND a.state = 'quarantined') AS true_q,
		` + reservedUnheldTruth + ` AS true_r
		FROM pool_ranges r JOIN pools p ON p.id = r.pool_id LEFT JOIN range_counts c ON c.range_id = r.id ORDER BY r.id`).Scan(&rows).Error
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Allocated != r.TrueA || r.Quarantined != r.TrueQ || r.ReservedUnheld != r.TrueR {
			t.Fatalf("%s: range %d counts allocated=%d quarantined=%d reserved_unheld=%d, truth %d/%d/%d", when, r.RangeID,
				r.Allocated, r.Quarantined, r.ReservedUnheld, r.TrueA, r.TrueQ, r.TrueR)
		}
	}
	var orphans int64
	if err := db.Raw(`SELECT COUNT(*) FROM range_counts c WHERE NOT EXISTS (SELECT 1 FROM pool_ranges r WHERE r.id = c.range_id)`).Scan(&orphans).Error; err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Fatalf("%s: %d counts of removed ranges", when, orphans)
	}
	var rolled, events int64
	if err := db.Raw(`SELECT COALESCE(SUM(n), 0) FROM pool_usage_days`).Scan(&rolled).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Raw(`SELECT COUNT(*) FROM audit_events WHERE object_type = 'allocation'`).Scan(&events).Error; err != nil {
		t.Fatal(err)
	}
	if rolled != events {
		t.Fatalf("%s: pool_usage_days sums to %d, audit has %d allocation events", when, rolled, events)
	}
}

func TestRangeCountsFollowEveryWrite(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		a := New(db, Options{})
		f := false
		if _, err := a.CreatePool(ctx, PoolSpec{Name: "cnt", Type: "ipv4", Ranges: []RangeSpec{
			{First: "10.0.0.0", Last: "10.0.0.99"}, {First: "10.0.1.0", Last: "10.0.1.99", AutoAssign: &f}}}); err != nil {
			t.Fatal(err)
		}
		requireCountsTruth(t, db, "empty pool")
		var held []Allocation
		for i := 0; i < 40; i++ {
			al, _, err := a.Allocate(ctx, "cnt", Owner{"machine", fmt.Sprint("m", i)}, "")
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, al)
		}
		for i := 0; i < 5; i++ {
			if _, _, err := a.Allocate(ctx, "cnt", Owner{"machine", fmt.Sprint("x", i)}, fmt.Sprint("10.0.1.", 10+i)); err != nil {
				t.Fatal(err)
			}
		}
		requireCountsTruth(t, db, "after allocations")
		for _, al := range held[:10] {
			if err := a.Release(ctx, "cnt", al.Value, Owner{*al.OwnerType, *al.OwnerID}); err != nil {
				t.Fatal(err)
			}
		}
		requireCountsTruth(t, db, "after releases")
		// Quarantine three values (force-delete path), reclaim one, unquarantine one.
		err := a.write(ctx, func(tx *tx) error {
			p, err := tx.lockPool("cnt")
			if err != nil {
				return err
			}
			for _, al := range held[10:13] {
				var row models.Allocation
				if err := tx.Where("pool_id = ? AND value = ?", p.ID, al.Value).Take(&row).Error; err != nil {
					return err
				}
				if err := tx.quarantine(p, &row, "test"); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		requireCountsTruth(t, db, "after quarantines")
		if err := a.write(ctx, func(tx *tx) error {
			p, err := tx.lockPool("cnt")
			if err != nil {
				return err
			}
			row, err := tx.quarantinedFor(p, Owner{*held[10].OwnerType, *held[10].OwnerID})
			if err != nil || row == nil {
				return fmt.Errorf("quarantine of %s not found: %v", held[10].Value, err)
			}
			_, err = tx.reclaimRow(p, row, Owner{*held[10].OwnerType, *held[10].OwnerID})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := a.Unquarantine(ctx, "cnt", held[11].Value); err != nil {
			t.Fatal(err)
		}
		requireCountsTruth(t, db, "after reclaim and unquarantine")
		// Growth, shrink, flip, removal.
		r, err := a.AddRange(ctx, "cnt", RangeSpec{First: "10.0.2.0", Last: "10.0.2.255"})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 70; i++ { // fills the first range, spills into the new one
			if _, _, err := a.Allocate(ctx, "cnt", Owner{"endpoint", fmt.Sprint("e", i)}, ""); err != nil {
				t.Fatal(err)
			}
		}
		requireCountsTruth(t, db, "after growth")
		last := "10.0.2.200"
		if _, err := a.UpdateRange(ctx, "cnt", r.ID, RangeUpdate{Last: &last}); err != nil {
			t.Fatal(err)
		}
		requireCountsTruth(t, db, "after shrink")
		tr := true
		pool, err := a.GetPool(ctx, "cnt")
		if err != nil {
			t.Fatal(err)
		}
		explicitID := ""
		for _, x := range pool.Ranges {
			if !x.AutoAssign {
				explicitID = x.ID
			}
		}
		if _, err := a.UpdateRange(ctx, "cnt", explicitID, RangeUpdate{AutoAssign: &tr}); err != nil && !testkit.IsCode(err, fault.CodeConflict) {
			t.Fatal(err)
		}
		extra, err := a.AddRange(ctx, "cnt", RangeSpec{First: "10.0.3.0", Last: "10.0.3.9"})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.RemoveRange(ctx, "cnt", extra.ID); err != nil {
			t.Fatal(err)
		}
		requireCountsTruth(t, db, "after flip and removal")
		// The API's stats are the counts.
		pool, err = a.GetPool(ctx, "cnt")
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		db.Raw(`SELECT COUNT(*) FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = 'cnt' AND a.state = 'allocated'`).Scan(&n)
		got := 0
		for _, c := range []Counts{pool.Stats.Auto, pool.Stats.Explicit} {
			var k int
			fmt.Sscan(c.Allocated, &k)
			got += k
		}
		if int64(got) != n {
			t.Fatalf("stats say %d allocated, the table holds %d", got, n)
		}
		// Deleting the pool (after its allocations: a range never goes from
		// under one) removes its counts with its ranges.
		if err := db.Exec(`DELETE FROM allocations WHERE pool_id = (SELECT id FROM pools WHERE name = 'cnt')`).Error; err != nil {
			t.Fatal(err)
		}
		requireCountsTruth(t, db, "after deleting every allocation")
		if err := db.Exec(`DELETE FROM pools WHERE name = 'cnt'`).Error; err != nil {
			t.Fatal(err)
		}
		requireCountsTruth(t, db, "after pool deletion")
	})
}

// Many writers on several pools at once: the counts stay exact (every
// change is counted in its own transaction, under its pool's lock).
func TestRangeCountsUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		a := New(db, Options{})
		for i := 0; i < 3; i++ {
			if _, err := a.CreatePool(ctx, PoolSpec{Name: fmt.Sprint("c", i), Type: "integer", Ranges: []RangeSpec{
				{First: "1", Last: "60"}, {First: "61", Last: "1000"}}}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				for i := 0; i < 25; i++ {
					pool := fmt.Sprint("c", rng.IntN(3))
					owner := Owner{"w", fmt.Sprint(w, "-", i)}
					al, _, err := a.Allocate(ctx, pool, owner, "")
					if err != nil {
						t.Error(err)
						return
					}
					if rng.IntN(3) == 0 {
						if err := a.Release(ctx, pool, al.Value, owner); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}(w)
		}
		wg.Wait()
		requireCountsTruth(t, db, "after concurrent writers")
	})
}
