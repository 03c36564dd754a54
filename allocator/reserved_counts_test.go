package allocator

// The reserved count of the reservation pools (range_counts.reserved_unheld,
// migration 29, kept by triggers) must equal a recount after every kind of
// write, and the pool stats built from it must equal the count the pool
// page made on read before it (every reservation in the range that no
// allocation holding its value holds, an expired quarantine holding
// nothing: docs/api.md). Runs on SQLite and PostgreSQL; the PostgreSQL
// tests race the writers of both sides in separate transactions.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// reservedOracle is the reserved count of each range of pool (by range
// id) as a read computes it from the rows: the ExpectedDpus reserving a
// value of the range that no allocation holding it holds.
func reservedOracle(t *testing.T, a *Allocator, db *gorm.DB, pool string) map[string]string {
	t.Helper()
	col := reservationColumn(pool)
	if col == "" {
		t.Fatalf("%s is not a reservation pool", pool)
	}
	cond, args := "1=1", []any{}
	if a.hold > 0 {
		cond, args = "(a.state <> 'quarantined' OR a.quarantined_at > ?)", []any{a.now().Add(-a.hold)}
	}
	var rows []struct {
		RangeID int64
		N       int64
	}
	err := db.Raw(`SELECT r.id AS range_id, (SELECT COUNT(*) FROM expected_dpus d WHERE d.`+col+` BETWEEN r.first_key AND r.last_key
		AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = r.pool_id AND a.value_key = d.`+col+` AND `+cond+`)) AS n
		FROM pool_ranges r JOIN pools p ON p.id = r.pool_id WHERE p.name = ?`, append(args, pool)...).Scan(&rows).Error
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[itoa(r.RangeID)] = fmt.Sprint(r.N)
	}
	return out
}

