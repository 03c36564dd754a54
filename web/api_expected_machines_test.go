package web

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/docs/samples"
)

// emSample is docs/samples/expected-machines.json: the NICo file
// with the new expected_dpus, as operators have it.
var emSample = samples.ExpectedMachines

type emHTTP struct {
	t      *testing.T
	server *Server
	srv    http.Handler
	logs   *emLogBuffer
	admin  string
	viewer string
}

type emLogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *emLogBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *emLogBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newEMHTTP(t *testing.T, db *gorm.DB) *emHTTP {
	a := allocator.New(db, allocator.Options{})
	au := auth.New(a.DB(), auth.Options{})
	h := &emHTTP{t: t, logs: &emLogBuffer{}, admin: "em-test-admin-token-0001", viewer: "em-test-viewer-token-0001"}
	ctx := context.Background()
	if _, err := au.EnsureAdminToken(ctx, h.admin); err != nil {
		t.Fatal(err)
	}
	if _, err := au.CreateToken(ctx, "viewer", auth.RoleViewer, h.viewer); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.server = New(Config{Allocator: a, Logger: log})
	h.srv = h.server.Handler()
	for _, body := range []string{
		`{"name":"lo-ip","type":"ipv4","ranges":[{"first":"10.180.62.1","last":"10.180.62.199"},{"first":"10.180.62.200","last":"10.180.62.255","auto_assign":false}]}`,
		`{"name":"lo-ip-v6","type":"ipv6","ranges":[{"first":"fd00:180:62::1","last":"fd00:180:62::ffff"},{"first":"fd00:180:62:1::","last":"fd00:180:62:1::ff","auto_assign":false}]}`,
	} {
		if r := h.do("POST", "/api/v1/pools", h.admin, body, nil); r.Code != 201 {
			t.Fatalf("create pool: %d %s", r.Code, r.Body)
		}
	}
	return h
}

func (h *emHTTP) do(method, path, token, body string, hdr map[string]string) *httptest.ResponseRecorder {
	h.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.srv.ServeHTTP(rec, req)
	return rec
}

func (h *emHTTP) wantError(r *httptest.ResponseRecorder, status int, code, field string) {
	h.t.Helper()
	var eb struct {
		Error struct{ Code, Message, Field string }
	}
	if err := json.Unmarshal(r.Body.Bytes(), &eb); err != nil || r.Code != status || eb.Error.Code != code || eb.Error.Field != field || eb.Error.Message == "" {
		h.t.Fatalf("got %d %s, want %d %s field %q", r.Code, r.Body, status, code, field)
	}
}

func decodeEM(t *testing.T, r *httptest.ResponseRecorder) allocator.ExpectedMachine {
	t.Helper()
	var em allocator.ExpectedMachine
	if err := json.Unmarshal(r.Body.Bytes(), &em); err != nil {
		t.Fatalf("%d %s: %v", r.Code, r.Body, err)
	}
	return em
}

