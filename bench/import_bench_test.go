package bench

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/bench/emfile"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/poolfile"
	"github.com/ipledger/ipledger/web"
)

// BenchmarkReplaceAllAPI: PUT /api/v1/expected-machines of a NICo file of
// 60,000 records (one reserved DPU each, under the 10 MiB body limit)
// through the REST API. The ops alternate between two files whose
// reservations are shifted by one record, so every op after the first
// rewrites every record; ms/request is the PUT's time (docs/benchmarks.md
// "Imports"). scripts/bench-import.sh measures the same against a real
// server process, with its peak RSS.
//
//	go test ./bench -run '^$' -bench ReplaceAllAPI -benchtime 3x
func BenchmarkReplaceAllAPI(b *testing.B) {
	const n = 60000
	files := [][]byte{emfile.Generate(n, 0), emfile.Generate(n, 1)}
	b.Logf("file size %d bytes", len(files[0]))
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
			if _, err := poolfile.Load(ctx, a, []byte(emfile.Pools)); err != nil {
				b.Fatal(err)
			}
			h := web.New(web.Config{Allocator: a, Logger: quiet, RequestTimeout: 10 * time.Minute}).Handler()
			var total time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := httptest.NewRequest("PUT", "/api/v1/expected-machines", bytesReader(files[i%2]))
				req.Header.Set("Authorization", "Bearer "+benchToken)
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				c0, t0 := cpuTime(), time.Now()
				h.ServeHTTP(rec, req)
				took := time.Since(t0)
				total += took
				b.Logf("%s op %d: %v (this process's CPU %v)", d, i, took.Round(time.Millisecond), (cpuTime() - c0).Round(time.Millisecond))
				if rec.Code != http.StatusOK {
					b.Fatalf("replace-all %d: %d %.300s", i, rec.Code, rec.Body)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/request")
		})
	}
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func bytesReader(b []byte) io.Reader { return &sliceReader{b: b} }

type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}
