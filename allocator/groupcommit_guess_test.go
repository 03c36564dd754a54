package allocator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// checkRangeCounts fails unless range_counts matches the allocations and
// the reservations no allocation holds in each range of pool (the
// statement-level triggers of migrations 11 and 28 keep it on PostgreSQL,
// row triggers on SQLite).
func (f *fnd) checkRangeCounts(pool string) {
	f.t.Helper()
	if err := f.rangeCountsWrong(pool); err != nil {
		f.t.Fatal(err)
	}
}

// rangeCountsWrong is checkRangeCounts's finding, nil when the counts are
// exact.
func (f *fnd) rangeCountsWrong(pool string) error {
	type row struct {
		RangeID                  int64
		Allocated, Counted       int64
		Quarantined, QCounted    int64
		ReservedUnheld, RCounted int64
	}
	var rows []row
	err := f.db.Raw(`SELECT r.id AS range_id, c.allocated, c.quarantined, c.reserved_unheld,
	  (SELECT COUNT(*) FROM allocations a WHERE a.pool_id = r.pool_id AND a.value_key BETWEEN r.first_key AND r.last_key AND a.state = 'allocated') AS counted,
	  (SELECT COUNT(*) FROM allocations a WHERE a.pool_id = r.pool_id AND a.value_key BETWEEN r.first_key AND r.last_key AND a.state = 'quarantined') AS q_counted,
	  `+reservedUnheldTruth+` AS r_counted
	  FROM pool_ranges r JOIN pools p ON p.id = r.pool_id JOIN range_counts c ON c.range_id = r.id WHERE p.name = ?`, pool).Scan(&rows).Error
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.Allocated != r.Counted || r.Quarantined != r.QCounted || r.ReservedUnheld != r.RCounted {
			return fmt.Errorf("range %d: range_counts says %d allocated / %d quarantined / %d reserved and not held, the rows %d / %d / %d",
				r.RangeID, r.Allocated, r.Quarantined, r.ReservedUnheld, r.Counted, r.QCounted, r.RCounted)
		}
	}
	return nil
}