// requireReservedStats compares each range's reserved count in the pool
// stats of the reservation pools that exist with reservedOracle.
func requireReservedStats(t *testing.T, a *Allocator, db *gorm.DB, when string) {
	t.Helper()
	for _, pool := range []string{PoolLoopbackV4, PoolLoopbackV6} {
		p, err := a.GetPool(context.Background(), pool)
		if testkit.IsCode(err, fault.CodeNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		want := reservedOracle(t, a, db, pool)
		for _, r := range p.Ranges {
			if r.Stats.Reserved != want[r.ID] {
				t.Fatalf("%s: %s range %s..%s says %s reserved, the rows %s", when, pool, r.First, r.Last, r.Stats.Reserved, want[r.ID])
			}
		}
	}
}

// wantReserved fails unless pool's explicit ranges count want reserved.
func (f *fnd) wantReserved(pool, want string) {
	f.t.Helper()
	p, err := f.a.GetPool(f.ctx, pool)
	if err != nil {
		f.t.Fatal(err)
	}
	if p.Stats.Explicit.Reserved != want {
		f.t.Fatalf("%s: %s reserved, want %s", pool, p.Stats.Explicit.Reserved, want)
	}
}

func TestReservedCountFollowsEveryWrite(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFnd(t, db, time.Hour)
		check := func(when string) {
			t.Helper()
			requireCountsTruth(t, db, when)
			requireReservedStats(t, f.a, db, when)
		}
		exec := func(q string, args ...any) {
			t.Helper()
			if err := db.Exec(q, args...).Error; err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.9", true), rng("10.0.0.100", "10.0.0.199", false))
		check("a reservation pool without reservations")

		// Reservations set, changed and cleared on ExpectedMachines.
		em1 := f.emCreate(emSpec("02:00:00:00:00:01", emDPU4("MT1", "10.0.0.100", ""), emDPU4("MT2", "10.0.0.101", "")))
		em2 := f.emCreate(emSpec("02:00:00:00:00:02", emDPU4("MT3", "10.0.0.102", ""), emDPU4("MT4", "", "")))
		check("reservations declared")
		f.wantReserved(PoolLoopbackV4, "3")
		f.mustReport(specOf("02:00:00:00:00:01", "MT1", "MT2"))
		check("a report allocates the reserved values")
		f.wantReserved(PoolLoopbackV4, "1")
		if _, err := f.a.ReplaceExpectedMachine(f.ctx, em1.ID, emSpec("02:00:00:00:00:01", emDPU4("MT1", "10.0.0.110", ""), emDPU4("MT2", "10.0.0.101", "")), nil); err != nil {
			t.Fatal(err)
		}
		check("a reservation moved away from its DPU's value")
		if _, err := f.a.PatchExpectedMachine(f.ctx, em2.ID, []byte(`{"expected_dpus": [{"serial_number": "MT3"}, {"serial_number": "MT4", "loopback_ip": "10.0.0.104"}]}`), nil); err != nil {
			t.Fatal(err)
		}
		check("a reservation cleared, another set")
		f.mustReport(specOf("02:00:00:00:00:01", "MT1", "MT2"))
		check("a report after the reservation moved")

		// An allocation of a value reserved later, then released.
		f.alloc(PoolLoopbackV4, "x", "10.0.0.150")
		f.declare("MT7", "10.0.0.150", "")
		check("a value allocated, then reserved")
		f.release(PoolLoopbackV4, "10.0.0.150", "x")
		check("the reserved value released")

		// Quarantines: force delete, expiry of the hold, unquarantine.
		f.alloc(PoolLoopbackV4, "z", "10.0.0.151")
		f.declare("MT12", "10.0.0.151", "")
		f.quarantine(PoolLoopbackV4, "10.0.0.151")
		check("a reserved value quarantined")
		if _, err := f.a.DeleteMachine(f.ctx, HostMachineID("02:00:00:00:00:01"), true); err != nil {
			t.Fatal(err)
		}
		check("the DPUs' values quarantined by a force delete")
		var quarantined []string
		if err := db.Raw(`SELECT a.value FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = 'lo-ip' AND a.state = 'quarantined' ORDER BY a.value_key`).
			Scan(&quarantined).Error; err != nil {
			t.Fatal(err)
		}
		if len(quarantined) < 2 {
			t.Fatalf("the force delete quarantined %v", quarantined)
		}
		if err := f.a.Unquarantine(f.ctx, PoolLoopbackV4, quarantined[0]); err != nil {
			t.Fatal(err)
		}
		check("a quarantine unquarantined")
		f.clock.Advance(2 * time.Hour)
		check("the hold ran out")
		f.alloc(PoolLoopbackV4, "after-hold", "")
		check("an allocation after the hold (purges expired quarantines)")

		// Ranges added, grown, shrunk and removed around reservations.
		r1, err := f.a.AddRange(f.ctx, PoolLoopbackV4, rng("10.0.1.0", "10.0.1.9", false))
		if err != nil {
			t.Fatal(err)
		}
		f.emCreate(emSpec("02:00:00:00:00:05", emDPU4("MT5", "10.0.1.5", "")))
		check("a reservation in a new range")
		f.declare("MT8", "10.0.2.5", "") // outside every range (a repair in SQL)
		check("a reservation outside every range")
		last := "10.0.2.9"
		if _, err := f.a.UpdateRange(f.ctx, PoolLoopbackV4, r1.ID, RangeUpdate{Last: &last}); err != nil {
			t.Fatal(err)
		}
		check("a range grown over a reservation")
		last = "10.0.2.5"
		if _, err := f.a.UpdateRange(f.ctx, PoolLoopbackV4, r1.ID, RangeUpdate{Last: &last}); err != nil {
			t.Fatal(err)
		}
		check("a range shrunk")
		r2, err := f.a.AddRange(f.ctx, PoolLoopbackV4, rng("10.0.3.0", "10.0.3.9", false))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.a.RemoveRange(f.ctx, PoolLoopbackV4, r2.ID); err != nil {
			t.Fatal(err)
		}
		check("a range added and removed")

		// A pool created after its reservations, renamed away and back.
		f.declare("MT6", "", "fd00:1::5")
		f.mkPool(PoolLoopbackV6, "ipv6", 0, rng("fd00::1", "fd00::ff", true), rng("fd00:1::", "fd00:1::ff", false))
		check("a reservation pool created after its reservations")
		f.wantReserved(PoolLoopbackV6, "1")
		exec(`UPDATE pools SET name = 'spare-v6' WHERE name = 'lo-ip-v6'`)
		check("the reservation pool renamed")
		exec(`UPDATE pools SET name = 'lo-ip-v6' WHERE name = 'spare-v6'`)
		check("the pool renamed back")
		f.wantReserved(PoolLoopbackV6, "1")

		// Keys and values changed in SQL.
		exec(`UPDATE expected_dpus SET loopback_ip_v6 = 'fd00:1::6', loopback_ip_v6_key = ? WHERE serial_number = 'MT6'`, *lcKey("fd00:1::6"))
		check("a reserved key updated")
		f.alloc(PoolLoopbackV6, "y", "fd00:1::7")
		exec(`UPDATE allocations SET value = 'fd00:1::6', value_key = ? WHERE value = 'fd00:1::7'`, *lcKey("fd00:1::6"))
		check("an allocation moved onto a reserved value")
		exec(`UPDATE allocations SET value = 'fd00:1::7', value_key = ? WHERE value = 'fd00:1::6'`, *lcKey("fd00:1::7"))
		check("the allocation moved back")
		exec(`UPDATE expected_dpus SET loopback_ip = NULL, loopback_ip_key = NULL, loopback_ip_v6 = 'fd00:1::8', loopback_ip_v6_key = ? WHERE serial_number = 'MT7'`,
			*lcKey("fd00:1::8"))
		check("a reservation moved from one family to the other")

		// ExpectedMachines deleted, replaced, imported and erased.
		if err := f.a.DeleteExpectedMachine(f.ctx, em2.ID, nil); err != nil {
			t.Fatal(err)
		}
		check("an ExpectedMachine deleted")
		if _, err := f.a.ReplaceAllExpectedMachines(f.ctx, []ExpectedMachineSpec{
			emSpec("02:00:00:00:00:05", emDPU4("MT5", "10.0.1.6", "")),
			emSpec("02:00:00:00:00:09", emDPU4("MT9", "10.0.0.120", "fd00:1::9"), emDPU4("MT10", "10.0.0.121", "fd00:1::a")),
		}); err != nil {
			t.Fatal(err)
		}
		check("a replace-all")
		if _, err := f.a.ImportExpectedMachines(f.ctx, []ExpectedMachineSpec{
			emSpec("02:00:00:00:00:0a", emDPU4("MT11", "10.0.0.122", "")),
			emSpec("02:00:00:00:00:09", emDPU4("MT9", "10.0.0.123", "fd00:1::9")),
		}, ImportMerge); err != nil {
			t.Fatal(err)
		}
		check("an import")
		if _, err := f.a.DeleteAllExpectedMachines(f.ctx); err != nil {
			t.Fatal(err)
		}
		check("every ExpectedMachine deleted")
		f.wantReserved(PoolLoopbackV4, "0")
		f.wantReserved(PoolLoopbackV6, "0")
		exec(`DELETE FROM allocations`)
		exec(`DELETE FROM pools`)
		check("the pools deleted")
	})
}

