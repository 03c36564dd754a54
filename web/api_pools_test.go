package web_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/web"
)

// poolAPI is one server over its own database, with a token per role.
type poolAPI struct {
	t                       *testing.T
	db                      *gorm.DB
	h                       http.Handler
	admin, operator, viewer string
}

func newPoolAPI(t *testing.T, db *gorm.DB) *poolAPI {
	t.Helper()
	metrics := web.NewMetrics(nil)
	a := allocator.New(db, metrics.AllocatorOptions(allocator.Options{}))
	au := auth.New(db, auth.Options{})
	srv := web.New(web.Config{Allocator: a, Auth: au, Metrics: metrics, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx := context.Background()
	p := &poolAPI{t: t, db: db, h: srv.Handler(), admin: "admin-token-0123456789"}
	if _, err := au.EnsureAdminToken(ctx, p.admin); err != nil {
		t.Fatal(err)
	}
	var err error
	if p.operator, err = au.CreateToken(ctx, "op", auth.RoleOperator, ""); err != nil {
		t.Fatal(err)
	}
	if p.viewer, err = au.CreateToken(ctx, "view", auth.RoleViewer, ""); err != nil {
		t.Fatal(err)
	}
	return p
}

type apiResp struct {
	status int
	header http.Header
	body   []byte
}

func (r apiResp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

func (p *poolAPI) do(method, path, token, ctype, body string) apiResp {
	p.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype == "" && body != "" {
		ctype = "application/json"
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, req)
	return apiResp{rec.Code, rec.Header(), rec.Body.Bytes()}
}

// want checks the status and returns the decoded object.
func (p *poolAPI) want(status int, method, path, token, body string) map[string]any {
	p.t.Helper()
	r := p.do(method, path, token, "", body)
	if r.status != status {
		p.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, status, r.body)
	}
	if status == http.StatusNoContent {
		return nil
	}
	return r.json(p.t)
}

// wantError checks the §5 error shape: exactly {"error": {code, message,
// field?}}, with the given code and field.
func wantAPIError(t *testing.T, r apiResp, status int, code, field string) string {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	var body map[string]map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil || len(body) != 1 || body["error"] == nil {
		t.Fatalf("error body %s is not {\"error\": {...}}", r.body)
	}
	e := body["error"]
	for k := range e {
		if k != "code" && k != "message" && k != "field" {
			t.Fatalf("unexpected key %q in error %s", k, r.body)
		}
	}
	if e["code"] != code {
		t.Fatalf("code %v, want %s: %s", e["code"], code, r.body)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Fatalf("empty message: %s", r.body)
	}
	got, _ := e["field"].(string)
	if got != field {
		t.Fatalf("field %q, want %q: %s", got, field, r.body)
	}
	msg, _ := e["message"].(string)
	return msg
}

// state is everything a refused request must leave untouched.
func (p *poolAPI) state() string {
	p.t.Helper()
	var out []string
	for _, table := range []string{"pools", "pool_ranges", "allocations", "audit_events", "settings"} {
		var rows []map[string]any
		if err := p.db.Table(table).Find(&rows).Error; err != nil {
			p.t.Fatal(err)
		}
		b, _ := json.Marshal(rows)
		out = append(out, table+": "+string(b))
	}
	return strings.Join(out, "\n")
}

func TestPoolsREST(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		p := newPoolAPI(t, db)
		// Create, read back at Location, list.
		r := p.do("POST", "/api/v1/pools", p.admin, "", `{"name":"lo-ip","type":"ipv4","ranges":[
			{"first":"10.0.0.1","last":"10.0.0.9","auto_assign":true},{"first":"10.0.0.10","last":"10.0.0.19","auto_assign":false}]}`)
		if r.status != 201 || r.header.Get("Location") != "/api/v1/pools/lo-ip" {
			t.Fatalf("create: %d %v %s", r.status, r.header, r.body)
		}
		pool := p.want(200, "GET", r.header.Get("Location"), p.viewer, "")
		stats := pool["stats"].(map[string]any)
		auto := stats["auto"].(map[string]any)
		if auto["size"] != "9" || auto["free"] != "9" || stats["explicit"].(map[string]any)["size"] != "10" {
			t.Fatalf("stats %v", stats)
		}
		rg := pool["ranges"].([]any)[0].(map[string]any)
		for _, k := range []string{"id", "first", "last", "auto_assign", "size"} {
			if _, ok := rg[k]; !ok {
				t.Fatalf("range lacks %q: %v", k, rg)
			}
		}
		if _, ok := rg["id"].(string); !ok || rg["size"] != "9" {
			t.Fatalf("range id and size must be strings: %v", rg)
		}
		wantAPIError(t, p.do("POST", "/api/v1/pools", p.admin, "", `{"name":"lo-ip","type":"ipv4"}`), 409, "conflict", "name")
		list := p.want(200, "GET", "/api/v1/pools", p.viewer, "")
		if items := list["items"].([]any); len(items) != 1 {
			t.Fatalf("list %v", list)
		}
		wantAPIError(t, p.do("GET", "/api/v1/pools/nope", p.viewer, "", ""), 404, "not_found", "")

		// Allocate: 201 then 200 for the same owner; Location reads back.
		r = p.do("POST", "/api/v1/pools/lo-ip/allocations", p.operator, "", `{"owner_type":"machine","owner_id":"dpu-1"}`)
		if r.status != 201 || r.header.Get("Location") != "/api/v1/pools/lo-ip/allocations/10.0.0.1" {
			t.Fatalf("allocate: %d %v %s", r.status, r.header, r.body)
		}
		al := r.json(t)
		for _, k := range []string{"pool", "value", "owner_type", "owner_id", "state", "allocated_at"} {
			if _, ok := al[k]; !ok {
				t.Fatalf("allocation lacks %q: %s", k, r.body)
			}
		}
		if al["value"] != "10.0.0.1" || al["state"] != "allocated" || al["pool"] != "lo-ip" {
			t.Fatalf("allocation %v", al)
		}
		again := p.want(200, "POST", "/api/v1/pools/lo-ip/allocations", p.operator, `{"owner_type":"machine","owner_id":"dpu-1"}`)
		if again["value"] != "10.0.0.1" {
			t.Fatalf("repeat %v", again)
		}
		p.want(200, "GET", "/api/v1/pools/lo-ip/allocations/10.0.0.1", p.viewer, "")
		wantAPIError(t, p.do("POST", "/api/v1/pools/lo-ip/allocations", p.operator, "", `{"owner_type":"machine","owner_id":"dpu-1","value":"10.0.0.12"}`),
			409, "conflict", "value")
		p.want(201, "POST", "/api/v1/pools/lo-ip/allocations", p.operator, `{"owner_type":"machine","owner_id":"dpu-2","value":"10.0.0.12"}`)
		msg := wantAPIError(t, p.do("POST", "/api/v1/pools/lo-ip/allocations", p.operator, "", `{"owner_type":"machine","owner_id":"dpu-3","value":"10.0.0.12"}`),
			409, "not_available", "value")
		if !strings.Contains(msg, "allocated to machine/dpu-2") {
			t.Fatalf("message %q does not name the holder", msg)
		}
		wantAPIError(t, p.do("POST", "/api/v1/pools/lo-ip/allocations", p.operator, "", `{"owner_type":"machine","owner_id":"dpu-3","value":"10.0.0.5"}`),
			409, "not_available", "value")
		for i := 3; i <= 10; i++ {
			p.want(201, "POST", "/api/v1/pools/lo-ip/allocations", p.operator, `{"owner_type":"machine","owner_id":"dpu-`+strconv.Itoa(i)+`"}`)
		}
		wantAPIError(t, p.do("POST", "/api/v1/pools/lo-ip/allocations", p.operator, "", `{"owner_type":"machine","owner_id":"dpu-11"}`),
			409, "pool_exhausted", "")

		// Keyset pagination over REST.
		var values []string
		cursor := ""
		for i := 0; i < 10; i++ {
			page := p.want(200, "GET", "/api/v1/pools/lo-ip/allocations?limit=4&cursor="+cursor, p.viewer, "")
			for _, it := range page["items"].([]any) {
				values = append(values, it.(map[string]any)["value"].(string))
			}
			next, _ := page["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = next
		}
		if strings.Join(values, ",") != "10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4,10.0.0.5,10.0.0.6,10.0.0.7,10.0.0.8,10.0.0.9,10.0.0.12" {
			t.Fatalf("paged values %v", values)
		}
		page := p.want(200, "GET", "/api/v1/pools/lo-ip/allocations?limit=5000&owner_id=dpu-2", p.viewer, "")
		if items := page["items"].([]any); len(items) != 1 {
			t.Fatalf("filtered page %v", page)
		}
		wantAPIError(t, p.do("GET", "/api/v1/pools/lo-ip/allocations?limit=abc", p.viewer, "", ""), 422, "invalid", "limit")
		wantAPIError(t, p.do("GET", "/api/v1/pools/lo-ip/allocations?limit=0", p.viewer, "", ""), 422, "invalid", "limit")
		for _, l := range []string{"", "+5", "-0", "%205", "1e3"} {
			wantAPIError(t, p.do("GET", "/api/v1/pools/lo-ip/allocations?limit="+l, p.viewer, "", ""), 422, "invalid", "limit")
			wantAPIError(t, p.do("GET", "/api/v1/expected-machines?limit="+l, p.viewer, "", ""), 422, "invalid", "limit")
		}
		wantAPIError(t, p.do("GET", "/api/v1/pools/lo-ip/allocations?state=free", p.viewer, "", ""), 422, "invalid", "state")
		wantAPIError(t, p.do("GET", "/api/v1/pools/lo-ip/allocations?cursor=xyz", p.viewer, "", ""), 422, "invalid", "cursor")

		// Release: owner only; free value is a no-op.
		wantAPIError(t, p.do("DELETE", "/api/v1/pools/lo-ip/allocations/10.0.0.12?owner_type=machine&owner_id=dpu-3", p.operator, "", ""),
			409, "not_owner", "owner_id")
		wantAPIError(t, p.do("DELETE", "/api/v1/pools/lo-ip/allocations/10.0.0.12", p.operator, "", ""), 422, "invalid", "owner_type")
		p.want(204, "DELETE", "/api/v1/pools/lo-ip/allocations/10.0.0.12?owner_type=machine&owner_id=dpu-2", p.operator, "")
		p.want(204, "DELETE", "/api/v1/pools/lo-ip/allocations/10.0.0.12?owner_type=machine&owner_id=dpu-2", p.operator, "")
		wantAPIError(t, p.do("GET", "/api/v1/pools/lo-ip/allocations/10.0.0.12", p.viewer, "", ""), 404, "not_found", "")

		// Unquarantine refusals (quarantine itself comes from force delete).
		wantAPIError(t, p.do("POST", "/api/v1/pools/lo-ip/allocations/10.0.0.12:unquarantine", p.admin, "", ""), 404, "not_found", "")
		wantAPIError(t, p.do("POST", "/api/v1/pools/lo-ip/allocations/10.0.0.1:unquarantine", p.admin, "", ""), 409, "conflict", "value")
		wantAPIError(t, p.do("POST", "/api/v1/pools/lo-ip/allocations/10.0.0.1:unquarantine", p.operator, "", ""), 403, "forbidden", "")

		// Ranges: grow, read back, flip, refusals, remove.
		r = p.do("POST", "/api/v1/pools/lo-ip/ranges", p.admin, "", `{"first":"10.0.1.0","last":"10.0.1.255","auto_assign":false}`)
		if r.status != 201 || !strings.HasPrefix(r.header.Get("Location"), "/api/v1/pools/lo-ip/ranges/") {
			t.Fatalf("add range: %d %v %s", r.status, r.header, r.body)
		}
		loc := r.header.Get("Location")
		if got := p.want(200, "GET", loc, p.viewer, ""); got["size"] != "256" {
			t.Fatalf("range %v", got)
		}
		wantAPIError(t, p.do("POST", "/api/v1/pools/lo-ip/ranges", p.admin, "", `{"first":"10.0.1.255","last":"10.0.2.0"}`), 409, "conflict", "first")
		p.want(201, "POST", "/api/v1/pools/lo-ip/allocations", p.operator, `{"owner_type":"machine","owner_id":"x","value":"10.0.1.7"}`)
		msg = wantAPIError(t, p.do("PATCH", loc, p.admin, "", `{"auto_assign":true}`), 409, "conflict", "auto_assign")
		if !strings.Contains(msg, "10.0.1.7") {
			t.Fatalf("flip refusal %q does not name the blocking value", msg)
		}
		msg = wantAPIError(t, p.do("PATCH", loc, p.admin, "", `{"first":"10.0.1.8"}`), 409, "conflict", "first")
		if !strings.Contains(msg, "10.0.1.7 (allocated to machine/x)") {
			t.Fatalf("shrink refusal %q does not name the blocking value", msg)
		}
		wantAPIError(t, p.do("DELETE", loc, p.admin, "", ""), 409, "conflict", "id")
		if got := p.want(200, "PATCH", loc, p.admin, `{"last":"10.0.1.127"}`); got["size"] != "128" {
			t.Fatalf("shrink %v", got)
		}
		p.want(204, "DELETE", "/api/v1/pools/lo-ip/allocations/10.0.1.7?owner_type=machine&owner_id=x", p.operator, "")
		p.want(204, "DELETE", loc, p.admin, "")
		wantAPIError(t, p.do("GET", loc, p.viewer, "", ""), 404, "not_found", "")

		// Address lookup.
		info := p.want(200, "GET", "/api/v1/addresses/10.0.0.3", p.viewer, "")
		if info["value"] != "10.0.0.3" || len(info["entries"].([]any)) != 2 {
			t.Fatalf("lookup %v", info)
		}
		if e := p.want(200, "GET", "/api/v1/addresses/192.0.2.1", p.viewer, ""); len(e["entries"].([]any)) != 0 {
			t.Fatalf("lookup of a free value %v", e)
		}
		// With its host prefix, URL-encoded, it is the same address; any
		// other prefix length is 422.
		if got := p.want(200, "GET", "/api/v1/addresses/10.0.0.3%2F32", p.viewer, ""); got["value"] != "10.0.0.3" || len(got["entries"].([]any)) != 2 {
			t.Fatalf("lookup of 10.0.0.3/32 %v", got)
		}
		wantAPIError(t, p.do("GET", "/api/v1/addresses/10.0.0.3%2F24", p.viewer, "", ""), 422, "invalid", "value")
		wantAPIError(t, p.do("GET", "/api/v1/addresses/fd00::c%2F64", p.viewer, "", ""), 422, "invalid", "value")

		// Audit log carries the actor and request id.
		events := p.want(200, "GET", "/api/v1/events?action=allocation.create&limit=1", p.viewer, "")
		ev := events["items"].([]any)[0].(map[string]any)
		if ev["actor"] != "token:op" || ev["request_id"] == "" || events["next_cursor"] == "" {
			t.Fatalf("event %v", events)
		}
	})
}

// IPv6 values carry colons and ipv6prefix values a slash: both work in
// paths (the slash percent-encoded).
func TestPoolsRESTIPv6Paths(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		p := newPoolAPI(t, db)
		p.want(201, "POST", "/api/v1/pools", p.admin, `{"name":"ep","type":"ipv6prefix","delegate_prefix_len":96,"ranges":[{"first":"fd00:10::/96","last":"fd00:10::ff:0:0/96"}]}`)
		p.want(201, "POST", "/api/v1/pools", p.admin, `{"name":"v6","type":"ipv6","ranges":[{"first":"fd00::1","last":"fd00::ff","auto_assign":false}]}`)
		r := p.do("POST", "/api/v1/pools/ep/allocations", p.operator, "", `{"owner_type":"pod","owner_id":"p1"}`)
		if r.status != 201 || r.json(t)["value"] != "fd00:10::/96" || r.header.Get("Location") != "/api/v1/pools/ep/allocations/fd00:10::%2F96" {
			t.Fatalf("block: %d %v %s", r.status, r.header, r.body)
		}
		p.want(200, "GET", r.header.Get("Location"), p.viewer, "")
		p.want(201, "POST", "/api/v1/pools/v6/allocations", p.operator, `{"owner_type":"pod","owner_id":"p1","value":"FD00::0:A"}`)
		if got := p.want(200, "GET", "/api/v1/pools/v6/allocations/fd00::a", p.viewer, ""); got["value"] != "fd00::a" {
			t.Fatalf("canonical IPv6 %v", got)
		}
		p.want(204, "DELETE", "/api/v1/pools/v6/allocations/fd00::a?owner_type=pod&owner_id=p1", p.operator, "")
		p.want(204, "DELETE", "/api/v1/pools/ep/allocations/fd00:10::%2F96?owner_type=pod&owner_id=p1", p.operator, "")
		if page := p.want(200, "GET", "/api/v1/pools/ep/allocations", p.viewer, ""); len(page["items"].([]any)) != 0 {
			t.Fatalf("after release %v", page)
		}
	})
}