// The one-round-trip batch (groupcommit_guess.go) gives exactly what the general
// path gives, whatever happened to the pool since the leader's last batch:
// a leader that keeps its guess from batch to batch runs 400 random steps
// on a loopback pool, interleaved with everything that can invalidate the
// guess — releases (a lower value frees up), quarantines, another
// allocator (process) allocating from the same pool, values declared for
// ExpectedDpus just where the guess would go, declarations removed, an
// auto_assign range added below the free run, a range flipped off and on —
// and with batches holding owners that already hold a value or appear
// twice. After every batch the answers must equal the brute-force oracle
// (lowest free values in arrival order), and run-end flags and range
// counts must be exact. On PostgreSQL, both guesses that hold and guesses
// that fail must have happened.
func TestGroupCommitGuessMatchesOneByOne(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		pool := PoolLoopbackV4
		f.mkPool(pool, "ipv4", 0,
			rng("10.0.0.0", "10.0.0.31", true),
			rng("10.0.0.64", "10.0.0.71", false),
			rng("10.0.1.0", "10.0.2.255", true))
		other := New(f.db, Options{Now: f.clock.Now})
		seed := uint64(20261129)
		r := rand.New(rand.NewPCG(seed, 7))
		t.Logf("seed %d", seed)
		lc := &leaderConn{}
		defer lc.drop()
		holders := map[string]string{} // owner → value
		var owners []string
		nextOwner := 0
		declared := map[string]string{} // serial → value
		addedC := false
		hits, misses := f.a.guessHits.Load(), f.a.guessMisses.Load()
		batches := 0

		randomHolder := func() (string, string, bool) {
			if len(owners) == 0 {
				return "", "", false
			}
			o := owners[r.IntN(len(owners))]
			v, ok := holders[o]
			return o, v, ok
		}
		for step := 0; step < 400; step++ {
			switch op := r.IntN(40); {
			case op < 31: // a batch on the leader's guess
				var names []string
				for n := 1 + r.IntN(6); len(names) < n; {
					switch k := r.IntN(10); {
					case k == 0 && len(names) > 0:
						names = append(names, names[r.IntN(len(names))]) // twice in one batch
					case k == 1 && r.IntN(3) == 0:
						if o, _, ok := randomHolder(); ok {
							names = append(names, o) // already holds a value
						}
					default:
						names = append(names, fmt.Sprint("o", nextOwner))
						nextOwner++
					}
				}
				want := f.oracleFirstFree(pool, len(names))
				reqs := f.groupOf(names...)
				f.a.runGroupCommitOn(lc, pool, reqs)
				batches++
				got := map[string]string{}
				k := 0
				for i, rq := range reqs {
					<-rq.done
					o := rq.owner.ID
					switch {
					case holders[o] != "":
						if rq.err != nil || rq.created || rq.out.Value != holders[o] {
							t.Fatalf("step %d request %d (%s, holds %s): %s created=%t %v", step, i, o, holders[o], rq.out.Value, rq.created, rq.err)
						}
					case got[o] != "":
						if rq.err != nil || rq.created || rq.out.Value != got[o] {
							t.Fatalf("step %d request %d (%s again): %s created=%t %v, want %s", step, i, o, rq.out.Value, rq.created, rq.err, got[o])
						}
					case k >= len(want):
						testkit.WantCode(t, rq.err, fault.CodePoolExhausted, "")
					default:
						if rq.err != nil || !rq.created || rq.out.Value != want[k] {
							t.Fatalf("step %d request %d (%s): %s created=%t %v, want %s (free: %v)", step, i, o, rq.out.Value, rq.created, rq.err, want[k], want[:min(len(want), 8)])
						}
						got[o] = want[k]
						k++
					}
				}
				for o, v := range got {
					holders[o] = v
					owners = append(owners, o)
				}
				f.checkRunEnds(pool)
			case op < 34: // release a held value
				if o, v, ok := randomHolder(); ok {
					f.release(pool, v, o)
					delete(holders, o)
				}
			case op == 34: // quarantine a held value
				if o, v, ok := randomHolder(); ok {
					f.quarantine(pool, v)
					delete(holders, o)
				}
			case op == 35: // another process allocates
				o := fmt.Sprint("other", step)
				want := f.oracleFirstFree(pool, 1)
				al, created, err := other.Allocate(f.ctx, pool, own(o), "")
				if len(want) == 0 {
					testkit.WantCode(t, err, fault.CodePoolExhausted, "")
					break
				}
				if err != nil || !created || al.Value != want[0] {
					t.Fatalf("step %d: the other allocator got %s created=%t %v, want %s", step, al.Value, created, err, want[0])
				}
				holders[o] = al.Value
				owners = append(owners, o)
			case op == 36: // declare a value where the guess would go
				if want := f.oracleFirstFree(pool, 3); len(want) > 1 {
					v := want[r.IntN(min(len(want), 3))]
					serial := fmt.Sprint("DECL", step)
					f.declare(serial, v, "")
					declared[serial] = v
				}
			case op == 37: // drop a declaration
				for serial := range declared {
					if err := f.db.Where("serial_number = ?", serial).Delete(&models.ExpectedDPU{}).Error; err != nil {
						t.Fatal(err)
					}
					delete(declared, serial)
					break
				}
			case op == 38: // an auto_assign range below the free run
				if !addedC {
					if _, err := f.a.AddRange(f.ctx, pool, rng("10.0.0.32", "10.0.0.47", true)); err != nil {
						t.Fatalf("add range: %v", err)
					}
					addedC = true
				}
			case op == 39: // flip the first range off, or back on when allowed
				p, err := f.a.GetPool(f.ctx, pool)
				if err != nil {
					t.Fatal(err)
				}
				rg := p.Ranges[0]
				on := !rg.AutoAssign
				if _, err := f.a.UpdateRange(f.ctx, pool, rg.ID, RangeUpdate{AutoAssign: &on}); err != nil && on {
					testkit.WantCode(t, err, fault.CodeConflict, "") // values lie in it
				} else if err != nil {
					t.Fatalf("flip off: %v", err)
				}
			}
		}
		f.checkRunEnds(pool)
		f.checkRangeCounts(pool)
		t.Logf("%d batches; guesses held %d, failed %d", batches, f.a.guessHits.Load()-hits, f.a.guessMisses.Load()-misses)
		if models.DialectOf(f.db) == models.Postgres {
			if f.a.guessHits.Load()-hits < 20 || f.a.guessMisses.Load()-misses < 5 {
				t.Fatalf("guesses held %d times and failed %d times in %d batches: the test does not exercise the guess",
					f.a.guessHits.Load()-hits, f.a.guessMisses.Load()-misses, batches)
			}
		}
	})
}

