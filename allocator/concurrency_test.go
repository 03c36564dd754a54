package allocator

import (
	"fmt"
	"sort"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// concurrencyURL gives a fresh database URL of dialect d that several
// handles (standing in for server processes) can open.
func concurrencyURL(t *testing.T, d models.Dialect) string {
	if d == models.Postgres {
		return dbtest.NewPostgresURL(t)
	}
	return dbtest.NewSQLiteURL(t)
}

// allocators opens n independent handles (own connection pools) on one
// database: the in-process picture of n server processes.
func allocators(t *testing.T, u string, n int) []*Allocator {
	out := make([]*Allocator, n)
	for i := range out {
		var db *gorm.DB
		if i == 0 {
			db = dbtest.OpenURL(t, u)
		} else {
			var err error
			db, _, err = database.Open(u)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := db.DB()
			t.Cleanup(func() { s.Close() })
		}
		out[i] = New(db, Options{})
	}
	return out
}

type outcome struct {
	value   string
	created bool
	err     error
}

func runAllocations(t *testing.T, as []*Allocator, n int, pool string, owner func(i int) Owner, requested func(i int) string) []outcome {
	t.Helper()
	out := make([]outcome, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			a := as[i%len(as)]
			al, created, err := a.Allocate(audit.WithActor(t.Context(), "test", ""), pool, owner(i), requested(i))
			out[i] = outcome{al.Value, created, err}
		}(i)
	}
	close(start)
	wg.Wait()
	return out
}

// 40 concurrent allocations from a 30-value range: exactly 30 distinct
// values (the 30 lowest) and 10 pool_exhausted, nothing else — with one
// handle and with three handles on one database.
func TestConcurrentAllocationsExhaustExactly(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		for _, handles := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%d-handles", d, handles), func(t *testing.T) {
				as := allocators(t, concurrencyURL(t, d), handles)
				ctx := audit.WithActor(t.Context(), "test", "")
				if _, err := as[0].CreatePool(ctx, PoolSpec{Name: "lo-ip", Type: "ipv4",
					Ranges: []RangeSpec{rng("10.0.0.1", "10.0.0.30", true), rng("10.0.0.31", "10.0.0.40", false)}}); err != nil {
					t.Fatal(err)
				}
				res := runAllocations(t, as, 40, "lo-ip", func(i int) Owner { return own(fmt.Sprint("dpu-", i)) }, func(int) string { return "" })
				seen := map[string]bool{}
				exhausted := 0
				for i, r := range res {
					if r.err != nil {
						if e, ok := fault.AsError(r.err); ok && e.Code == fault.CodePoolExhausted {
							exhausted++
							continue
						}
						t.Fatalf("goroutine %d: %v", i, r.err)
					}
					if !r.created || seen[r.value] {
						t.Fatalf("goroutine %d: value %s created=%t (duplicate: %t)", i, r.value, r.created, seen[r.value])
					}
					seen[r.value] = true
				}
				if len(seen) != 30 || exhausted != 10 {
					t.Fatalf("%d values, %d exhausted; want 30 and 10", len(seen), exhausted)
				}
				for i := 1; i <= 30; i++ {
					if !seen[fmt.Sprint("10.0.0.", i)] {
						t.Fatalf("10.0.0.%d was not handed out", i)
					}
				}
				checkStoredAllocations(t, as[0].DB(), "lo-ip", 30)
			})
		}
	}
}

// 20 concurrent requests of one owner all get the same value; exactly one
// of them created it.
func TestConcurrentAllocationsOneOwner(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			as := allocators(t, concurrencyURL(t, d), 2)
			ctx := audit.WithActor(t.Context(), "test", "")
			if _, err := as[0].CreatePool(ctx, PoolSpec{Name: "vni", Type: "integer", Ranges: []RangeSpec{rng("1000", "1999", true)}}); err != nil {
				t.Fatal(err)
			}
			res := runAllocations(t, as, 20, "vni", func(int) Owner { return own("the-one") }, func(int) string { return "" })
			created := 0
			for i, r := range res {
				if r.err != nil || r.value != "1000" {
					t.Fatalf("goroutine %d: %+v", i, r)
				}
				if r.created {
					created++
				}
			}
			if created != 1 {
				t.Fatalf("%d goroutines created the allocation, want 1", created)
			}
			checkStoredAllocations(t, as[0].DB(), "vni", 1)
		})
	}
}

// 20 owners racing for one explicit value: one wins, the others are told
// who holds it (409 not_available), never a raw database error.
func TestConcurrentRequestsForOneValue(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			as := allocators(t, concurrencyURL(t, d), 2)
			ctx := audit.WithActor(t.Context(), "test", "")
			if _, err := as[0].CreatePool(ctx, PoolSpec{Name: "lo-ip", Type: "ipv4", Ranges: []RangeSpec{rng("10.0.0.200", "10.0.0.255", false)}}); err != nil {
				t.Fatal(err)
			}
			res := runAllocations(t, as, 20, "lo-ip", func(i int) Owner { return own(fmt.Sprint("dpu-", i)) }, func(int) string { return "10.0.0.222" })
			wins := 0
			for i, r := range res {
				if r.err == nil {
					wins++
					continue
				}
				if e, ok := fault.AsError(r.err); !ok || e.Code != fault.CodeNotAvailable {
					t.Fatalf("goroutine %d: %v", i, r.err)
				}
			}
			if wins != 1 {
				t.Fatalf("%d winners, want 1", wins)
			}
			checkStoredAllocations(t, as[0].DB(), "lo-ip", 1)
		})
	}
}