// NICo pool files through REST.
func TestPoolsRESTLoad(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		p := newPoolAPI(t, db)
		file := "[pools.vlan-id]\ntype = \"integer\"\nranges = [{ start = \"100\", end = \"110\" }]\n[networks.admin]\nprefix = \"172.20.0.0/24\"\n"
		r := p.do("POST", "/api/v1/pools:load", p.admin, "application/toml", file)
		if r.status != 200 {
			t.Fatalf("load: %d %s", r.status, r.body)
		}
		var res struct {
			Created []map[string]string `json:"created"`
			Drift   []map[string]string `json:"drift"`
		}
		json.Unmarshal(r.body, &res)
		if len(res.Created) != 1 || res.Created[0]["first"] != "100" || res.Created[0]["last"] != "109" || res.Drift == nil {
			t.Fatalf("load result %s", r.body)
		}
		r = p.do("POST", "/api/v1/pools:load", p.admin, "text/plain; charset=utf-8", "[pools.vlan-id]\ntype = \"integer\"\nranges = [{ start = \"105\", end = \"120\" }]\n")
		if r.status != 200 || !strings.Contains(string(r.body), `"drift":[{"pool":"vlan-id"`) {
			t.Fatalf("drift load: %d %s", r.status, r.body)
		}
		wantAPIError(t, p.do("POST", "/api/v1/pools:load", p.operator, "application/toml", file), 403, "forbidden", "")
	})
}