// Two allocators (two processes) whose leaders both guess, hammering one
// pool from 16 goroutines: every value goes to one owner only, the values
// handed out are exactly the lowest ones, and run ends and counts stay
// exact — the guard sees the other leader's commits.
func TestGroupCommitGuessTwoLeadersOnePool(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("vni", "integer", 0, rng("1000", "1399", true))
		as := []*Allocator{f.a, New(f.db, Options{Now: f.clock.Now})}
		var mu sync.Mutex
		seen := map[string]string{}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := as[g%2]
				for i := 0; i < 20; i++ {
					o := fmt.Sprintf("g%d-%d", g, i)
					al, _, err := a.Allocate(context.Background(), "vni", own(o), "")
					if err != nil {
						errs <- fmt.Errorf("%s: %w", o, err)
						return
					}
					mu.Lock()
					if prev, dup := seen[al.Value]; dup {
						mu.Unlock()
						errs <- fmt.Errorf("value %s given to %s and %s", al.Value, prev, o)
						return
					}
					seen[al.Value] = o
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for v := 1000; v < 1320; v++ {
			if seen[fmt.Sprint(v)] == "" {
				t.Fatalf("value %d was skipped (320 allocations should hold 1000..1319)", v)
			}
		}
		f.checkRunEnds("vni")
		f.checkRangeCounts("vni")
	})
}

// Each change that invalidates the leader's guess is caught by the guard
// (the guess fails and nothing is written from it) and the batch then
// gets what the oracle says: a lower value released or unquarantined,
// another process's allocation of the guessed value, an ExpectedDpu
// declaring it, a held value right after a free guessed one, a new
// auto_assign range below it, its range flipped to explicit, the range
// filled by another process — each by the guard, not by a constraint
// rolling the transaction back — and an owner of the group commit that
// already holds a value (rolled back on the owner key). (Another process's allocations that only
// move the lowest free value up within the window are not a miss:
// TestGroupCommitGuessWindow.)
func TestGroupCommitGuessGuardCatches(t *testing.T) {
	t.Parallel()
	for _, tc := range guardCases() {
		for _, grouped := range []bool{false, true} {
			name := tc.name
			if grouped {
				name += " (statement of groups)"
			}
			t.Run(name, func(t *testing.T) {
				fndEach(t, func(t *testing.T, f *fnd) {
					f.a.sharedSQLAlone = grouped
					if err := f.runGuardCase(tc); err != nil {
						t.Fatal(err)
					}
				})
			})
		}
	}
}

// guardCase is a change made between two guessed group commits of
// PoolLoopbackV4 that the guard must catch, and the owners of the
// commit after it.
type guardCase struct {
	name      string
	interfere func(f *fnd, other *Allocator)
	owners    []string
	// early interferes right after a first group commit of one owner
	// (w0, the range's first value), which leaves the guess at the
	// range's second value; the explicit range then ends just below the
	// guessed range, its last value held.
	early bool
}

