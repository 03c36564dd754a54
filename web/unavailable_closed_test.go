package web_test

import (
	"net/http"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/web"
)

// TestClosedDatabaseIs503WithRetryAfter: once the database handle is
// closed under the server (as at shutdown), the REST API answers 503
// unavailable and the console a 503 page, never a 500, and both carry a
// Retry-After header, on both databases.
func TestClosedDatabaseIs503WithRetryAfter(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		b := site.login(auth.RoleAdmin)
		closeDatabase(t, db)
		req, _ := http.NewRequest("GET", site.srv.URL+"/api/v1/pools", nil)
		req.Header.Set("Authorization", "Bearer "+site.tokens[auth.RoleAdmin])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, res)
		if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"unavailable"`) || res.Header.Get("Retry-After") != web.RetryAfterSeconds {
			t.Errorf("REST on a closed database: %d Retry-After %q %s, want 503 unavailable with Retry-After %s",
				res.StatusCode, res.Header.Get("Retry-After"), body, web.RetryAfterSeconds)
		}
		for _, p := range []string{"/pools", "/events"} {
			res = b.get(p)
			body = readBody(t, res)
			if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != web.RetryAfterSeconds {
				t.Errorf("console %s on a closed database: %d Retry-After %q\n%s", p, res.StatusCode, res.Header.Get("Retry-After"), clip(body))
			}
		}
	})
}

// TestMetricsWhileDatabaseIsDown: /metrics still answers 200 with the
// metrics that do not read the database (the process, the requests and
// their 503s) when the database is unreachable: a failed scrape would
// fire IpledgerDown for a running server and hide the 5xx rate that
// IpledgerErrors watches (docs/operations.md, "Monitoring").
func TestMetricsWhileDatabaseIsDown(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		closeDatabase(t, db)
		res, err := http.Get(site.srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, res)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, "ipledger_build_info") || !strings.Contains(body, "go_goroutines") {
			t.Errorf("/metrics on a closed database: %d\n%s", res.StatusCode, clip(body))
		}
	})
}

// closeDatabase closes the server's database handle under it, as at
// shutdown: every later query fails with database/sql's "database is
// closed".
func closeDatabase(t *testing.T, db *gorm.DB) {
	t.Helper()
	s, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