// The REST contract of docs/api.md: create 201 + Location + ETag,
// GET by UUID or MAC, PUT/PATCH 200 + ETag, If-Match → 412, DELETE 204,
// roles, error shape with field, and the password nowhere in answers or
// logs.
func TestExpectedMachinesREST(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newEMHTTP(t, db)
		body := `{"bmc_mac_address":"1A-1B-1C-1D-1E-1F","bmc_username":"root","bmc_password":"hunter2-secret",
			"chassis_serial_number":"SN-0001","fallback_dpu_serial_numbers":["MT0001"],
			"metadata":{"name":"rack7-u12","description":"","labels":[{"key":"env","value":"prod"}]},"sku_id":null,
			"expected_dpus":[{"serial_number":"MT0001","loopback_ip":"10.180.62.200","loopback_ip_v6":"fd00:180:62:1::c8"}]}`
		r := h.do("POST", "/api/v1/expected-machines", h.viewer, body, nil)
		h.wantError(r, 403, "forbidden", "")
		r = h.do("POST", "/api/v1/expected-machines", "", body, nil)
		h.wantError(r, 401, "unauthorized", "")
		r = h.do("POST", "/api/v1/expected-machines", h.admin, body, nil)
		if r.Code != 201 || r.Header().Get("ETag") != `"1"` {
			t.Fatalf("create: %d %v %s", r.Code, r.Header(), r.Body)
		}
		em := decodeEM(t, r)
		loc := r.Header().Get("Location")
		if loc != "/api/v1/expected-machines/"+em.ID || em.BmcMacAddress != "1a:1b:1c:1d:1e:1f" || !em.BmcPasswordSet {
			t.Fatalf("create: Location %q, %+v", loc, em)
		}
		for _, path := range []string{loc, "/api/v1/expected-machines/1A:1B:1C:1D:1E:1F"} {
			g := h.do("GET", path, h.viewer, "", nil)
			if g.Code != 200 || g.Header().Get("ETag") != `"1"` || decodeEM(t, g).ID != em.ID {
				t.Fatalf("GET %s: %d %s", path, g.Code, g.Body)
			}
		}
		h.wantError(h.do("GET", "/api/v1/expected-machines/0a:0a:0a:0a:0a:0a", h.viewer, "", nil), 404, "not_found", "")
		// Validation errors carry code and field; a refused write changes nothing.
		h.wantError(h.do("POST", "/api/v1/expected-machines", h.admin,
			`{"bmc_mac_address":"0a:00:00:00:00:02","expected_dpus":[{"serial_number":"MT2"},{"serial_number":"MT3","loopback_ip_v6":"fe80::1%eth0"}]}`, nil),
			422, "invalid", "expected_dpus[1].loopback_ip_v6")
		h.wantError(h.do("POST", "/api/v1/expected-machines", h.admin,
			`{"bmc_mac_address":"0a:00:00:00:00:02","expected_dpus":[{"serial_number":"MT2","loopback_ip":"10.180.62.200"}]}`, nil),
			409, "not_available", "expected_dpus[0].loopback_ip")
		h.wantError(h.do("POST", "/api/v1/expected-machines", h.admin, `{"bmc_mac_address":"1a:1b:1c:1d:1e:1f"}`, nil), 409, "conflict", "bmc_mac_address")
		h.wantError(h.do("POST", "/api/v1/expected-machines", h.admin, `{"bmc_mac_address":`, nil), 400, "bad_request", "")
		h.wantError(h.do("POST", "/api/v1/expected-machines", h.admin, `{"bmc_mac_address":"0a:00:00:00:00:02","expected_dpus":[{"serial_number":"MT2","loopback_ip":10}]}`, nil),
			422, "invalid", "expected_dpus[0].loopback_ip")

		// Older client: GET, drop expected_dpus and bmc_password, PUT back.
		g := h.do("GET", loc, h.viewer, "", nil)
		var doc map[string]any
		_ = json.Unmarshal(g.Body.Bytes(), &doc)
		delete(doc, "expected_dpus")
		delete(doc, "bmc_password")
		doc["bmc_username"] = "admin"
		b, _ := json.Marshal(doc)
		r = h.do("PUT", loc, h.admin, string(b), nil)
		if r.Code != 200 || r.Header().Get("ETag") != `"2"` {
			t.Fatalf("older-client PUT: %d %s", r.Code, r.Body)
		}
		got := decodeEM(t, r)
		if got.BmcUsername != "admin" || !got.BmcPasswordSet || len(got.ExpectedDPUs) != 1 || *got.ExpectedDPUs[0].LoopbackIPv6 != "fd00:180:62:1::c8" {
			t.Fatalf("older-client PUT lost data: %s", r.Body)
		}
		// If-Match.
		h.wantError(h.do("PUT", loc, h.admin, string(b), map[string]string{"If-Match": `"1"`}), 412, "stale_version", "")
		h.wantError(h.do("PATCH", loc, h.admin, `{"sku_id":"x"}`, map[string]string{"If-Match": `"1"`}), 412, "stale_version", "")
		h.wantError(h.do("DELETE", loc, h.admin, "", map[string]string{"If-Match": `"1"`}), 412, "stale_version", "")
		if r = h.do("PUT", loc, h.admin, string(b), map[string]string{"If-Match": "*"}); r.Code != 200 {
			t.Fatalf("If-Match *: %d %s", r.Code, r.Body)
		}
		// PATCH content types and semantics.
		r = h.do("PATCH", loc, h.admin, `{"metadata":{"name":"renamed"}}`, map[string]string{"Content-Type": "application/merge-patch+json", "If-Match": `"2"`})
		if r.Code != 200 || r.Header().Get("ETag") != `"3"` || decodeEM(t, r).Metadata.Labels[0].Key != "env" {
			t.Fatalf("merge-patch: %d %s", r.Code, r.Body)
		}
		h.wantError(h.do("PATCH", loc, h.admin, `{}`, map[string]string{"Content-Type": "text/plain"}), 400, "bad_request", "")
		r = h.do("PATCH", loc, h.admin, `{"expected_dpus":null}`, nil)
		if r.Code != 200 || len(decodeEM(t, r).ExpectedDPUs) != 0 || !strings.Contains(r.Body.String(), `"expected_dpus":[]`) {
			t.Fatalf("PATCH null: %d %s", r.Code, r.Body)
		}
		// List shape and filters.
		r = h.do("GET", "/api/v1/expected-machines?label=env=prod&limit=5000", h.viewer, "", nil)
		var page struct {
			Items      []allocator.ExpectedMachine `json:"items"`
			NextCursor *string                     `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.Body.Bytes(), &page); err != nil || r.Code != 200 || len(page.Items) != 1 || (page.NextCursor != nil && *page.NextCursor != "") {
			t.Fatalf("list: %d %s", r.Code, r.Body)
		}
		h.wantError(h.do("GET", "/api/v1/expected-machines?bmc_mac_address=zz", h.viewer, "", nil), 422, "invalid", "bmc_mac_address")
		// DELETE.
		h.wantError(h.do("DELETE", loc, h.viewer, "", nil), 403, "forbidden", "")
		if r = h.do("DELETE", loc, h.admin, "", nil); r.Code != 204 {
			t.Fatalf("delete: %d %s", r.Code, r.Body)
		}
		h.wantError(h.do("GET", loc, h.viewer, "", nil), 404, "not_found", "")
		// The password appears in no answer and no log line.
		if strings.Contains(h.logs.String(), "hunter2") {
			t.Fatal("password in the server log")
		}
		ev := h.do("GET", "/api/v1/events?object_type=expected_machine", h.admin, "", nil)
		if ev.Code != 200 || strings.Contains(ev.Body.String(), "hunter2") || !strings.Contains(ev.Body.String(), "expected_machine.create") {
			t.Fatalf("events: %d %s", ev.Code, ev.Body)
		}
	})
}

// Replace-all takes the NICo file as is, answers 200 {"items"}, keeps ids
// of known BMC MACs, and is atomic: one bad record changes nothing and the
// error names the record and field.
func TestExpectedMachinesReplaceAllREST(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newEMHTTP(t, db)
		r := h.do("POST", "/api/v1/expected-machines", h.admin, `{"bmc_mac_address":"0a:00:00:00:01:02","chassis_serial_number":"old"}`, nil)
		if r.Code != 201 {
			t.Fatalf("create: %d %s", r.Code, r.Body)
		}
		keep := decodeEM(t, r)
		h.do("POST", "/api/v1/expected-machines", h.admin, `{"bmc_mac_address":"0a:00:00:00:01:09"}`, nil)
		h.wantError(h.do("PUT", "/api/v1/expected-machines", h.viewer, emSample, nil), 403, "forbidden", "")
		bad := strings.Replace(emSample, `"loopback_ip": "10.180.62.211"`, `"loopback_ip": "10.180.62.21"`, 1)
		before := h.do("GET", "/api/v1/expected-machines", h.viewer, "", nil).Body.String()
		h.wantError(h.do("PUT", "/api/v1/expected-machines", h.admin, bad, nil), 422, "invalid", "expected_machines[0].expected_dpus[1].loopback_ip")
		if after := h.do("GET", "/api/v1/expected-machines", h.viewer, "", nil).Body.String(); after != before {
			t.Fatalf("refused replace-all changed state:\n%s\n%s", before, after)
		}
		r = h.do("PUT", "/api/v1/expected-machines", h.admin, emSample, nil)
		if r.Code != 200 {
			t.Fatalf("replace-all: %d %s", r.Code, r.Body)
		}
		var res struct{ Items []allocator.ExpectedMachine }
		if err := json.Unmarshal(r.Body.Bytes(), &res); err != nil || len(res.Items) != 2 {
			t.Fatalf("replace-all answer %s", r.Body)
		}
		if res.Items[1].ID != keep.ID || res.Items[1].ChassisSerialNumber != "CHS-000102" || len(res.Items[0].ExpectedDPUs) != 2 ||
			*res.Items[0].ExpectedDPUs[0].LoopbackIPv6 != "fd00:180:62:1::11" || res.Items[0].ExpectedDPUs[1].LoopbackIPv6 != nil {
			t.Fatalf("replace-all items %s", r.Body)
		}
		if strings.Contains(r.Body.String(), "factory-default") {
			t.Fatal("password returned")
		}
		h.wantError(h.do("GET", "/api/v1/expected-machines/0a:00:00:00:01:09", h.viewer, "", nil), 404, "not_found", "")
		// The reserved values now show up as reservations of the address.
		a := h.do("GET", "/api/v1/addresses/10.180.62.211", h.viewer, "", nil)
		if !strings.Contains(a.Body.String(), `"reservation"`) || !strings.Contains(a.Body.String(), "MT2301X00012") {
			t.Fatalf("address lookup %s", a.Body)
		}
	})
}

// Ten clients POST ExpectedMachines reserving one loopback at the same
// moment: exactly one gets 201, the others 409 not_available naming the
// field.
func TestExpectedMachinesConcurrentPOST(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newEMHTTP(t, db)
		var wg sync.WaitGroup
		codes := make([]int, 10)
		bodies := make([]string, 10)
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				req := httptest.NewRequest("POST", "/api/v1/expected-machines", strings.NewReader(
					`{"bmc_mac_address":"0a:00:00:00:0b:0`+string(rune('0'+i))+`","expected_dpus":[{"serial_number":"MT-B`+string(rune('0'+i))+`","loopback_ip":"10.180.62.222"}]}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+h.admin)
				rec := httptest.NewRecorder()
				h.srv.ServeHTTP(rec, req)
				codes[i], bodies[i] = rec.Code, rec.Body.String()
			}(i)
		}
		wg.Wait()
		created := 0
		for i, c := range codes {
			switch {
			case c == 201:
				created++
			case c == 409 && strings.Contains(bodies[i], `"code":"not_available"`) && strings.Contains(bodies[i], `"field":"expected_dpus[0].loopback_ip"`):
			default:
				t.Fatalf("client %d: %d %s", i, c, bodies[i])
			}
		}
		if created != 1 {
			t.Fatalf("%d clients got 201, want exactly 1", created)
		}
	})
}