func guardCases() []guardCase {
	return []guardCase{
		{"lower value released", func(f *fnd, _ *Allocator) { f.release(PoolLoopbackV4, "10.0.0.65", "w1") }, nil, false},
		{"range's first value released", func(f *fnd, _ *Allocator) { f.release(PoolLoopbackV4, "10.0.0.64", "w0") }, nil, false},
		{"lower value unquarantined", func(f *fnd, _ *Allocator) {
			f.quarantine(PoolLoopbackV4, "10.0.0.66")
			if err := f.a.Unquarantine(f.ctx, PoolLoopbackV4, "10.0.0.66"); err != nil {
				f.t.Fatal(err)
			}
		}, nil, false},
		{"another process allocated beyond the window", func(f *fnd, other *Allocator) {
			// The pool's lowest free value moves past the window: the
			// range is full, the next one is an explicit range.
			for i := 0; i < 27; i++ {
				if _, _, err := other.Allocate(f.ctx, PoolLoopbackV4, own(fmt.Sprintf("elsewhere%d", i)), ""); err != nil {
					f.t.Fatal(err)
				}
			}
			if _, err := f.a.AddRange(f.ctx, PoolLoopbackV4, rng("10.0.1.0", "10.0.1.15", true)); err != nil {
				f.t.Fatal(err)
			}
		}, nil, false},
		{"guessed value declared", func(f *fnd, _ *Allocator) { f.declare("DECL-NEXT", "10.0.0.69", "") }, nil, false},
		{"held value right after a free guessed value", func(f *fnd, other *Allocator) {
			// Another process takes the guessed value and the next, then
			// frees the guessed one: the lowest free value is where the
			// guess says, but the one after it is held.
			for _, o := range []string{"e0", "e1"} {
				if _, _, err := other.Allocate(f.ctx, PoolLoopbackV4, own(o), ""); err != nil {
					f.t.Fatal(err)
				}
			}
			f.release(PoolLoopbackV4, "10.0.0.69", "e0")
		}, nil, false},
		{"auto range added below", func(f *fnd, _ *Allocator) {
			if _, err := f.a.AddRange(f.ctx, PoolLoopbackV4, rng("10.0.0.32", "10.0.0.39", true)); err != nil {
				f.t.Fatal(err)
			}
		}, nil, false},
		{"range below flipped to auto_assign", func(f *fnd, _ *Allocator) {
			if _, err := f.a.UpdateRange(f.ctx, PoolLoopbackV4, mustRangeID(f, 0), RangeUpdate{AutoAssign: bptr(true)}); err != nil {
				f.t.Fatal(err)
			}
		}, nil, false},
		{"guessed range flipped to explicit", func(f *fnd, _ *Allocator) {
			if _, err := f.a.AddRange(f.ctx, PoolLoopbackV4, rng("10.0.1.0", "10.0.1.15", true)); err != nil {
				f.t.Fatal(err)
			}
			if _, err := f.a.UpdateRange(f.ctx, PoolLoopbackV4, mustRangeID(f, 1), RangeUpdate{AutoAssign: bptr(false)}); err != nil {
				f.t.Fatal(err)
			}
		}, nil, false},
		{"owner already holds", func(*fnd, *Allocator) {}, []string{"x1", "w2", "x2"}, false},
		{"range's first value released just below the guess", func(f *fnd, _ *Allocator) {
			// The lowest free value is the value before the guess, the
			// first of the window: the value before it (in the explicit
			// range) would keep its run end.
			f.release(PoolLoopbackV4, "10.0.0.64", "w0")
		}, nil, true},
	}
}

