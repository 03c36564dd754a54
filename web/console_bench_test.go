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
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/console"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
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
// consecutive allocations 10.0.0.0, 10.0.0.1, … owned by tenant/t<i>, and
// one allocation.create audit event for each, spread over the last 30 days
// (so the usage chart has a real history to read). One set-based INSERT
// per table: the rows are exactly the ones the allocator writes, without
// the hours a million single allocations would take.
func fillPool(b *testing.B, site *consoleSite, n int) {
	b.Helper()
	ctx := context.Background()
	auto := true
	if _, err := site.a.CreatePool(ctx, allocator.PoolSpec{Name: "big", Type: "ipv4",
		Ranges: []allocator.RangeSpec{{First: "10.0.0.0", Last: "10.255.255.255", AutoAssign: &auto}}}); err != nil {
		b.Fatal(err)
	}
	db := site.a.DB()
	var poolID int64
	if err := db.Raw(`SELECT id FROM pools WHERE name = 'big'`).Scan(&poolID).Error; err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	const base = 10 << 24
	var stmts []string
	if models.DialectOf(db) == models.Postgres {
		// Chunks of 20,000 rows, each its own transaction, so the count
		// triggers' row versions are cleaned up as the load goes.
		v := `((g>>24)::text || '.' || ((g>>16)&255)::text || '.' || ((g>>8)&255)::text || '.' || (g&255)::text)`
		for lo := base; lo < base+n; lo += 20000 {
			hi := min(lo+20000, base+n) - 1
			series := fmt.Sprintf(`generate_series(%d::bigint, %d::bigint) AS g`, lo, hi)
			stmts = append(stmts,
				fmt.Sprintf(`INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
				SELECT %d, lpad(to_hex(g), 32, '0'), %s, 'allocated', 'tenant', 't' || (g - %d)::text, g = %d, now() FROM %s`,
					poolID, v, base, base+n-1, series),
				fmt.Sprintf(`INSERT INTO audit_events (at, actor, action, object_type, object_id, request_id)
				SELECT now() - ((g %% 30) * interval '1 day'), 'bench', 'allocation.create', 'allocation', 'big/' || %s, '' FROM %s`, v, series))
		}
		stmts = append(stmts, `ANALYZE allocations`, `ANALYZE audit_events`)
	} else {
		cte := fmt.Sprintf(`WITH RECURSIVE s(g) AS (SELECT %d UNION ALL SELECT g + 1 FROM s WHERE g < %d) `, base, base+n-1)
		v := `printf('%d.%d.%d.%d', g >> 24, (g >> 16) & 255, (g >> 8) & 255, g & 255)`
		stmts = []string{
			cte + fmt.Sprintf(`INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
				SELECT %d, printf('%%032x', g), %s, 'allocated', 'tenant', 't' || (g - %d), g = %d,
				strftime('%%Y-%%m-%%d %%H:%%M:%%S', 'now') || '.000000000+00:00' FROM s`, poolID, v, base, base+n-1),
			cte + fmt.Sprintf(`INSERT INTO audit_events (at, actor, action, object_type, object_id, request_id)
				SELECT strftime('%%Y-%%m-%%d %%H:%%M:%%S', 'now', '-' || (g %% 30) || ' days') || '.000000000+00:00',
				'bench', 'allocation.create', 'allocation', 'big/' || %s, '' FROM s`, v),
			`ANALYZE`,
		}
	}
	for _, q := range stmts {
		if err := db.Exec(q).Error; err != nil {
			b.Fatalf("%v\n%s", err, q)
		}
	}
	p, err := site.a.GetPool(ctx, "big")
	if err != nil || p.Stats.Auto.Allocated != fmt.Sprint(n) {
		b.Fatalf("loaded pool: %+v %v", p, err)
	}
	b.Logf("loaded %d allocations and audit events in %s", n, time.Since(start).Round(time.Millisecond))
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
			br := site.login(auth.RoleViewer)
			deep := fmt.Sprintf("%032x", uint32(10<<24)+uint32(n-150))
			for _, c := range []struct {
				name, path string
				fragment   bool
				want       string
			}{
				{"first-page-fragment", "/pools/big", true, "10.0.0.99<"},
				{"deep-page-fragment", "/pools/big?cursor=" + deep, true, "Next page"},
				{"owner-filter-fragment", fmt.Sprintf("/pools/big?owner_type=tenant&owner_id=t%d", n/2), true, "tenant/t"},
				{"whole-pool-page", "/pools/big", false, fmt.Sprintf("%d in use now", n)},
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

// BenchmarkConsolePoolParts times the reads behind the whole pool
// page on a pool of a million allocations with 30 days of audit events:
// the pool with its stats, and the 30-day usage history.
func BenchmarkConsolePoolParts(b *testing.B) {
	n := benchAllocations()
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			if d == models.Postgres {
				dbtest.RequirePostgres(b)
			}
			site := newConsoleSite(b, dbtest.Open(b, d))
			fillPool(b, site, n)
			ctx := context.Background()
			b.Run("GetPool", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := site.a.GetPool(ctx, "big"); err != nil {
						b.Fatal(err)
					}
				}
			})
			reads := console.New(site.a, site.a.DB())
			b.Run("PoolUsage-30d", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					u, err := reads.PoolUsage(ctx, "big", 30)
					if err != nil || u[0].Allocated >= u[29].Allocated {
						b.Fatalf("usage %v %v", u, err)
					}
				}
			})
		})
	}
}
