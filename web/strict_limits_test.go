package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/handlers"
	"github.com/ipledger/ipledger/models"
)

// A body over the limit is 413 too_large with the API's error shape,
// whether its size is declared or only found while reading; nothing is
// written. A console form over the limit is 413 too.
func TestBodyOverLimitIsTooLarge(t *testing.T) {
	t.Parallel()
	env := newSecEnv(t, dbtest.Open(t, models.SQLite))
	propSite(t, env)
	big := `{"owner_type":"machine","owner_id":"` + strings.Repeat("x", handlers.MaxBodyBytes) + `"}`
	before := tableCounts(t, env.db)
	for _, declared := range []bool{true, false} {
		req := httptest.NewRequest("POST", "/api/v1/pools/lo-ip/allocations", strings.NewReader(big))
		req.Header.Set("Authorization", "Bearer "+env.tok.admin)
		req.Header.Set("Content-Type", "application/json")
		if !declared {
			req.ContentLength = -1 // chunked: the size is only known by reading
		}
		rec := httptest.NewRecorder()
		env.h.ServeHTTP(rec, req)
		var eb struct{ Error fault.Error }
		if rec.Code != http.StatusRequestEntityTooLarge || json.Unmarshal(rec.Body.Bytes(), &eb) != nil || eb.Error.Code != fault.CodeTooLarge {
			t.Fatalf("declared=%v: %d %.200s", declared, rec.Code, rec.Body)
		}
	}
	// Under the limit a large body is not refused for its size.
	rec := env.do(secReq{method: "POST", path: "/api/v1/pools/lo-ip/allocations", token: env.tok.admin,
		body: `{"owner_type":"machine","owner_id":"` + strings.Repeat("y", 100) + `"` + strings.Repeat(" ", handlers.MaxBodyBytes-200) + `}`})
	if rec.Code != http.StatusCreated {
		t.Fatalf("a body under the limit: %d %.300s", rec.Code, rec.Body)
	}
	if after := tableCounts(t, env.db); after == before {
		t.Fatal("the allocation under the limit was not written")
	}
	// The console.
	cookies, csrf := env.login(env.tok.operator)
	req := httptest.NewRequest("POST", "/expected-machines/import", strings.NewReader(strings.Repeat("a", handlers.MaxBodyBytes+512<<10)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-CSRF-Token", csrf)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	rec = httptest.NewRecorder()
	env.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "larger than") {
		t.Fatalf("console form over the limit: %d %.300s", rec.Code, rec.Body)
	}
}

// Path and query text that is not UTF-8 is 422 invalid naming where (it
// was a 500 on PostgreSQL), and so is an API query parameter given twice
// (which one a reader takes is ambiguous); a client's X-Request-Id that is not a short
// token is replaced, so that it cannot break the audit event of a write.
func TestBadTextInPathQueryAndHeaders(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			env := newSecEnv(t, dbtest.Open(t, d))
			propSite(t, env)
			for _, c := range []struct{ path, field string }{
				{"/api/v1/pools/lo-ip/allocations?owner_id=%FF", "owner_id"},
				{"/api/v1/pools/%FFpool", "path"},
				{"/api/v1/expected-machines?q=%C3", "q"},
				{"/api/v1/pools/lo-ip/allocations?owner_id=a&owner_id=b", "owner_id"},
			} {
				rec := env.do(secReq{method: "GET", path: c.path, token: env.tok.viewer})
				var eb struct{ Error fault.Error }
				if rec.Code != http.StatusUnprocessableEntity || json.Unmarshal(rec.Body.Bytes(), &eb) != nil || eb.Error.Field != c.field {
					t.Fatalf("%s: %d %s", c.path, rec.Code, rec.Body)
				}
			}
			for _, rid := range []string{"\xff\xfe", strings.Repeat("r", 5000), "ok-id-1"} {
				rec := env.do(secReq{method: "POST", path: "/api/v1/pools/lo-ip/allocations", token: env.tok.operator,
					body: `{"owner_type":"machine","owner_id":"rid-` + itoa(int64(len(rid))) + `"}`, header: map[string]string{"X-Request-Id": rid}})
				if rec.Code != http.StatusCreated {
					t.Fatalf("X-Request-Id %.20q: %d %s", rid, rec.Code, rec.Body)
				}
				got := rec.Header().Get("X-Request-Id")
				if (rid == "ok-id-1") != (got == rid) || got == "" {
					t.Fatalf("X-Request-Id %.20q answered as %.20q", rid, got)
				}
			}
		})
	}
}

// A path parameter is percent-decoded exactly once: the owner "a%41"
// (sent as a%2541) is not the owner "aA", whose addresses the CNI config
// of the first used to carry; and a %2F-escaped value still decodes.
func TestPathParametersDecodedOnce(t *testing.T) {
	t.Parallel()
	env := newSecEnv(t, dbtest.Open(t, models.SQLite))
	propSite(t, env)
	for _, id := range []string{"a%41", "aA"} {
		if rec := env.do(secReq{method: "POST", path: "/api/v1/pools/lo-ip/allocations", token: env.tok.operator,
			body: `{"owner_type":"endpoint","owner_id":"` + id + `"}`}); rec.Code != http.StatusCreated {
			t.Fatalf("allocate for %s: %d %s", id, rec.Code, rec.Body)
		}
	}
	a := env.do(secReq{method: "GET", path: "/api/v1/owners/endpoint/a%2541/cni-ipam", token: env.tok.viewer}).Body.String()
	b := env.do(secReq{method: "GET", path: "/api/v1/owners/endpoint/aA/cni-ipam", token: env.tok.viewer}).Body.String()
	if !strings.Contains(a, "10.180.62.1/32") || !strings.Contains(b, "10.180.62.2/32") {
		t.Fatalf("a%%41: %s; aA: %s", a, b)
	}
	// With a %2F in the path echo routes on the raw path: still one decode.
	if rec := env.do(secReq{method: "GET", path: "/api/v1/addresses/10.180.62.1%2F32", token: env.tok.viewer}); rec.Code != http.StatusOK ||
		!strings.Contains(rec.Body.String(), `"owner_id":"a%41"`) {
		t.Fatalf("look-up with %%2F: %d %s", rec.Code, rec.Body)
	}
}