// runGuardCase runs tc on f: two group commits on the leader's guess, tc's
// change, a third commit; it returns what went wrong — an answer unlike
// the oracle's, the guard not catching the change (on PostgreSQL: the
// guess must fail its guard, or for an owner already holding a value roll
// back on the owner key), wrong run ends or range counts.
func (f *fnd) runGuardCase(tc guardCase) error {
	if tc.early {
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.48", "10.0.0.63", false), rng("10.0.0.64", "10.0.0.95", true))
		f.alloc(PoolLoopbackV4, "manual", "10.0.0.63")
	} else {
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.0", "10.0.0.15", false), rng("10.0.0.64", "10.0.0.95", true))
	}
	other := New(f.db, Options{Now: f.clock.Now})
	lc := &leaderConn{}
	defer lc.drop()
	run := func(owners ...string) ([]*allocReq, error) {
		want := f.oracleFirstFree(PoolLoopbackV4, len(owners))
		reqs := f.groupOf(owners...)
		f.a.runGroupCommitOn(lc, PoolLoopbackV4, reqs)
		k := 0
		var err error
		for _, rq := range reqs {
			<-rq.done
			switch {
			case err != nil:
			case rq.err != nil:
				err = fmt.Errorf("%s: %w", rq.owner.ID, rq.err)
			case rq.created && (k >= len(want) || rq.out.Value != want[k]):
				err = fmt.Errorf("%s got %s, want the oracle's %v", rq.owner.ID, rq.out.Value, want[min(k, len(want)):])
			case rq.created:
				k++
			}
		}
		if err == nil {
			err = f.runEndsWrong(PoolLoopbackV4)
		}
		return reqs, err
	}
	pg := models.DialectOf(f.db) == models.Postgres
	if tc.early {
		if _, err := run("w0"); err != nil {
			return err
		}
	} else {
		if _, err := run("w0", "w1", "w2"); err != nil {
			return err
		}
		hits := f.a.guessHits.Load()
		if _, err := run("w3", "w4"); err != nil {
			return err
		}
		if pg && f.a.guessHits.Load() != hits+1 {
			return fmt.Errorf("the second group commit did not commit on the guess")
		}
	}
	tc.interfere(f, other)
	misses, rollbacks := f.a.guessMisses.Load(), f.a.guessRollbacks.Load()
	owners := tc.owners
	if owners == nil {
		owners = []string{"x1", "x2", "x3"}
	}
	reqs, err := run(owners...)
	if err != nil {
		return err
	}
	wantRollbacks := rollbacks
	if tc.owners != nil {
		wantRollbacks++ // an owner holds a value: the owner key, not the guard
	}
	if pg && (f.a.guessMisses.Load() != misses+1 || f.a.guessRollbacks.Load() != wantRollbacks) {
		return fmt.Errorf("the guard did not catch it (misses %d → %d, rollbacks %d → %d, want %d)",
			misses, f.a.guessMisses.Load(), rollbacks, f.a.guessRollbacks.Load(), wantRollbacks)
	}
	for _, rq := range reqs {
		if rq.owner.ID == "w2" && (rq.created || rq.out.Value != "10.0.0.66") {
			return fmt.Errorf("w2 holds 10.0.0.66, got %s created=%t", rq.out.Value, rq.created)
		}
	}
	return f.rangeCountsWrong(PoolLoopbackV4)
}

// Every clause of the guard is needed: with any one left out of the
// guessed INSERT (both statements), some change of guardCases goes
// uncaught or an answer, a run end or a range count goes wrong.
func TestGroupCommitGuardClausesAreNeeded(t *testing.T) {
	t.Parallel()
	for _, c := range guardClauses {
		for _, grouped := range []bool{false, true} {
			name := c.name
			if grouped {
				name += " (statement of groups)"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				for _, tc := range guardCases() {
					f := newFnd(t, dbtest.Open(t, models.Postgres), 0)
					f.a.sharedSQLAlone = grouped
					f.a.testGuardDrop = c.name
					if err := f.runGuardCase(tc); err != nil {
						t.Logf("without %q, %q fails: %v", c.name, tc.name, err)
						return
					}
				}
				t.Fatalf("with the clause %q left out of the guard, every case still passes", c.name)
			})
		}
	}
}

