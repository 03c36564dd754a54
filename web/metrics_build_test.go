package web

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/buildinfo"
	"github.com/ipledger/ipledger/models/dbtest"
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