// pgRace holds one transaction open on PostgreSQL while a statement of
// another runs: the second must either finish without needing the first,
// or wait for it; once the first commits and the second ends, the counts
// must equal a recount. A trigger that looked before it locked would let
// both miss each other, and the recount would differ.
type pgRace struct {
	t  *testing.T
	db *gorm.DB
}

// run executes first in an open transaction, then second (tagged, so it
// can be seen waiting) on another connection, and commits the first once
// the second has finished or waits for a lock.
func (r pgRace) run(name string, first []string, second string) {
	r.t.Helper()
	tag := "/* reserved-race " + name + " */ "
	tx := r.db.Begin()
	for _, q := range first {
		if err := tx.Exec(q).Error; err != nil {
			tx.Rollback()
			r.t.Fatalf("%s: %s: %v", name, q, err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- r.db.Exec(tag + second).Error }()
	var err error
	waiting := false
	for !waiting {
		select {
		case err = <-done:
			waiting = true
			done = nil
		default:
			var n int64
			if e := r.db.Raw(`SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE ?`, "%"+tag+"%").Scan(&n).Error; e != nil {
				r.t.Fatal(e)
			}
			waiting = n > 0
			if !waiting {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	if e := tx.Commit().Error; e != nil {
		r.t.Fatalf("%s: commit the first: %v", name, e)
	}
	if done != nil {
		err = <-done
	}
	if err != nil {
		r.t.Fatalf("%s: the second: %v", name, err)
	}
	requireCountsTruth(r.t, r.db, name)
}

// Each pair of writes that changes one reserved count, in two
// transactions, the first uncommitted while the second runs: both orders
// of a reservation and an allocation of one value made and removed, a
// range added under a reservation, a reservation pool created or renamed
// while a reservation in it is made.
func TestReservedCountRacesOnPostgres(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, models.Postgres)
	f := newFnd(t, db, 0)
	f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.9", true), rng("10.0.0.100", "10.0.0.199", false))
	f.emWith("02:00:00:00:00:01", "[]")
	at := f.clock.Now().Format(time.RFC3339)
	key := func(v string) string { return *lcKey(v) }
	reserve := func(serial, col, v string) string {
		return fmt.Sprintf(`INSERT INTO expected_dpus (expected_machine_id, position, serial_number, %s, %s_key) VALUES ('em-020000000001', 0, '%s', '%s', '%s')`,
			col, col, serial, v, key(v))
	}
	unreserve := func(serial string) string { return `DELETE FROM expected_dpus WHERE serial_number = '` + serial + `'` }
	allocate := func(pool, owner, v string) string {
		return fmt.Sprintf(`INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
			SELECT id, '%s', '%s', 'allocated', 'vm', '%s', TRUE, '%s' FROM pools WHERE name = '%s'`, key(v), v, owner, at, pool)
	}
	release := func(v string) string { return `DELETE FROM allocations WHERE value = '` + v + `'` }
	r := pgRace{t, db}
	r.run("reservation after an allocation", []string{allocate("lo-ip", "a", "10.0.0.100")}, reserve("S1", "loopback_ip", "10.0.0.100"))
	r.run("allocation after a reservation", []string{reserve("S2", "loopback_ip", "10.0.0.101")}, allocate("lo-ip", "b", "10.0.0.101"))
	r.run("release after an unreservation", []string{unreserve("S1")}, release("10.0.0.100"))
	r.run("unreservation after a release", []string{release("10.0.0.101")}, unreserve("S2"))
	setup := func(q string) {
		t.Helper()
		if err := db.Exec(q).Error; err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	setup(allocate("lo-ip", "c", "10.0.0.102"))
	r.run("reservation of a value being released", []string{release("10.0.0.102")}, reserve("S3", "loopback_ip", "10.0.0.102"))
	setup(allocate("lo-ip", "d", "10.0.0.103"))
	setup(reserve("S4", "loopback_ip", "10.0.0.104"))
	r.run("reservation moved while its value is allocated", []string{allocate("lo-ip", "e", "10.0.0.105")},
		`UPDATE expected_dpus SET loopback_ip = '10.0.0.105', loopback_ip_key = '`+key("10.0.0.105")+`' WHERE serial_number = 'S4'`)
	r.run("allocation while its reservation moves", []string{`UPDATE expected_dpus SET loopback_ip = '10.0.0.106', loopback_ip_key = '` + key("10.0.0.106") + `' WHERE serial_number = 'S4'`},
		allocate("lo-ip", "f", "10.0.0.106"))
	r.run("range added while a reservation is made", []string{`INSERT INTO pool_ranges (pool_id, first_key, last_key, first_value, last_value, auto_assign, created_at)
		SELECT id, '` + key("10.0.1.0") + `', '` + key("10.0.1.9") + `', '10.0.1.0', '10.0.1.9', FALSE, '` + at + `' FROM pools WHERE name = 'lo-ip'`},
		reserve("S5", "loopback_ip", "10.0.1.5"))
	r.run("reservation made while a range is added", []string{reserve("S6", "loopback_ip", "10.0.2.5")},
		`INSERT INTO pool_ranges (pool_id, first_key, last_key, first_value, last_value, auto_assign, created_at)
		SELECT id, '`+key("10.0.2.0")+`', '`+key("10.0.2.9")+`', '10.0.2.0', '10.0.2.9', FALSE, '`+at+`' FROM pools WHERE name = 'lo-ip'`)
	createV6 := []string{`INSERT INTO pools (name, type, created_at, updated_at) VALUES ('lo-ip-v6', 'ipv6', '` + at + `', '` + at + `')`,
		`INSERT INTO pool_ranges (pool_id, first_key, last_key, first_value, last_value, auto_assign, created_at)
		SELECT id, '` + key("fd00:1::") + `', '` + key("fd00:1::ff") + `', 'fd00:1::', 'fd00:1::ff', FALSE, '` + at + `' FROM pools WHERE name = 'lo-ip-v6'`}
	r.run("reservation pool created while a reservation in it is made", createV6, reserve("S7", "loopback_ip_v6", "fd00:1::7"))
	r.run("reservation pool renamed away", []string{`UPDATE pools SET name = 'spare-v6' WHERE name = 'lo-ip-v6'`}, reserve("S8", "loopback_ip_v6", "fd00:1::8"))
	r.run("reservation pool renamed back", []string{`UPDATE pools SET name = 'lo-ip-v6' WHERE name = 'spare-v6'`}, reserve("S9", "loopback_ip_v6", "fd00:1::9"))
	r.run("reservation made while the pool is renamed", []string{reserve("S10", "loopback_ip_v6", "fd00:1::a")}, `UPDATE pools SET name = 'spare-v6' WHERE name = 'lo-ip-v6'`)
	var n int64
	if err := db.Raw(`SELECT COALESCE(SUM(reserved_unheld), 0) FROM range_counts`).Scan(&n).Error; err != nil || n == 0 {
		t.Fatalf("the races left %d reservations counted (%v): the test exercised nothing", n, err)
	}
}

// Several writers race reservation edits against allocations, releases
// and reports of the same values, through the allocator and around it
// (single statements in SQL, as a repair would write), on both databases;
// afterwards the counts equal a recount and the stats the rows.
func TestReservedCountUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFnd(t, db, time.Hour)
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.63", true), rng("10.0.0.100", "10.0.0.115", false))
		f.mkPool(PoolLoopbackV6, "ipv6", 0, rng("fd00::1", "fd00::ff", true), rng("fd00:1::", "fd00:1::f", false))
		const machines = 4
		for m := 0; m < machines; m++ {
			f.emWith(fmt.Sprintf("02:00:00:00:01:%02x", m), "[]")
		}
		v4 := func(i int) string { return fmt.Sprintf("10.0.0.%d", 100+i) }
		v6 := func(i int) string { return fmt.Sprintf("fd00:1::%x", i) }
		at := f.clock.Now().Format(time.RFC3339)
		var wg sync.WaitGroup
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 28))
				for i := 0; i < 40; i++ {
					a, b := rng.IntN(16), rng.IntN(16)
					mac := fmt.Sprintf("02:00:00:00:01:%02x", rng.IntN(machines))
					serial := fmt.Sprintf("S%d", rng.IntN(8))
					var err error
					switch w % 3 {
					case 0: // ExpectedMachine edits and reports through the allocator
						switch rng.IntN(3) {
						case 0:
							_, err = f.a.ReplaceExpectedMachine(f.ctx, mac, emSpec(mac, emDPU4(serial, v4(a), v6(b))), nil)
						case 1:
							_, err = f.a.ReplaceExpectedMachine(f.ctx, mac, emSpec(mac), nil)
						default:
							_, err = f.a.Report(f.ctx, specOf(mac, serial))
						}
					case 1: // allocations, releases and quarantines through the allocator
						pool, val := PoolLoopbackV4, v4(a)
						if rng.IntN(2) == 0 {
							pool, val = PoolLoopbackV6, v6(a)
						}
						owner := Owner{Type: "vm", ID: fmt.Sprint("w", w, "-", a)}
						switch rng.IntN(3) {
						case 0:
							_, _, err = f.a.Allocate(f.ctx, pool, owner, val)
						case 1:
							err = f.a.Release(f.ctx, pool, val, owner)
						default:
							_, err = f.a.DeleteMachine(f.ctx, HostMachineID(mac), true)
						}
					default: // single statements around the allocator
						switch rng.IntN(4) {
						case 0:
							err = db.Exec(`INSERT INTO expected_dpus (expected_machine_id, position, serial_number, loopback_ip, loopback_ip_key, loopback_ip_v6, loopback_ip_v6_key)
								VALUES (?, 9, ?, ?, ?, ?, ?)`, "em-"+strings.ReplaceAll(mac, ":", ""), fmt.Sprint("R", w, "-", i), v4(a), *lcKey(v4(a)), v6(b), *lcKey(v6(b))).Error
						case 1:
							err = db.Exec(`DELETE FROM expected_dpus WHERE loopback_ip = ? OR loopback_ip_v6 = ?`, v4(a), v6(b)).Error
						case 2:
							err = db.Exec(`INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
								SELECT id, ?, ?, 'allocated', 'vm', ?, TRUE, ? FROM pools WHERE name = 'lo-ip'`, *lcKey(v4(a)), v4(a), fmt.Sprint("raw", w, "-", i), at).Error
						default:
							err = db.Exec(`DELETE FROM allocations WHERE value IN (?, ?)`, v4(a), v6(b)).Error
						}
					}
					var ke *fault.Error
					if err != nil && !errors.As(err, &ke) && !database.IsConstraintViolation(err) && !database.IsRetryable(err) {
						t.Errorf("writer %d step %d: %v", w, i, err)
						return
					}
				}
			}(w)
		}
		wg.Wait()
		requireCountsTruth(t, db, "after concurrent writers")
		requireReservedStats(t, f.a, db, "after concurrent writers")
		f.clock.Advance(2 * time.Hour)
		requireReservedStats(t, f.a, db, "after the hold ran out")
	})
}