func mustRangeID(f *fnd, i int) string {
	f.t.Helper()
	p, err := f.a.GetPool(f.ctx, PoolLoopbackV4)
	if err != nil {
		f.t.Fatal(err)
	}
	return p.Ranges[i].ID
}

// Other processes allocating from the pool between a leader's batches move
// its lowest free value up; the guarded INSERT finds it anywhere in the
// guess window (up to guessWindow values above the guess) and commits in
// one round trip, with exactly the values the oracle names and exact
// run-end flags. One value further is a miss, and the batch still gets the
// oracle's values the general way.
func TestGroupCommitGuessWindow(t *testing.T) {
	t.Parallel()
	for _, moved := range []int{1, 7, guessWindow, guessWindow + 1} {
		t.Run(fmt.Sprint(moved), func(t *testing.T) {
			fndEach(t, func(t *testing.T, f *fnd) {
				f.mkPool("vni", "integer", 0, rng("1000", "1999", true))
				other := New(f.db, Options{Now: f.clock.Now})
				lc := &leaderConn{}
				defer lc.drop()
				run := func(owners ...string) { t.Helper(); f.runLeaderGroup(lc, "vni", owners...) }
				run("w0", "w1", "w2")
				run("w3", "w4")
				for i := 0; i < moved; i++ {
					if _, _, err := other.Allocate(f.ctx, "vni", own(fmt.Sprintf("o%d", i)), ""); err != nil {
						t.Fatal(err)
					}
				}
				hits, misses := f.a.guessHits.Load(), f.a.guessMisses.Load()
				run("x1", "x2", "x3")
				if models.DialectOf(f.db) != models.Postgres {
					return
				}
				if moved <= guessWindow && (f.a.guessHits.Load() != hits+1 || f.a.guessMisses.Load() != misses) {
					t.Fatalf("moved %d: want a hit (hits %d → %d, misses %d → %d)", moved, hits, f.a.guessHits.Load(), misses, f.a.guessMisses.Load())
				}
				if moved > guessWindow && f.a.guessMisses.Load() != misses+1 {
					t.Fatalf("moved %d: want a miss (misses %d → %d)", moved, misses, f.a.guessMisses.Load())
				}
				var n int64
				if err := f.db.Raw(`SELECT count(*) FROM audit_events WHERE action = 'allocation.create' AND object_id IN ('vni/' || ?, 'vni/' || ?)
				  AND after_json LIKE '%"value":"' || split_part(object_id, '/', 2) || '"%' AND after_json LIKE '%"owner_id":"x%'`,
					fmt.Sprint(1005+moved), fmt.Sprint(1007+moved)).Scan(&n).Error; err != nil {
					t.Fatal(err)
				}
				if n != 2 {
					t.Fatalf("audit events of x1 and x3 do not name their values (%d of 2)", n)
				}
			})
		})
	}
}

// A guessed batch that fills a free run up to a held value stores the last
// value's run-end flag as false, and one that would run into the held
// value is a miss (and the batch gets the oracle's values the general way).
func TestGroupCommitGuessFillsGapUpToHeld(t *testing.T) {
	t.Parallel()
	for _, n := range []int{3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			fndEach(t, func(t *testing.T, f *fnd) {
				f.mkPool("vni", "integer", 0, rng("1000", "1999", true))
				lc := &leaderConn{}
				defer lc.drop()
				run := func(owners ...string) { t.Helper(); f.runLeaderGroup(lc, "vni", owners...) }
				var owners []string
				for i := 0; i < 20; i++ {
					owners = append(owners, fmt.Sprintf("w%d", i))
				}
				run(owners...) // 1000..1019
				for i := 3; i <= 8; i++ {
					f.release("vni", fmt.Sprint(1000+i), fmt.Sprintf("w%d", i)) // free 1003..1008; 1009 held
				}
				run("x0", "x1") // the guess (1020) misses; the general way: 1003, 1004
				run("x2")       // the general way after a miss: 1005
				hits, misses := f.a.guessHits.Load(), f.a.guessMisses.Load()
				var ys []string
				for i := 0; i < n; i++ {
					ys = append(ys, fmt.Sprintf("y%d", i))
				}
				run(ys...) // n=3: 1006..1008 on the guess, up to the held 1009; n=4 would run into it
				if models.DialectOf(f.db) != models.Postgres {
					return
				}
				if n == 3 && (f.a.guessHits.Load() != hits+1 || f.a.guessMisses.Load() != misses) {
					t.Fatalf("n=3: want a hit (hits %d → %d, misses %d → %d)", hits, f.a.guessHits.Load(), misses, f.a.guessMisses.Load())
				}
				if n == 4 && f.a.guessMisses.Load() != misses+1 {
					t.Fatalf("n=4: want a miss (misses %d → %d)", misses, f.a.guessMisses.Load())
				}
			})
		})
	}
}