// Bad input through REST gets a 4xx in the §5 shape naming the field and
// value, and changes nothing.
func TestPoolsRESTBadInput(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		p := newPoolAPI(t, db)
		p.want(201, "POST", "/api/v1/pools", p.admin, `{"name":"lo-ip","type":"ipv4","ranges":[{"first":"10.0.0.1","last":"10.0.0.9"},{"first":"10.0.0.10","last":"10.0.0.19","auto_assign":false}]}`)
		p.want(201, "POST", "/api/v1/pools/lo-ip/allocations", p.operator, `{"owner_type":"machine","owner_id":"a"}`)
		cases := []struct {
			name, method, path, ctype, body string
			status                          int
			code, field, mention            string
		}{
			{"malformed address", "POST", "/api/v1/pools", "", `{"name":"p","type":"ipv4","ranges":[{"first":"10.0.0.256","last":"10.0.1.0"}]}`, 422, "invalid", "ranges[0].first", "10.0.0.256"},
			{"reversed range", "POST", "/api/v1/pools", "", `{"name":"p","type":"ipv4","ranges":[{"first":"10.0.0.9","last":"10.0.0.1"}]}`, 422, "invalid", "ranges[0].last", "10.0.0.1"},
			{"wrong family", "POST", "/api/v1/pools", "", `{"name":"p","type":"ipv6","ranges":[{"first":"10.0.0.1","last":"10.0.0.9"}]}`, 422, "invalid", "ranges[0].first", "10.0.0.1"},
			{"zoned IPv6", "POST", "/api/v1/pools", "", `{"name":"p","type":"ipv6","ranges":[{"first":"fe80::1%eth0","last":"fe80::9"}]}`, 422, "invalid", "ranges[0].first", "fe80::1%eth0"},
			{"IPv4-mapped IPv6", "POST", "/api/v1/pools", "", `{"name":"p","type":"ipv6","ranges":[{"first":"::ffff:10.0.0.1","last":"::ffff:10.0.0.9"}]}`, 422, "invalid", "ranges[0].first", "::ffff:10.0.0.1"},
			{"unknown pool type", "POST", "/api/v1/pools", "", `{"name":"p","type":"vlan"}`, 422, "invalid", "type", "vlan"},
			{"name of the wrong JSON type", "POST", "/api/v1/pools", "", `{"name":5,"type":"ipv4"}`, 422, "invalid", "name", "number"},
			{"ranges of the wrong JSON type", "POST", "/api/v1/pools", "", `{"name":"p","type":"ipv4","ranges":"10.0.0.0/24"}`, 422, "invalid", "ranges", "string"},
			{"auto_assign of the wrong JSON type", "POST", "/api/v1/pools", "", `{"name":"p","type":"ipv4","ranges":[{"first":"10.0.0.1","last":"10.0.0.2","auto_assign":"yes"}]}`, 422, "invalid", "ranges[0].auto_assign", "string"},
			{"unparseable JSON", "POST", "/api/v1/pools", "", `{"name":"p",`, 400, "bad_request", "", "JSON"},
			{"JSON array body", "POST", "/api/v1/pools", "", `[1,2]`, 400, "bad_request", "", "object"},
			{"empty body", "POST", "/api/v1/pools", "application/json", ``, 400, "bad_request", "", "empty"},
			{"null body", "POST", "/api/v1/pools/lo-ip/allocations", "", `null`, 400, "bad_request", "", "null"},
			{"owner_id not UTF-8", "POST", "/api/v1/pools/lo-ip/allocations", "", "{\"owner_type\":\"machine\",\"owner_id\":\"a\xff\"}", 400, "bad_request", "", "UTF-8"},
			{"overlapping range", "POST", "/api/v1/pools/lo-ip/ranges", "", `{"first":"10.0.0.5","last":"10.0.0.50"}`, 409, "conflict", "first", "10.0.0.1..10.0.0.9"},
			{"range of the wrong family", "POST", "/api/v1/pools/lo-ip/ranges", "", `{"first":"fd00::1","last":"fd00::2"}`, 422, "invalid", "first", "fd00::1"},
			{"bad owner_type", "POST", "/api/v1/pools/lo-ip/allocations", "", `{"owner_type":"Machine!","owner_id":"b"}`, 422, "invalid", "owner_type", "Machine!"},
			{"missing owner_id", "POST", "/api/v1/pools/lo-ip/allocations", "", `{"owner_type":"machine"}`, 422, "invalid", "owner_id", ""},
			{"owner_id too long", "POST", "/api/v1/pools/lo-ip/allocations", "", `{"owner_type":"machine","owner_id":"` + strings.Repeat("x", 129) + `"}`, 422, "invalid", "owner_id", "129"},
			{"owner_id of the wrong JSON type", "POST", "/api/v1/pools/lo-ip/allocations", "", `{"owner_type":"machine","owner_id":7}`, 422, "invalid", "owner_id", "number"},
			{"requested value of the wrong family", "POST", "/api/v1/pools/lo-ip/allocations", "", `{"owner_type":"machine","owner_id":"b","value":"fd00::1"}`, 422, "invalid", "value", "fd00::1"},
			{"zoned requested value", "POST", "/api/v1/pools/lo-ip/allocations", "", `{"owner_type":"machine","owner_id":"b","value":"fe80::1%eth0"}`, 422, "invalid", "value", "fe80::1%eth0"},
			{"requested value outside the pool", "POST", "/api/v1/pools/lo-ip/allocations", "", `{"owner_type":"machine","owner_id":"b","value":"10.9.9.9"}`, 409, "not_available", "value", "10.9.9.9"},
			{"allocation in an unknown pool", "POST", "/api/v1/pools/nope/allocations", "", `{"owner_type":"machine","owner_id":"b"}`, 404, "not_found", "", "nope"},
			{"release of a malformed value", "DELETE", "/api/v1/pools/lo-ip/allocations/10.0.0?owner_type=machine&owner_id=a", "", "", 422, "invalid", "value", "10.0.0"},
			{"garbage TOML", "POST", "/api/v1/pools:load", "application/toml", "[[[ not toml", 400, "bad_request", "", "TOML"},
			{"TOML with a wrong field", "POST", "/api/v1/pools:load", "text/plain", "[pools.x]\ntype = \"ipv4\"\nranges = [{ start = \"10.1.0.9\", end = \"10.1.0.1\" }]\n", 422, "invalid", "pools.x.ranges[0].end", "10.1.0.1"},
			{"pool file as JSON", "POST", "/api/v1/pools:load", "application/json", `{"pools":{}}`, 400, "bad_request", "", "application/toml"},
			{"pool file of a type that only starts like TOML", "POST", "/api/v1/pools:load", "application/tomlx", "[pools.x]\ntype = \"integer\"\nranges = [{ start = 1, end = 2 }]\n", 400, "bad_request", "", "application/toml"},
			{"pool file without a type", "POST", "/api/v1/pools:load", "application/toml", "[pools.x]\nranges = [{ start = 1, end = 2 }]\n", 422, "invalid", "pools.x.type", "has no type"},
			{"lookup of garbage", "GET", "/api/v1/addresses/not-an-address", "", "", 422, "invalid", "value", "not-an-address"},
			{"lookup of a zoned address", "GET", "/api/v1/addresses/fe80::1%25eth0", "", "", 422, "invalid", "value", "fe80::1%eth0"},
			{"unknown range id", "PATCH", "/api/v1/pools/lo-ip/ranges/999", "", `{"auto_assign":false}`, 404, "not_found", "", "999"},
			{"range patch of the wrong JSON type", "PATCH", "/api/v1/pools/lo-ip/ranges/1", "", `{"auto_assign":"no"}`, 422, "invalid", "auto_assign", "string"},
			// A misspelt field must not silently turn a requested value into
			// an automatic one, or an explicit range into an auto_assign one.
			{"misspelt requested value", "POST", "/api/v1/pools/lo-ip/allocations", "", `{"owner_type":"machine","owner_id":"b","vaule":"10.0.0.12"}`, 422, "invalid", "vaule", "unknown field"},
			{"misspelt auto_assign in a new range", "POST", "/api/v1/pools/lo-ip/ranges", "", `{"first":"10.0.1.1","last":"10.0.1.9","auto_asign":false}`, 422, "invalid", "auto_asign", "unknown field"},
			{"misspelt auto_assign in a new pool", "POST", "/api/v1/pools", "", `{"name":"p","type":"ipv4","ranges":[{"first":"10.0.2.1","last":"10.0.2.9","autoassign":false}]}`, 422, "invalid", "ranges[0].autoassign", "unknown field"},
			{"misspelt field in a range patch", "PATCH", "/api/v1/pools/lo-ip/ranges/1", "", `{"auto_assing":false}`, 422, "invalid", "auto_assing", "unknown field"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				before := p.state()
				r := p.do(c.method, c.path, p.admin, c.ctype, c.body)
				msg := wantAPIError(t, r, c.status, c.code, c.field)
				if !strings.Contains(msg, c.mention) {
					t.Fatalf("message %q does not mention %q", msg, c.mention)
				}
				if after := p.state(); after != before {
					t.Fatalf("state changed:\n%s\n---\n%s", before, after)
				}
			})
		}
	})
}