// POST /api/v1/expected-machines:import?mode=merge|replace: merge keeps
// the ids of stored records and the records absent from the file, replace
// is the replace-all; a refused import is 422/409 naming the first
// problem and changes nothing; an unknown mode is 422 naming "mode";
// viewers may not import.
func TestExpectedMachinesImportREST(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newEMHTTP(t, db)
		r := h.do("POST", "/api/v1/expected-machines", h.admin, `{"bmc_mac_address":"0a:00:00:00:01:02","chassis_serial_number":"old"}`, nil)
		if r.Code != 201 {
			t.Fatalf("create: %d %s", r.Code, r.Body)
		}
		keep := decodeEM(t, r)
		h.do("POST", "/api/v1/expected-machines", h.admin, `{"bmc_mac_address":"0a:00:00:00:01:09"}`, nil)
		h.wantError(h.do("POST", "/api/v1/expected-machines:import", h.viewer, emSample, nil), 403, "forbidden", "")
		h.wantError(h.do("POST", "/api/v1/expected-machines:import?mode=upsert", h.admin, emSample, nil), 422, "invalid", "mode")
		bad := strings.Replace(emSample, `"loopback_ip": "10.180.62.211"`, `"loopback_ip": "10.180.62.21"`, 1)
		before := h.do("GET", "/api/v1/expected-machines", h.viewer, "", nil).Body.String()
		h.wantError(h.do("POST", "/api/v1/expected-machines:import?mode=merge", h.admin, bad, nil), 422, "invalid", "expected_machines[0].expected_dpus[1].loopback_ip")
		if after := h.do("GET", "/api/v1/expected-machines", h.viewer, "", nil).Body.String(); after != before {
			t.Fatalf("refused import changed state:\n%s\n%s", before, after)
		}
		r = h.do("POST", "/api/v1/expected-machines:import", h.admin, emSample, nil)
		var res struct {
			Mode                        string
			Created, Updated, Unchanged int
			Items                       []allocator.ExpectedMachine
		}
		if err := json.Unmarshal(r.Body.Bytes(), &res); r.Code != 200 || err != nil {
			t.Fatalf("merge: %d %s", r.Code, r.Body)
		}
		if res.Mode != "merge" || res.Created != 1 || res.Updated != 1 || len(res.Items) != 2 || res.Items[1].ID != keep.ID ||
			res.Items[1].ChassisSerialNumber != "CHS-000102" || strings.Contains(r.Body.String(), "factory-default") {
			t.Fatalf("merge answer %s", r.Body)
		}
		if g := h.do("GET", "/api/v1/expected-machines/0a:00:00:00:01:09", h.viewer, "", nil); g.Code != 200 {
			t.Fatalf("merge removed a record absent from the file: %d", g.Code)
		}
		r = h.do("POST", "/api/v1/expected-machines:import?mode=replace", h.admin, emSample, nil)
		if r.Code != 200 || !strings.Contains(r.Body.String(), `"mode":"replace"`) {
			t.Fatalf("replace: %d %s", r.Code, r.Body)
		}
		h.wantError(h.do("GET", "/api/v1/expected-machines/0a:00:00:00:01:09", h.viewer, "", nil), 404, "not_found", "")
	})
}