// A batch that does not fit in what is left of the guessed range is a miss
// and gets the oracle's values the general way: the rest of the range,
// then the next auto_assign range.
func TestGroupCommitGuessRangeEnd(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("vni", "integer", 0, rng("1000", "1004", true), rng("1100", "1199", true))
		lc := &leaderConn{}
		defer lc.drop()
		run := func(owners ...string) { t.Helper(); f.runLeaderGroup(lc, "vni", owners...) }
		run("w0", "w1", "w2") // 1000..1002
		run("w3")             // 1003 on the guess
		misses := f.a.guessMisses.Load()
		run("x0", "x1", "x2") // 1004, 1100, 1101
		if models.DialectOf(f.db) == models.Postgres && f.a.guessMisses.Load() != misses+1 {
			t.Fatalf("want a miss (misses %d → %d)", misses, f.a.guessMisses.Load())
		}
	})
}

// Guessed batches give the oracle's values on every pool type, with the
// window's values formatted as the type formats them (IPv6 addresses,
// delegated prefixes, whose step is a whole prefix), and another process
// allocating between the batches.
func TestGroupCommitGuessPoolTypes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		typ  string
		plen int
		r    RangeSpec
	}{
		{"ipv6", 0, rng("fd00::fff0", "fd00::1:ff", true)},
		{"ipv6prefix", 64, rng("fd00:0:0:fff0::/64", "fd00:0:1:ff::/64", true)},
		{"integer", 0, rng("4294967290", "4294967400", true)},
	}
	for _, tc := range cases {
		t.Run(tc.typ, func(t *testing.T) {
			fndEach(t, func(t *testing.T, f *fnd) {
				f.mkPool("p", tc.typ, tc.plen, tc.r)
				other := New(f.db, Options{Now: f.clock.Now})
				lc := &leaderConn{}
				defer lc.drop()
				hits := f.a.guessHits.Load()
				for b := 0; b < 12; b++ {
					want := f.oracleFirstFree("p", 4)
					var owners []string
					for i := 0; i <= b%4; i++ {
						owners = append(owners, fmt.Sprintf("b%d-%d", b, i))
					}
					reqs := f.groupOf(owners...)
					f.a.runGroupCommitOn(lc, "p", reqs)
					for k, rq := range reqs {
						<-rq.done
						if rq.err != nil || !rq.created || rq.out.Value != want[k] {
							t.Fatalf("batch %d: %s got %q created=%t err=%v, want %s", b, rq.owner.ID, rq.out.Value, rq.created, rq.err, want[k])
						}
					}
					if b%3 == 2 {
						if _, _, err := other.Allocate(f.ctx, "p", own(fmt.Sprintf("o%d", b)), ""); err != nil {
							t.Fatal(err)
						}
					}
				}
				f.checkRunEnds("p")
				f.checkRangeCounts("p")
				if models.DialectOf(f.db) == models.Postgres && f.a.guessHits.Load() < hits+9 {
					t.Fatalf("only %d of 12 batches committed on the guess", f.a.guessHits.Load()-hits)
				}
			})
		})
	}
}

