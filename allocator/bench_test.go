package allocator

// Cost of one automatic allocation as a pool fills up (docs/pools.md: the
// gap search is O(log n) in the number of allocations, not O(pool size)).
//
//	go test ./allocator -run '^$' -bench BenchmarkAllocateAsPoolGrows -benchtime 2000x -benchmem
//
// Each case seeds a pool with 0, 10k or 100k existing allocations through a
// bulk INSERT that keeps run_end exact (in a contiguous block only the last
// row is a run end), then measures Allocate. "gaps" seeds the same number
// of rows with every 10th value missing (as if released), so each
// allocation reuses the lowest gap.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

var benchPoolSeq atomic.Int64

// seedAllocations inserts n allocations of pool p from first on, with
// multi-row INSERT statements of literal values (generated here, so
// nothing needs quoting beyond what is done); with gaps every 10th value
// (i%10 == 9) is left free. run_end is exact: true only where the next
// value is not held.
func seedAllocations(tb testing.TB, db *gorm.DB, p *models.Pool, first u128, n int, gaps bool) {
	tb.Helper()
	sp := spaceOf(p)
	now := time.Now().UTC().Format("2006-01-02 15:04:05")
	var sb strings.Builder
	rows := 0
	pg := models.DialectOf(db) == models.Postgres
	flush := func() {
		if rows == 0 {
			return
		}
		err := db.Transaction(func(tx *gorm.DB) error {
			if pg {
				// The rows are generated inside the range; skip the per-row
				// range trigger to keep seeding 100k rows quick.
				if err := tx.Exec(`SET LOCAL session_replication_role = replica`).Error; err != nil {
					return err
				}
			}
			return tx.Exec(sb.String()).Error
		})
		if err != nil {
			tb.Fatalf("seed: %v", err)
		}
		sb.Reset()
		rows = 0
	}
	v := first
	for i := 0; i < n; i++ {
		held := !gaps || i%10 != 9
		nextHeld := i+1 < n && (!gaps || (i+1)%10 != 9)
		if held {
			if rows == 0 {
				sb.WriteString("INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at) VALUES ")
			} else {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, "(%d,'%s','%s','allocated','seed','seed-%s',%s,'%s')", p.ID, v.key(), sp.format(v), v.key(),
				map[bool]string{true: "TRUE", false: "FALSE"}[!nextHeld], now)
			rows++
			if rows == 2000 {
				flush()
			}
		}
		v, _ = sp.next(v)
	}
	flush()
	if pg {
		db.Exec(`ANALYZE allocations`)
	} else {
		db.Exec(`ANALYZE`)
	}
}

type benchCase struct {
	pool  string
	p     models.Pool
	first u128
	done  int
}

func BenchmarkAllocateAsPoolGrows(b *testing.B) {
	pools := []struct {
		name, typ, first, last string
	}{
		{"ipv6-slash64", "ipv6", "fd00::", "fd00::ffff:ffff:ffff:ffff"},
		{"ipv4-slash8", "ipv4", "10.0.0.0", "10.255.255.255"},
	}
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			db := dbtest.Open(b, d)
			cases := map[string]*benchCase{}
			a := New(db, Options{})
			ctx := audit.WithActor(context.Background(), "bench", "")
			for _, pc := range pools {
				for _, existing := range []int{0, 10_000, 100_000} {
					for _, gaps := range []bool{false, true} {
						if gaps && existing == 0 {
							continue
						}
						name := fmt.Sprintf("%s/existing=%d/%s", pc.name, existing, map[bool]string{false: "contiguous", true: "gaps"}[gaps])
						b.Run(name, func(b *testing.B) {
							// The testing package calls this function several times
							// (b.N = 1, then the real count): seed once per case and
							// keep allocating in the same pool.
							c := cases[string(d)+"/"+name]
							if c == nil {
								c = &benchCase{pool: fmt.Sprintf("bench-%d", benchPoolSeq.Add(1))}
								if _, err := a.CreatePool(ctx, PoolSpec{Name: c.pool, Type: pc.typ, Ranges: []RangeSpec{rng(pc.first, pc.last, true)}}); err != nil {
									b.Fatal(err)
								}
								db.Where("name = ?", c.pool).Take(&c.p)
								c.first, _ = spaceOf(&c.p).parse(pc.first)
								seedAllocations(b, db, &c.p, c.first, existing, gaps)
								cases[string(d)+"/"+name] = c
							}
							b.ReportAllocs()
							b.ResetTimer()
							for i := 0; i < b.N; i++ {
								if _, _, err := a.Allocate(ctx, c.pool, Owner{Type: "bench", ID: fmt.Sprint("o", c.done+i)}, ""); err != nil {
									b.Fatal(err)
								}
							}
							b.StopTimer()
							c.done += b.N
							// The numbers are only worth something if the right values
							// were allocated: the lowest free ones, gaps first.
							want := existing + c.done
							if gaps {
								want -= existing / 10
							}
							var n int64
							db.Model(&models.Allocation{}).Where("pool_id = ?", c.p.ID).Count(&n)
							if int(n) != want {
								b.Fatalf("%d rows, want %d", n, want)
							}
							if gaps && c.done <= existing/10 {
								var past int64
								db.Raw(`SELECT COUNT(*) FROM allocations WHERE pool_id = ? AND value_key >= ?`,
									c.p.ID, u128{c.first.hi, c.first.lo + uint64(existing)}.key()).Scan(&past)
								if past != 0 {
									b.Fatalf("%d allocations went past the seeded block while gaps were left", past)
								}
							}
						})
					}
				}
			}
		})
	}
}