// DELETE /api/v1/expected-machines erases every record (admin only), and
// a query parameter (a filter meant to pick one record) is refused, not
// ignored.
func TestExpectedMachinesDeleteAllREST(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newEMHTTP(t, db)
		if r := h.do("PUT", "/api/v1/expected-machines", h.admin, emSample, nil); r.Code != 200 {
			t.Fatalf("replace-all: %d %s", r.Code, r.Body)
		}
		h.wantError(h.do("DELETE", "/api/v1/expected-machines", h.viewer, "", nil), 403, "forbidden", "")
		h.wantError(h.do("DELETE", "/api/v1/expected-machines?bmc_mac_address=0a:00:00:00:01:01", h.admin, "", nil), 422, "invalid", "bmc_mac_address")
		if r := h.do("GET", "/api/v1/expected-machines", h.viewer, "", nil); strings.Count(r.Body.String(), `"bmc_mac_address"`) != 2 {
			t.Fatalf("refused erase changed the list: %s", r.Body)
		}
		if r := h.do("DELETE", "/api/v1/expected-machines", h.admin, "", nil); r.Code != 204 {
			t.Fatalf("erase: %d %s", r.Code, r.Body)
		}
		if r := h.do("GET", "/api/v1/expected-machines", h.viewer, "", nil); r.Code != 200 || !strings.Contains(r.Body.String(), `"items":[]`) {
			t.Fatalf("list after erase: %s", r.Body)
		}
		if r := h.do("GET", "/api/v1/events?action=expected_machine.delete_all", h.viewer, "", nil); !strings.Contains(r.Body.String(), `"deleted":2`) {
			t.Fatalf("erase event: %s", r.Body)
		}
		// The reserved values are plain free values again.
		if r := h.do("GET", "/api/v1/addresses/10.180.62.211", h.viewer, "", nil); strings.Contains(r.Body.String(), `"reservation"`) {
			t.Fatalf("reservation survived the erase: %s", r.Body)
		}
	})
}