// runLeaderGroup runs one batch of fresh owners on the leader connection lc
// and checks that each got the value the oracle names, in order, and that
// the pool's run-end flags and range counts are exact afterwards.
func (f *fnd) runLeaderGroup(lc *leaderConn, pool string, owners ...string) {
	f.t.Helper()
	want := f.oracleFirstFree(pool, len(owners))
	reqs := f.groupOf(owners...)
	f.a.runGroupCommitOn(lc, pool, reqs)
	for k, rq := range reqs {
		<-rq.done
		if rq.err != nil || !rq.created || rq.out.Value != want[k] {
			f.t.Fatalf("%s got %q created=%t err=%v, want %s", rq.owner.ID, rq.out.Value, rq.created, rq.err, want[k])
		}
	}
	f.checkRunEnds(pool)
	f.checkRangeCounts(pool)
}

// A leader whose guess failed because other processes had moved the lowest
// free value beyond its window widens the window (up to maxGuessWindow):
// the same move then hits; after calmHits hits near the window's start it
// narrows again.
func TestGroupCommitGuessWindowAdapts(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		if models.DialectOf(f.db) != models.Postgres {
			t.Skip("the guessed batch is PostgreSQL's")
		}
		f.mkPool("vni", "integer", 0, rng("1000", "99999", true))
		other := New(f.db, Options{Now: f.clock.Now})
		lc := &leaderConn{}
		defer lc.drop()
		n := 0
		fresh := func(k int) []string {
			var o []string
			for i := 0; i < k; i++ {
				n++
				o = append(o, fmt.Sprintf("w%d", n))
			}
			return o
		}
		moveBy := func(k int) {
			for i := 0; i < k; i++ {
				n++
				if _, _, err := other.Allocate(f.ctx, "vni", own(fmt.Sprintf("o%d", n)), ""); err != nil {
					t.Fatal(err)
				}
			}
		}
		guess := func() *groupGuess { return &lc.guess }
		f.runLeaderGroup(lc, "vni", fresh(3)...)
		f.runLeaderGroup(lc, "vni", fresh(2)...) // on the guess
		moveBy(guessWindow + 40)
		misses := f.a.guessMisses.Load()
		f.runLeaderGroup(lc, "vni", fresh(2)...) // a miss, then the general way
		if f.a.guessMisses.Load() != misses+1 {
			t.Fatal("moving past the window did not miss")
		}
		if w := guess().width(); w != 4*guessWindow {
			t.Fatalf("window %d after a move of %d, want %d", w, guessWindow+40, 4*guessWindow)
		}
		// After the cooldown, the same move hits.
		for guess().cooldown > 0 || !guess().ok {
			f.runLeaderGroup(lc, "vni", fresh(1)...)
		}
		moveBy(guessWindow + 40)
		hits := f.a.guessHits.Load()
		f.runLeaderGroup(lc, "vni", fresh(2)...)
		if f.a.guessHits.Load() != hits+1 {
			t.Fatalf("a move of %d with window %d did not hit", guessWindow+40, guess().width())
		}
		for i := 0; i < calmHits; i++ {
			f.runLeaderGroup(lc, "vni", fresh(1)...)
		}
		if w := guess().width(); w != 2*guessWindow {
			t.Fatalf("window %d after %d calm hits, want %d", w, calmHits, 2*guessWindow)
		}
		// A move no window would hold leaves the width as it is.
		moveBy(maxGuessWindow + 10)
		misses = f.a.guessMisses.Load()
		f.runLeaderGroup(lc, "vni", fresh(2)...)
		if f.a.guessMisses.Load() != misses+1 {
			t.Fatal("moving past the widest window did not miss")
		}
		if w := guess().width(); w != 2*guessWindow {
			t.Fatalf("window %d after a move of %d, want it unchanged (%d)", w, maxGuessWindow+10, 2*guessWindow)
		}
	})
}