// Writers that lock several pools (pool-file loads touching a and b)
// race writers of single pools and pool creation under one name: lock
// ordering by name means no deadlock surfaces, every allocation is
// distinct, and exactly one creation of a name wins with 409 for the rest.
func TestConcurrentMixedWritersNoDeadlock(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			as := allocators(t, concurrencyURL(t, d), 3)
			ctx := audit.WithActor(t.Context(), "test", "")
			for _, name := range []string{"a", "b"} {
				if _, err := as[0].CreatePool(ctx, PoolSpec{Name: name, Type: "integer", Ranges: []RangeSpec{rng("1", "100", true)}}); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			var errs []error
			createWins := 0
			report := func(err error) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			for i := 0; i < 30; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					a := as[i%len(as)]
					switch i % 5 {
					case 0:
						// Loads lock b and a in name order (a, b) whatever the file's order.
						r := rng(fmt.Sprint(1000+i*10), fmt.Sprint(1004+i*10), true)
						if _, err := a.LoadPools(ctx, []PoolSpec{{Name: "b", Type: "integer", Ranges: []RangeSpec{r}}, {Name: "a", Type: "integer", Ranges: []RangeSpec{r}}}); err != nil {
							report(fmt.Errorf("load %d: %w", i, err))
						}
					case 1:
						_, err := a.CreatePool(ctx, PoolSpec{Name: "contested", Type: "integer"})
						if err == nil {
							mu.Lock()
							createWins++
							mu.Unlock()
						} else if e, ok := fault.AsError(err); !ok || e.Code != fault.CodeConflict || e.Field != "name" {
							report(fmt.Errorf("create %d: %w", i, err))
						}
					default:
						pool := []string{"a", "b"}[i%2]
						if _, _, err := a.Allocate(ctx, pool, own(fmt.Sprint("o", i)), ""); err != nil {
							report(fmt.Errorf("allocate %d in %s: %w", i, pool, err))
						}
					}
				}(i)
			}
			wg.Wait()
			for _, err := range errs {
				t.Error(err)
			}
			if createWins != 1 {
				t.Fatalf("%d creations of one pool name won, want 1", createWins)
			}
			var ranges int64
			as[0].DB().Model(&models.PoolRange{}).Count(&ranges)
			if ranges != 2+2*6 {
				t.Fatalf("%d ranges, want %d", ranges, 2+2*6)
			}
			checkStoredAllocations(t, as[0].DB(), "a", -1)
			checkStoredAllocations(t, as[0].DB(), "b", -1)
		})
	}
}

// checkStoredAllocations verifies the stored rows of pool: the expected
// count (when ≥ 0), distinct values, exact run_end flags.
func checkStoredAllocations(t *testing.T, db *gorm.DB, pool string, want int) {
	t.Helper()
	var p models.Pool
	if err := db.Where("name = ?", pool).Take(&p).Error; err != nil {
		t.Fatal(err)
	}
	var rows []models.Allocation
	if err := db.Where("pool_id = ?", p.ID).Order("value_key").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if want >= 0 && len(rows) != want {
		t.Fatalf("pool %s stores %d allocations, want %d", pool, len(rows), want)
	}
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.ValueKey
	}
	if !sort.StringsAreSorted(keys) {
		t.Fatal("not sorted")
	}
	f := &fnd{t: t, db: db}
	f.checkRunEnds(pool)
}

// Server replicas started at once with the same --pools file load it
// concurrently on a fresh database: every load succeeds (the losers of the
// race to create a pool find it stored and have nothing to do), and the
// pools and ranges exist once.
func TestConcurrentPoolFileLoads(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			as := allocators(t, concurrencyURL(t, d), 6)
			specs := []PoolSpec{{Name: "x", Type: "integer", Ranges: []RangeSpec{rng("1", "4", true)}}, {Name: "y", Type: "ipv4", Ranges: []RangeSpec{rng("10.0.0.0", "10.0.0.254", true)}}}
			var wg sync.WaitGroup
			errs := make([]error, len(as))
			for i := range as {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					_, errs[i] = as[i].LoadPools(audit.WithActor(t.Context(), "system:startup", ""), specs)
				}(i)
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("load %d: %v", i, err)
				}
			}
			var pools, ranges int64
			as[0].DB().Model(&models.Pool{}).Count(&pools)
			as[0].DB().Model(&models.PoolRange{}).Count(&ranges)
			if pools != 2 || ranges != 2 {
				t.Fatalf("%d pools and %d ranges, want 2 and 2", pools, ranges)
			}
		})
	}
}
