package web_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// BenchmarkConsoleFleet measures every console page over HTTP with a
// signed-in session on a site of 100,000 machines (IPLEDGER_BENCH_MACHINES;
// seedFleet says what it holds): the dashboard, the NOC wallboard and its
// htmx refresh first, then the lists, a page deep in the Machines list,
// one machine, DPU and ExpectedMachine, pools, bindings, the audit log,
// search, quarantine and webhooks. Each page is requested b.N times; the
// benchmark reports the median and the 95th percentile (p50-ms, p95-ms).
// On PostgreSQL; IPLEDGER_BENCH_DB=sqlite runs it on SQLite (the embedded
// default).
//
//	go test ./web -run '^$' -bench BenchmarkConsoleFleet -benchtime 20x -timeout 30m
func BenchmarkConsoleFleet(b *testing.B) {
	d := models.Postgres
	if os.Getenv("IPLEDGER_BENCH_DB") == "sqlite" {
		d = models.SQLite
	} else {
		dbtest.RequirePostgres(b)
	}
	n := benchMachines()
	site := newConsoleSite(b, dbtest.Open(b, d))
	fs := seedFleet(b, site, n)
	viewer := site.login(auth.RoleViewer)
	admin := site.login(auth.RoleAdmin)
	mid := fs.hosts / 2
	for fs.names[mid] == "" {
		mid++
	}
	midCursor := base64.RawURLEncoding.EncodeToString([]byte(strings.ToLower(fs.names[mid]))) + "." + fs.hostIDs[mid]
	for _, c := range []struct {
		name, path string
		htmx       bool
		admin      bool
		want       string
	}{
		{name: "dashboard", path: "/", want: "lo-ip"},
		{name: "noc", path: "/noc", want: "lo-ip"},
		{name: "noc-refresh-htmx", path: "/noc", htmx: true, want: "board"},
		{name: "machines-first-page", path: "/machines", want: "hosts on this page"},
		{name: "machines-middle-page", path: "/machines?cursor=" + midCursor, want: "Next"},
		{name: "machine-host", path: "/machines/" + fs.hostIDs[mid], want: fs.names[mid]},
		{name: "machine-dpu", path: "/machines/" + fs.dpuIDs[2*mid], want: fmt.Sprintf("MT%08d", 2*mid)},
		{name: "pools", path: "/pools", want: "lo-ip-v6"},
		{name: "pool-lo-ip", path: "/pools/lo-ip", want: "10.0.0.99"},
		{name: "expected-machines", path: "/expected-machines", want: "rack"},
		{name: "expected-machine", path: "/expected-machines/" + fs.emIDs[len(fs.emIDs)/2], want: "MT"},
		{name: "bindings", path: "/bindings", want: "MT"},
		{name: "bindings-conflict", path: "/bindings?status=conflict", want: "conflict"},
		{name: "bindings-pending", path: "/bindings?status=pending", want: "pending"},
		{name: "events", path: "/events", want: "machine"},
		{name: "search-name", path: "/search?q=" + fs.names[mid], want: ""},
		{name: "search-partial", path: "/search?q=rack0500", want: "rack0500"},
		{name: "quarantine", path: "/quarantine", want: "bench: returned hardware"},
		{name: "webhooks", path: "/webhooks", admin: true, want: "Webhooks"},
	} {
		b.Run(c.name, func(b *testing.B) {
			br := viewer
			if c.admin {
				br = admin
			}
			lat := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				req, _ := http.NewRequest(http.MethodGet, site.srv.URL+c.path, nil)
				if c.htmx {
					req.Header.Set("HX-Request", "true")
				}
				start := time.Now()
				res, err := br.c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				body := readBody(b, res)
				lat = append(lat, time.Since(start))
				ok := res.StatusCode == http.StatusOK && strings.Contains(body, c.want)
				if res.StatusCode == http.StatusSeeOther && strings.HasPrefix(c.path, "/search") {
					ok = true
				}
				if !ok {
					b.Fatalf("%s: %d %q, want 200 with %q\n%s", c.path, res.StatusCode, res.Header.Get("Location"), c.want, clip(body))
				}
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			pct := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.95), "p95-ms")
		})
	}
}
