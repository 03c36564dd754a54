// Package bench holds ipledger's end-to-end benchmarks: the REST API
// served in-process (the whole echo stack: authentication, role check,
// JSON, allocator transaction) against a fresh database, driven by N
// concurrent clients. The multi-process figures of docs/benchmarks.md come
// from scripts/bench-throughput.sh and bench/loadgen; these benchmarks are
// the `go test -bench` form of the same measurement for quick comparisons
// between commits:
//
//	go test ./bench -run '^$' -bench . -benchtime 2000x
//
// Each reports allocs/s and p50/p99 latency in ms next to ns/op.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/web"
)

const benchToken = "bench-admin-token-0123456789abcdef"

func newServer(b *testing.B, d models.Dialect, pools int) http.Handler {
	b.Helper()
	db := dbtest.Open(b, d)
	if s, err := db.DB(); err == nil {
		s.SetMaxOpenConns(32)
	}
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
	a := allocator.New(db, allocator.Options{Logger: quiet})
	au := auth.New(a.DB(), auth.Options{})
	ctx := context.Background()
	if _, err := au.EnsureAdminToken(ctx, benchToken); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < pools; i++ {
		spec := allocator.PoolSpec{Name: fmt.Sprint("p", i), Type: "ipv4",
			Ranges: []allocator.RangeSpec{{First: fmt.Sprintf("10.%d.0.0", i), Last: fmt.Sprintf("10.%d.255.255", i)}}}
		if _, err := a.CreatePool(ctx, spec); err != nil {
			b.Fatal(err)
		}
	}
	return web.New(web.Config{Allocator: a, Logger: quiet}).Handler()
}

// runClients performs b.N automatic allocations with `clients` concurrent
// clients, each request for a fresh owner in pool i mod pools.
func runClients(b *testing.B, h http.Handler, clients, pools int) {
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				body := fmt.Sprintf(`{"owner_type":"bench","owner_id":"%s-%d"}`, b.Name(), i)
				req := httptest.NewRequest("POST", fmt.Sprintf("/api/v1/pools/p%d/allocations", i%int64(pools)), strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+benchToken)
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				t0 := time.Now()
				h.ServeHTTP(rec, req)
				lat[c] = append(lat[c], time.Since(t0))
				if rec.Code != http.StatusCreated {
					b.Errorf("allocation %d: %d %s", i, rec.Code, rec.Body)
					return
				}
			}
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) float64 { return float64(all[int(float64(len(all)-1)*p)].Microseconds()) / 1000 }
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "allocs/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// BenchmarkAllocateAPI: automatic allocations through the REST API from
// one pool and from 100 pools, with 1, 8 and 32 clients, on PostgreSQL and
// SQLite.
func BenchmarkAllocateAPI(b *testing.B) {
	for _, d := range dbtest.Dialects {
		for _, pools := range []int{1, 100} {
			for _, clients := range []int{1, 8, 32} {
				b.Run(fmt.Sprintf("%s/pools=%d/clients=%d", d, pools, clients), func(b *testing.B) {
					h := newServer(b, d, pools)
					runClients(b, h, clients, pools)
				})
			}
		}
	}
}

// BenchmarkAllocateBatchAPI: one bulk request of 10,000 automatic
// allocations (POST …/allocations:batch) through the REST API, each op a
// request for 10,000 fresh owners, on PostgreSQL and SQLite; reports the
// request's time in ms (docs/benchmarks.md "Bulk allocation").
//
//	go test ./bench -run '^$' -bench AllocateBatchAPI -benchtime 5x
func BenchmarkAllocateBatchAPI(b *testing.B) {
	const n = allocator.MaxBulkAllocations
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			db := dbtest.Open(b, d)
			quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
			a := allocator.New(db, allocator.Options{Logger: quiet})
			au := auth.New(a.DB(), auth.Options{})
			ctx := context.Background()
			if _, err := au.EnsureAdminToken(ctx, benchToken); err != nil {
				b.Fatal(err)
			}
			if _, err := a.CreatePool(ctx, allocator.PoolSpec{Name: "big", Type: "ipv4",
				Ranges: []allocator.RangeSpec{{First: "10.0.0.0", Last: "10.255.255.255"}}}); err != nil {
				b.Fatal(err)
			}
			h := web.New(web.Config{Allocator: a, Logger: quiet}).Handler()
			bodies := make([]string, b.N)
			for i := range bodies {
				var sb strings.Builder
				sb.WriteString(`{"allocations":[`)
				for k := 0; k < n; k++ {
					if k > 0 {
						sb.WriteByte(',')
					}
					fmt.Fprintf(&sb, `{"owner_type":"bench","owner_id":"r%d-o%d"}`, i, k)
				}
				sb.WriteString(`]}`)
				bodies[i] = sb.String()
			}
			var total time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := httptest.NewRequest("POST", "/api/v1/pools/big/allocations:batch", strings.NewReader(bodies[i]))
				req.Header.Set("Authorization", "Bearer "+benchToken)
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				t0 := time.Now()
				h.ServeHTTP(rec, req)
				total += time.Since(t0)
				if rec.Code != http.StatusOK {
					b.Fatalf("bulk request %d: %d %.300s", i, rec.Code, rec.Body)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/request")
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "allocs/s")
		})
	}
}
