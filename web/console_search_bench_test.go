package web_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// BenchmarkConsoleSearch measures the console's global search over HTTP
// with a session, on a site whose pool "big" holds a million allocations
// (IPLEDGER_BENCH_ALLOCATIONS) next to the small believable site (named
// hosts, DPUs, reservations, a force-deleted host): every kind of text the
// header's box takes, and the pool page's IP filter. It reports the
// median and the 99th percentile of each kind (p50-ms, p99-ms).
//
//	go test ./web -run '^$' -bench BenchmarkConsoleSearch -benchtime 200x
func BenchmarkConsoleSearch(b *testing.B) {
	n := benchAllocations()
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			if d == models.Postgres {
				dbtest.RequirePostgres(b)
			}
			site := newConsoleSite(b, dbtest.Open(b, d))
			seedBelievableSite(b, site)
			fillPool(b, site, n)
			br := site.login(auth.RoleViewer)
			mid := n / 2
			held := fmt.Sprintf("10.%d.%d.%d", mid>>16&255, mid>>8&255, mid&255)
			net24 := fmt.Sprintf("10.%d.%d.", mid>>16&255, mid>>8&255)
			net16 := fmt.Sprintf("10.%d.", mid>>16&255)
			for _, c := range []struct {
				name, path string
				status     int
				want       string
			}{
				{"ip-held-in-1M-pool", "/search?q=" + held, http.StatusSeeOther, "/pools/big?value=" + held},
				{"prefix-in-1M-pool", "/search?q=" + net16 + "0.0/16", http.StatusOK, "match(es)"},
				{"ip-of-a-dpu", "/search?q=fd00:180:62:1::c8", http.StatusSeeOther, "/machines/fm100ds"},
				{"mac-dashes", "/search?q=1A-1B-1C-1D-1E-20", http.StatusSeeOther, "/machines/fm100ht"},
				{"dpu-serial", "/search?q=MT2242X00002", http.StatusSeeOther, "/machines/fm100ds"},
				{"chassis-serial", "/search?q=SN-R8-U01", http.StatusSeeOther, "/machines/fm100ht"},
				{"em-name", "/search?q=rack8-u03", http.StatusSeeOther, "/expected-machines/"},
				{"machine-id", "/search?q=" + allocator.HostMachineID("1a:1b:1c:1d:1e:1f"), http.StatusSeeOther, "/machines/fm100ht"},
				{"partial-name", "/search?q=rack", http.StatusOK, "rack8-u01"},
				{"nothing", "/search?q=no-such-thing", http.StatusOK, "Nothing matches"},
				{"pool-ip-filter-prefix", "/pools/big?value=" + net24 + "0/24", http.StatusOK, net24 + "99<"},
			} {
				b.Run(c.name, func(b *testing.B) {
					lat := make([]time.Duration, 0, b.N)
					for i := 0; i < b.N; i++ {
						req, _ := http.NewRequest(http.MethodGet, site.srv.URL+c.path, nil)
						if strings.HasPrefix(c.path, "/pools/") {
							req.Header.Set("HX-Request", "true")
							req.Header.Set("HX-Target", "allocations")
						}
						start := time.Now()
						res, err := br.c.Do(req)
						if err != nil {
							b.Fatal(err)
						}
						body := readBody(b, res)
						lat = append(lat, time.Since(start))
						got := body
						if c.status == http.StatusSeeOther {
							got = res.Header.Get("Location")
						}
						if res.StatusCode != c.status || !strings.Contains(got, c.want) {
							b.Fatalf("%s: %d %q, want %d %q\n%s", c.path, res.StatusCode, res.Header.Get("Location"), c.status, c.want, clip(body))
						}
					}
					sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
					pct := func(p float64) float64 {
						return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
					}
					b.ReportMetric(pct(0.50), "p50-ms")
					b.ReportMetric(pct(0.99), "p99-ms")
				})
			}
		})
	}
}