// BenchmarkAllocateInterleaved allocates once in each of four /8 pools per
// iteration — empty, 10k, 100k contiguous and 100k with every 10th value
// free — and reports each pool's cost as its own metric. Interleaving puts
// the four under the same machine load at the same moment, so a shared or
// busy machine cannot fake (or hide) growth.
//
//	go test ./allocator -run '^$' -bench BenchmarkAllocateInterleaved -benchtime 500x
func BenchmarkAllocateInterleaved(b *testing.B) {
	type pc struct {
		name     string
		existing int
		gaps     bool
	}
	pcs := []pc{{"0", 0, false}, {"10k", 10_000, false}, {"100k", 100_000, false}, {"100k-gaps", 100_000, true}}
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			db := dbtest.Open(b, d)
			a := New(db, Options{})
			ctx := audit.WithActor(context.Background(), "bench", "")
			names := make([]string, len(pcs))
			for i, c := range pcs {
				names[i] = fmt.Sprintf("il-%d", benchPoolSeq.Add(1))
				if _, err := a.CreatePool(ctx, PoolSpec{Name: names[i], Type: "ipv4", Ranges: []RangeSpec{rng("10.0.0.0", "10.255.255.255", true)}}); err != nil {
					b.Fatal(err)
				}
				var p models.Pool
				db.Where("name = ?", names[i]).Take(&p)
				seedAllocations(b, db, &p, u128{0, 10 << 24}, c.existing, c.gaps)
			}
			spent := make([]time.Duration, len(pcs))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := range pcs {
					st := time.Now()
					if _, _, err := a.Allocate(ctx, names[j], Owner{Type: "bench", ID: fmt.Sprint("o", i)}, ""); err != nil {
						b.Fatal(err)
					}
					spent[j] += time.Since(st)
				}
			}
			b.StopTimer()
			for j, c := range pcs {
				b.ReportMetric(float64(spent[j].Nanoseconds())/float64(b.N), "ns/alloc-"+c.name)
			}
		})
	}
}

// The gap search is a few index seeks whatever the number of allocations:
// on a pool seeded with 100k contiguous allocations, gapQuery seeks the
// unique (pool_id, value_key) index and the partial run-end index and never
// scans allocations, and on PostgreSQL reads a handful of buffers.
// (A plan check, not a timing: timings belong to the benchmarks above.)
func TestGapSearchIsOneIndexSeek(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFnd(t, db, 0)
		f.mkPool("big", "ipv4", 0, rng("10.0.0.0", "10.255.255.255", true))
		var p models.Pool
		db.Where("name = ?", "big").Take(&p)
		first := u128{0, 10 << 24}
		// 20,000 rows: a scan of allocations would read some 200 pages,
		// far above the few buffers the seeks need, so the plan's shape
		// shows at this size already (100,000 cost 5-20 s of seeding).
		n, want := 20_000, "10.0.78.32"
		if testing.Short() {
			n, want = 10_000, "10.0.39.16"
		}
		seedAllocations(t, db, &p, first, n, false)
		if al := f.alloc("big", "next", ""); al.Value != want {
			t.Fatalf("after %d seeded values got %s, want %s", n, al.Value, want)
		}
		args := map[string]any{"pool": p.ID, "from": first.key()}
		if models.DialectOf(db) == models.SQLite {
			var plan []struct{ Detail string }
			db.Raw(`EXPLAIN QUERY PLAN `+gapQuery, args).Scan(&plan)
			seeks := 0
			for _, l := range plan {
				if strings.Contains(l.Detail, "allocations") {
					if !strings.HasPrefix(l.Detail, "SEARCH") || !strings.Contains(l.Detail, "USING") {
						t.Fatalf("SQLite plan of the gap search scans allocations: %+v", plan)
					}
					seeks++
				}
			}
			if seeks != 4 {
				t.Fatalf("SQLite plan of the gap search: %d index seeks, want 4: %+v", seeks, plan)
			}
			return
		}
		var out string
		err := db.Transaction(func(tx *gorm.DB) error {
			// A fresh snapshot right after the seed: no dead entries yet.
			return tx.Raw(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+gapQuery, args).Row().Scan(&out)
		})
		if err != nil {
			t.Fatal(err)
		}
		type node struct {
			NodeType         string `json:"Node Type"`
			IndexName        string `json:"Index Name"`
			SharedHitBlocks  int    `json:"Shared Hit Blocks"`
			SharedReadBlocks int    `json:"Shared Read Blocks"`
			Plans            []node `json:"Plans"`
		}
		var plan []struct{ Plan node }
		if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan) != 1 {
			t.Fatalf("plan %s: %v", out, err)
		}
		indexes := map[string]int{}
		var walk func(n node)
		walk = func(n node) {
			if strings.Contains(n.NodeType, "Seq Scan") || strings.Contains(n.NodeType, "Bitmap") {
				t.Fatalf("PostgreSQL plan of the gap search has a %s:\n%s", n.NodeType, out)
			}
			if n.IndexName != "" {
				indexes[n.IndexName]++
			}
			for _, c := range n.Plans {
				walk(c)
			}
		}
		walk(plan[0].Plan)
		if buffers := plan[0].Plan.SharedHitBlocks + plan[0].Plan.SharedReadBlocks; buffers > 32 ||
			indexes["allocations_run_end"] != 2 || indexes["allocations_pool_value_key"] != 2 {
			t.Fatalf("PostgreSQL gap search: %d buffers, index seeks %v (want 2 in allocations_run_end, 2 in allocations_pool_value_key, a few buffers)\n%s",
				buffers, indexes, out)
		}
	})
}