// Auth (docs/api.md): 401 without or with an unknown token, 403 for a
// role below the route's; an unknown /api/v1 path is 401 without a token
// and 404 with one.
func TestPoolsRESTAuth(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		p := newPoolAPI(t, db)
		p.want(201, "POST", "/api/v1/pools", p.admin, `{"name":"lo-ip","type":"ipv4","ranges":[{"first":"10.0.0.1","last":"10.0.0.9"}]}`)
		before := p.state()
		for _, c := range []struct {
			method, path, token, body string
			status                    int
			code                      string
		}{
			{"GET", "/api/v1/pools", "", "", 401, "unauthorized"},
			{"GET", "/api/v1/pools", "no-such-token-at-all", "", 401, "unauthorized"},
			{"POST", "/api/v1/pools", "", `{"name":"x","type":"ipv4"}`, 401, "unauthorized"},
			{"GET", "/api/v1/no/such/path", "", "", 401, "unauthorized"},
			{"GET", "/api/v1/no/such/path", p.viewer, "", 404, "not_found"},
			{"POST", "/api/v1/pools", p.viewer, `{"name":"x","type":"ipv4"}`, 403, "forbidden"},
			{"POST", "/api/v1/pools", p.operator, `{"name":"x","type":"ipv4"}`, 403, "forbidden"},
			{"POST", "/api/v1/pools:load", p.operator, "[pools.x]\ntype=\"integer\"\nranges=[{start=1,end=2}]", 403, "forbidden"},
			{"POST", "/api/v1/pools/lo-ip/ranges", p.operator, `{"first":"10.0.1.1","last":"10.0.1.2"}`, 403, "forbidden"},
			{"PATCH", "/api/v1/pools/lo-ip/ranges/1", p.operator, `{"auto_assign":false}`, 403, "forbidden"},
			{"DELETE", "/api/v1/pools/lo-ip/ranges/1", p.operator, "", 403, "forbidden"},
			{"POST", "/api/v1/pools/lo-ip/allocations", p.viewer, `{"owner_type":"machine","owner_id":"a"}`, 403, "forbidden"},
			{"DELETE", "/api/v1/pools/lo-ip/allocations/10.0.0.1?owner_type=machine&owner_id=a", p.viewer, "", 403, "forbidden"},
		} {
			r := p.do(c.method, c.path, c.token, "", c.body)
			if r.status != c.status {
				t.Fatalf("%s %s as %q: %d, want %d: %s", c.method, c.path, c.token, r.status, c.status, r.body)
			}
			wantAPIError(t, r, c.status, c.code, "")
		}
		req := httptest.NewRequest("GET", "/api/v1/pools", nil)
		req.Header.Set("Authorization", "Basic "+p.admin)
		rec := httptest.NewRecorder()
		p.h.ServeHTTP(rec, req)
		wantAPIError(t, apiResp{rec.Code, rec.Header(), rec.Body.Bytes()}, 401, "unauthorized", "")
		if after := p.state(); after != before {
			t.Fatal("refused requests changed state")
		}
		// Roles nest: the admin may do what the operator and viewer may.
		p.want(201, "POST", "/api/v1/pools/lo-ip/allocations", p.admin, `{"owner_type":"machine","owner_id":"a"}`)
		p.want(200, "GET", "/api/v1/pools/lo-ip", p.operator, "")
		// Public endpoints need no token.
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			if r := p.do("GET", path, "", "", ""); r.status != 200 {
				t.Fatalf("%s: %d", path, r.status)
			}
		}
		if r := p.do("GET", "/metrics", "", "", ""); !strings.Contains(string(r.body), `ipledger_pool_values{kind="auto",pool="lo-ip",state="allocated"} 1`) {
			t.Fatalf("metrics lack the pool gauge:\n%s", r.body)
		}
		// The one automatic allocation above was one batch of one.
		if r := p.do("GET", "/metrics", "", "", ""); !strings.Contains(string(r.body), "ipledger_allocation_batch_size_sum 1\n") ||
			!strings.Contains(string(r.body), "ipledger_allocation_batch_duration_seconds_count 1\n") {
			t.Fatalf("metrics lack the allocation batch histograms:\n%s", r.body)
		}
	})
}
