package web

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// Rules of docs/api.md that hold for every route: NUL characters,
// unknown list filters, list paging of pools, If-Match on ranges, and
// type errors that name the JSON path with its index.
func TestAPIContractDetails(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		const tok = "contract-test-admin-token"
		site := newAPISite(t, db, allocator.Options{}, tok)
		srv := site.h
		for _, n := range []string{"a", "b", "c"} {
			if code, b := ownersCall(t, srv, "POST", "/api/v1/pools", tok, `{"name":"`+n+`","type":"integer","ranges":[{"first":"1","last":"10"}]}`); code != 201 {
				t.Fatalf("create %s: %d %s", n, code, b)
			}
		}
		var events int64
		countEvents := func() int64 {
			var n int64
			db.Model(&models.AuditEvent{}).Count(&n)
			return n
		}
		events = countEvents()

		for _, c := range []struct {
			name, method, path, body string
			status                   int
			code, field              string
		}{
			{"NUL in a JSON string", "POST", "/api/v1/pools/a/allocations", `{"owner_type":"machine","owner_id":"a\u0000b"}`, 422, "invalid", "owner_id"},
			{"NUL in a nested JSON string", "POST", "/api/v1/pools", `{"name":"d","type":"integer","ranges":[{"first":"1","last":"1\u0000"}]}`, 422, "invalid", "ranges[0].last"},
			{"NUL in a query filter", "GET", "/api/v1/pools/a/allocations?owner_id=%00", "", 422, "invalid", "owner_id"},
			{"NUL in the path", "GET", "/api/v1/pools/%00", "", 422, "invalid", "path"},
			{"unknown list filter", "GET", "/api/v1/pools/a/allocations?foo=bar", "", 422, "invalid", "foo"},
			{"unknown pools filter", "GET", "/api/v1/pools?owner=x", "", 422, "invalid", "owner"},
			{"malformed owner_type filter", "GET", "/api/v1/pools/a/allocations?owner_type=BAD", "", 422, "invalid", "owner_type"},
			{"bad pools limit", "GET", "/api/v1/pools?limit=-1", "", 422, "invalid", "limit"},
			{"bad pools cursor", "GET", "/api/v1/pools?cursor=zzz", "", 422, "invalid", "cursor"},
			{"bad machines cursor", "GET", "/api/v1/machines?cursor=zzz", "", 422, "invalid", "cursor"},
			{"bad bindings cursor", "GET", "/api/v1/dpu-bindings?cursor=zzz", "", 422, "invalid", "cursor"},
			{"wrong type inside an array", "POST", "/api/v1/pools", `{"name":"d","type":"integer","ranges":[{"first":"1","last":"2"},{"first":3,"last":"4"}]}`, 422, "invalid", "ranges[1].first"},
			{"stale If-Match on a range", "PATCH", "/api/v1/pools/a/ranges/1", `{"auto_assign":false}`, 412, "stale_version", ""},
		} {
			req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			if c.code == "stale_version" {
				req.Header.Set("If-Match", `"7"`)
			}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			var body struct{ Error fault.Error }
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			if rec.Code != c.status || string(body.Error.Code) != c.code || body.Error.Field != c.field {
				t.Errorf("%s: %d %s; want %d %s field %q", c.name, rec.Code, rec.Body.String(), c.status, c.code, c.field)
			}
			if strings.Contains(body.Error.Message, "allocator.") || strings.Contains(body.Error.Message, "interface {}") {
				t.Errorf("%s: message leaks Go types: %s", c.name, body.Error.Message)
			}
		}
		if n := countEvents(); n != events {
			t.Fatalf("rejected requests wrote %d audit events", n-events)
		}

		// Pools list pages: limit and next_cursor walk a, b, c.
		var names []string
		cursor := ""
		for i := 0; i < 5; i++ {
			path := "/api/v1/pools?limit=2"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			code, b := ownersCall(t, srv, "GET", path, tok, "")
			if code != 200 {
				t.Fatalf("pools page: %d %s", code, b)
			}
			var page struct {
				Items      []allocator.Pool `json:"items"`
				NextCursor string           `json:"next_cursor"`
			}
			if err := json.Unmarshal(b, &page); err != nil {
				t.Fatal(err)
			}
			for _, p := range page.Items {
				names = append(names, p.Name)
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if strings.Join(names, ",") != "a,b,c" {
			t.Fatalf("paged pools %v", names)
		}

		// A range's ETag is its version; If-Match with it succeeds, and the
		// answer carries the range's counts.
		req := httptest.NewRequest("GET", "/api/v1/pools/a/ranges/1", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		etag := rec.Header().Get("ETag")
		if rec.Code != 200 || etag != `"1"` {
			t.Fatalf("range GET: %d ETag %q", rec.Code, etag)
		}
		req = httptest.NewRequest("PATCH", "/api/v1/pools/a/ranges/1", strings.NewReader(`{"auto_assign":false}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("If-Match", etag)
		rec = httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		var r allocator.Range
		_ = json.Unmarshal(rec.Body.Bytes(), &r)
		if rec.Code != 200 || r.AutoAssign || r.Version != 2 || r.Stats.Size != "10" || rec.Header().Get("ETag") != `"2"` {
			t.Fatalf("range PATCH with If-Match: %d %s", rec.Code, rec.Body.String())
		}
		// A PATCH that changes nothing keeps the version.
		if code, b := ownersCall(t, srv, "PATCH", "/api/v1/pools/a/ranges/1", tok, `{"auto_assign":false}`); code != 200 || !strings.Contains(string(b), `"version":2`) {
			t.Fatalf("no-op PATCH: %d %s", code, b)
		}
	})
}

// A JSON body sent with curl's default Content-Type
// (application/x-www-form-urlencoded, `curl -d '{…}'`) is still read as
// the JSON it is: no middleware consumes it as a form.
func TestJSONBodyWithFormContentType(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a := allocator.New(db, allocator.Options{})
		au := auth.New(a.DB(), auth.Options{})
		const tok = "form-type-test-admin-token"
		if _, err := au.EnsureAdminToken(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
		srv := New(Config{Allocator: a}).Handler()
		for _, c := range []struct{ path, body string }{
			{"/api/v1/pools", `{"name":"vlan","type":"integer","ranges":[{"first":"100","last":"110"}]}`},
			{"/api/v1/pools/vlan/allocations", `{"owner_type":"network","owner_id":"a"}`},
		} {
			req := httptest.NewRequest("POST", c.path, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != 201 {
				t.Fatalf("POST %s with a form Content-Type: %d %s", c.path, rec.Code, rec.Body.String())
			}
		}
	})
}
