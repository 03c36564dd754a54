package web_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/models/dbtest"
)

// benchAllocations is how many allocations the console benchmarks load
// (IPLEDGER_BENCH_ALLOCATIONS, default one million).
func benchAllocations() int {
	if s := os.Getenv("IPLEDGER_BENCH_ALLOCATIONS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 1_000_000
}

// fillPool creates pool "big" (10.0.0.0/8, auto_assign) and inserts n
// consecutive allocations 10.0.0.0, 10.0.0.1, … owned by tenant/t<i>,
// with bulk SQL (the allocator would take hours to make a million one by
// one; the rows are exactly the ones it writes).
func fillPool(b *testing.B, site *consoleSite, n int) {
	b.Helper()
	ctx := context.Background()
	auto := true
	if _, err := site.a.CreatePool(ctx, allocator.PoolSpec{Name: "big", Type: "ipv4",
		Ranges: []allocator.RangeSpec{{First: "10.0.0.0", Last: "10.255.255.255", AutoAssign: &auto}}}); err != nil {
		b.Fatal(err)
	}
	var poolID int64
	if err := site.a.DB().Raw(`SELECT id FROM pools WHERE name = 'big'`).Scan(&poolID).Error; err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	now := time.Now().UTC()
	const batch = 500
	db := site.a.DB()
	tx := db.Begin()
	for i := 0; i < n; i += batch {
		var sb strings.Builder
		sb.WriteString(`INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at) VALUES `)
		var args []any
		for j := i; j < i+batch && j < n; j++ {
			if j > i {
				sb.WriteString(",")
			}
			sb.WriteString("(?, ?, ?, 'allocated', 'tenant', ?, ?, ?)")
			ip := uint32(10<<24) + uint32(j)
			val := fmt.Sprintf("%d.%d.%d.%d", ip>>24, ip>>16&255, ip>>8&255, ip&255)
			args = append(args, poolID, fmt.Sprintf("%032x", ip), val, fmt.Sprintf("t%d", j), j == n-1, now)
		}
		if err := tx.Exec(sb.String(), args...).Error; err != nil {
			tx.Rollback()
			b.Fatal(err)
		}
	}
	if err := tx.Commit().Error; err != nil {
		b.Fatal(err)
	}
	if models.DialectOf(db) == models.Postgres {
		db.Exec(`ANALYZE allocations`)
	}
	b.Logf("loaded %d allocations in %s", n, time.Since(start).Round(time.Millisecond))
}

// BenchmarkConsoleAllocations measures the console's allocations table of
// a pool holding a million allocations: the first page, a page deep in
// the keyset (cursor near the end), a selective owner filter, and the
// whole pool page (stats, usage chart, first page), as htmx and browsers
// request them, on SQLite and PostgreSQL.
//
//	go test ./web -run '^$' -bench BenchmarkConsoleAllocations -benchtime 50x
func BenchmarkConsoleAllocations(b *testing.B) {
	n := benchAllocations()
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			if d == models.Postgres {
				dbtest.RequirePostgres(b)
			}
			site := newConsoleSite(b, dbtest.Open(b, d))
			fillPool(b, site, n)
			br := site.login(allocator.RoleViewer)
			deep := fmt.Sprintf("%032x", uint32(10<<24)+uint32(n-150))
			for _, c := range []struct {
				name, path string
				fragment   bool
				want       string
			}{
				{"first-page-fragment", "/pools/big", true, "10.0.0.99<"},
				{"deep-page-fragment", "/pools/big?cursor=" + deep, true, "Next page"},
				{"owner-filter-fragment", fmt.Sprintf("/pools/big?owner_type=tenant&owner_id=t%d", n/2), true, "tenant/t"},
				{"whole-pool-page", "/pools/big", false, "In use, last 30 days"},
			} {
				b.Run(c.name, func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						req, _ := http.NewRequest(http.MethodGet, site.srv.URL+c.path, nil)
						if c.fragment {
							req.Header.Set("HX-Request", "true")
							req.Header.Set("HX-Target", "allocations")
						}
						res, err := br.c.Do(req)
						if err != nil {
							b.Fatal(err)
						}
						body := readBody(b, res)
						if res.StatusCode != http.StatusOK || !strings.Contains(body, c.want) {
							b.Fatalf("%s: %d, want %q\n%s", c.path, res.StatusCode, c.want, clip(body))
						}
					}
				})
			}
		})
	}
}
