package web

import (
	"context"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/buildinfo"
	"github.com/ipledger/ipledger/database/dbtest"
)

// /metrics names the running build: ipledger_build_info is 1 with the
// version, commit and Go version as labels.
func TestBuildInfoMetric(t *testing.T) {
	t.Parallel()
	db := dbtest.OpenURL(t, dbtest.NewSQLiteURL(t))
	m := NewMetrics(nil)
	h := New(Config{Allocator: allocator.New(db, m.AllocatorOptions(allocator.Options{})), Metrics: m}).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	in := buildinfo.Get()
	want := `ipledger_build_info{commit="` + in.Commit + `",goversion="` + in.GoVersion + `",version="` + in.Version + `"} 1` + "\n"
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) {
		t.Fatalf("/metrics (%d) lacks %q:\n%s", rec.Code, want, rec.Body.String())
	}
}

// Every ipledger_ metric the Prometheus rules shipped in
// deploy/prometheus read is one this server exports, with the labels
// its expressions select on.
func TestPrometheusRulesReadExportedMetrics(t *testing.T) {
	t.Parallel()
	rules, err := os.ReadFile("../deploy/prometheus/ipledger-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	db := dbtest.OpenURL(t, dbtest.NewSQLiteURL(t))
	m := NewMetrics(nil)
	a := allocator.New(db, m.AllocatorOptions(allocator.Options{}))
	const tok = "rules-metrics-admin-token"
	if _, err := auth.New(db, auth.Options{}).EnsureAdminToken(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	h := New(Config{Allocator: a, Metrics: m}).Handler()
	call := func(method, path, body string) string {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	// A pool and a webhook, so that their per-pool and per-webhook series
	// exist; a request, so that the latency histogram has one.
	call("POST", "/api/v1/pools", `{"name":"vlan","type":"integer","ranges":[{"first":"100","last":"110"}]}`)
	call("POST", "/api/v1/webhooks", `{"name":"m1","url":"http://127.0.0.1:9/","secret":"metrics-secret-0123456789","actions":["*"]}`)
	exported := map[string]bool{}
	for _, line := range strings.Split(call("GET", "/metrics", ""), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(name, " ")
			exported[name] = true
			if typ == "histogram" {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					exported[name+s] = true
				}
			}
		}
	}
	used := regexp.MustCompile(`\b(ipledger_[a-z0-9_]+|process_[a-z0-9_]+|go_[a-z0-9_]+)`).FindAllString(string(rules), -1)
	if len(used) < 8 {
		t.Fatalf("the rules read %d metrics: %v", len(used), used)
	}
	for _, name := range used {
		if !exported[name] {
			t.Errorf("the rules read %s, which /metrics does not export", name)
		}
	}
	for _, label := range []string{`kind="auto"`, `state="free"`, `state="size"`, `outcome="failed"`} {
		if !strings.Contains(call("GET", "/metrics", ""), label) {
			t.Errorf("the rules select %s, which no exported series carries", label)
		}
	}
}
