package web

// The security pass (docs/reliability.md "Security pass"): every
// route is enumerated from the route tables (APIRoutes, ConsoleRoutes) and
// from echo's own list, so that a route added later is checked without
// anyone remembering to add it here:
//
//   - every route registered with echo is in a table or on the short list
//     of public routes of docs/api.md (health, metrics, login, static);
//   - every mutating route needs at least the operator role;
//   - anonymous callers get 401 on every API route (and are sent to the
//     login page by the console); viewers get 403 on every mutating route,
//     operators 403 on every admin route; a refused call changes nothing;
//   - a console session must carry the CSRF token on every state-changing
//     request (console forms and API calls made with the session cookie);
//   - the BMC password appears in no API answer, console page, log line,
//     metric or audit event.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/webhook"
)

// publicRoutes are the routes that need no token or session (docs/api.md:
// health, readiness, metrics, the login page and static files).
var publicRoutes = map[string]bool{
	"GET /healthz": true,
	"GET /readyz":  true,
	"GET /metrics": true,
	// The OpenAPI document of the REST API.
	"GET /api/v1/openapi.json": true,
	"GET /login":               true,
	"POST /login":              true,
	"GET /static/*":            true,
	"HEAD /static/*":           true,
	// gRPC server reflection and health, public like /healthz
	// (docs/grpc.md); the Forge RPCs are in GRPCRoutes.
	"POST /grpc.reflection.v1.ServerReflection/*":      true,
	"POST /grpc.reflection.v1alpha.ServerReflection/*": true,
	"POST /grpc.health.v1.Health/*":                    true,
}

// secTokens are one token per role.
type secTokens struct{ admin, operator, viewer string }

type secEnv struct {
	t *testing.T
	a *allocator.Allocator
	// feed and hooks are the server's change feed and webhooks (their
	// workers run only where a test starts them).
	feed  *feed.Feed
	hooks *webhook.Service
	db    *gorm.DB
	srv   *Server
	h     http.Handler
	tok   secTokens
	logs  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newSecEnv(t *testing.T, db *gorm.DB) *secEnv {
	t.Helper()
	ctx := context.Background()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	fd := feed.New(db, feed.Options{Logger: log})
	hooks := webhook.New(db, webhook.Options{Logger: log, OnCommit: fd.Committed})
	fd.SetDeliveries(hooks)
	a := allocator.New(db, allocator.Options{Logger: log, OnCommit: fd.Committed})
	au := auth.New(a.DB(), auth.Options{})
	env := &secEnv{t: t, a: a, feed: fd, hooks: hooks, db: db, logs: logs}
	var err error
	env.tok.admin = "sec-admin-" + auth.NewTokenValue()
	if _, err = au.EnsureAdminToken(ctx, env.tok.admin); err != nil {
		t.Fatal(err)
	}
	if env.tok.operator, err = au.CreateToken(ctx, "sec-operator", auth.RoleOperator, ""); err != nil {
		t.Fatal(err)
	}
	if env.tok.viewer, err = au.CreateToken(ctx, "sec-viewer", auth.RoleViewer, ""); err != nil {
		t.Fatal(err)
	}
	env.srv = New(Config{Allocator: a, Feed: fd, Webhooks: hooks, Logger: log})
	env.h = env.srv.Handler()
	return env
}

type secReq struct {
	method, path, body, token, contentType string
	cookies                                []*http.Cookie
	header                                 map[string]string
}

func (env *secEnv) do(r secReq) *httptest.ResponseRecorder {
	env.t.Helper()
	req := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
	ct := r.contentType
	if ct == "" {
		ct = "application/json"
	}
	if r.body != "" {
		req.Header.Set("Content-Type", ct)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	for _, c := range r.cookies {
		req.AddCookie(c)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	if strings.HasSuffix(req.URL.Path, ":stream") {
		// An event stream answers until its reader leaves: leave soon.
		ctx, cancel := context.WithTimeout(req.Context(), 300*time.Millisecond)
		defer cancel()
		req = req.WithContext(ctx)
	}
	rec := httptest.NewRecorder()
	env.h.ServeHTTP(rec, req)
	return rec
}

// auditCount is the number of audit events: a refused call adds none.
func (env *secEnv) auditCount() int64 {
	var n int64
	if err := env.db.Model(&models.AuditEvent{}).Count(&n).Error; err != nil {
		env.t.Fatal(err)
	}
	return n
}

// concrete turns a route pattern into a request path with sample values.
func concrete(prefix, pattern string, params map[string]string) string {
	p := strings.ReplaceAll(pattern, `\:`, "\x00")
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") {
			v, ok := params[s[1:]]
			if !ok {
				v = "sample"
			}
			parts[i] = url.PathEscape(v)
		}
	}
	return prefix + strings.ReplaceAll(strings.Join(parts, "/"), "\x00", ":")
}

var sampleParams = map[string]string{"name": "lo-ip", "id": "1", "value": "10.180.62.5", "owner_type": "endpoint", "owner_id": "pod-1"}

func isMutating(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// Every route echo serves is either in one of the two route tables or on
// the short public list; a route registered outside the tables would
// escape the role checks below.
func TestSecurityEveryRouteIsInATable(t *testing.T) {
	t.Parallel()
	env := newSecEnv(t, dbtest.Open(t, models.SQLite))
	known := map[string]bool{}
	for _, r := range env.srv.APIRoutes() {
		known[r.Method+" /api/v1"+strings.ReplaceAll(r.Path, `\:`, ":")] = true
	}
	for _, r := range env.srv.ConsoleRoutes() {
		known[r.Method+" "+r.Path] = true
	}
	for _, r := range GRPCRoutes() {
		known["POST "+r.Procedure] = true
	}
	for _, r := range env.srv.Echo().Routes() {
		if r.Method == echo.RouteNotFound {
			continue
		}
		key := r.Method + " " + strings.ReplaceAll(r.Path, `\:`, ":")
		if !known[key] && !publicRoutes[key] {
			t.Errorf("route %s is registered outside APIRoutes/ConsoleRoutes and is not a public route of docs/api.md", key)
		}
	}
	if len(env.srv.APIRoutes()) < 20 || len(env.srv.ConsoleRoutes()) < 5 {
		t.Fatalf("route tables look empty: %d API, %d console routes", len(env.srv.APIRoutes()), len(env.srv.ConsoleRoutes()))
	}
}

// A viewer reads, nothing more: every route that changes state needs at
// least the operator role in the table (logging out of the console is the
// one state change of a viewer's own session).
func TestSecurityMutatingRoutesNeedOperator(t *testing.T) {
	t.Parallel()
	env := newSecEnv(t, dbtest.Open(t, models.SQLite))
	for _, r := range env.srv.APIRoutes() {
		if isMutating(r.Method) && r.Role == auth.RoleViewer {
			t.Errorf("API route %s %s changes state but only needs %s", r.Method, r.Path, r.Role)
		}
	}
	for _, r := range env.srv.ConsoleRoutes() {
		if isMutating(r.Method) && r.Role == auth.RoleViewer && r.Path != "/logout" {
			t.Errorf("console route %s %s changes state but only needs %s", r.Method, r.Path, r.Role)
		}
	}
}

// Anonymous callers get 401 on every API route; viewers get 403 on every
// mutating route; operators 403 on every admin route; the least role of
// each route passes the role check. A refused call writes no audit event.
func TestSecurityAPIRolesPerRoute(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		env := newSecEnv(t, db)
		roleTok := map[auth.Role]string{auth.RoleViewer: env.tok.viewer, auth.RoleOperator: env.tok.operator, auth.RoleAdmin: env.tok.admin}
		for _, r := range env.srv.APIRoutes() {
			path := concrete("/api/v1", r.Path, sampleParams)
			name := r.Method + " " + path
			before := env.auditCount()
			rec := env.do(secReq{method: r.Method, path: path, body: `{}`})
			if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), `"code":"unauthorized"`) {
				t.Errorf("%s anonymous: %d %s, want 401 unauthorized", name, rec.Code, rec.Body)
			}
			rec = env.do(secReq{method: r.Method, path: path, body: `{}`, token: "ipl_not_a_token"})
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("%s with an unknown token: %d, want 401", name, rec.Code)
			}
			for _, role := range []auth.Role{auth.RoleViewer, auth.RoleOperator} {
				if role.Allows(r.Role) {
					continue
				}
				rec = env.do(secReq{method: r.Method, path: path, body: `{}`, token: roleTok[role]})
				if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `"code":"forbidden"`) {
					t.Errorf("%s as %s (route needs %s): %d %s, want 403 forbidden", name, role, r.Role, rec.Code, rec.Body)
				}
			}
			if isMutating(r.Method) {
				rec = env.do(secReq{method: r.Method, path: path, body: `{}`, token: env.tok.viewer})
				if rec.Code != http.StatusForbidden {
					t.Errorf("%s as viewer: %d, want 403 (every mutating route refuses viewers)", name, rec.Code)
				}
			}
			if after := env.auditCount(); after != before {
				t.Errorf("%s: refused calls wrote %d audit events", name, after-before)
			}
			// The route's own role passes authentication and the role check
			// (the request may still fail validation: 4xx other than 401/403).
			rec = env.do(secReq{method: r.Method, path: path, body: `{}`, token: roleTok[r.Role]})
			if rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden {
				t.Errorf("%s as %s (its least role): %d %s", name, r.Role, rec.Code, rec.Body)
			}
		}
	})
}

var csrfFieldRE = regexp.MustCompile(`name="csrf_token"[^>]*value="([^"]+)"`)

// login signs in with tok through the console's login form and returns the
// session cookie and the session's CSRF token (read from a page's form).
func (env *secEnv) login(tok string) ([]*http.Cookie, string) {
	env.t.Helper()
	rec := env.do(secReq{method: http.MethodPost, path: "/login", body: url.Values{"token": {tok}}.Encode(),
		contentType: "application/x-www-form-urlencoded"})
	if rec.Code != http.StatusSeeOther {
		env.t.Fatalf("login: %d %s", rec.Code, rec.Body)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) == 0 {
		env.t.Fatal("login set no cookie")
	}
	for _, c := range cookies {
		if c.Name == SessionCookie && (!c.HttpOnly || c.SameSite != http.SameSiteLaxMode) {
			env.t.Errorf("session cookie %s: HttpOnly=%v SameSite=%v, want HttpOnly and Lax", c.Name, c.HttpOnly, c.SameSite)
		}
	}
	page := env.do(secReq{method: http.MethodGet, path: "/pools", cookies: cookies})
	m := csrfFieldRE.FindStringSubmatch(page.Body.String())
	if page.Code != http.StatusOK || m == nil {
		env.t.Fatalf("GET /pools with a session: %d, CSRF field found: %v", page.Code, m != nil)
	}
	return cookies, m[1]
}

// The console: anonymous callers are sent to the login page (or get 401
// for htmx), a viewer's session gets 403 on every operator/admin route, and
// every state-changing console request without the session's CSRF token —
// or with a wrong one — is 403 and changes nothing. API calls made with the
// session cookie need the CSRF token too.
func TestSecurityConsoleRolesAndCSRF(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		env := newSecEnv(t, db)
		adminCk, adminCSRF := env.login(env.tok.admin)
		viewerCk, viewerCSRF := env.login(env.tok.viewer)
		if adminCSRF == viewerCSRF {
			t.Fatal("two sessions share one CSRF token")
		}
		form := "application/x-www-form-urlencoded"
		for _, r := range env.srv.ConsoleRoutes() {
			path := concrete("", r.Path, sampleParams)
			name := r.Method + " " + path
			before := env.auditCount()
			rec := env.do(secReq{method: r.Method, path: path, body: "csrf_token=x", contentType: form})
			if !(rec.Code == http.StatusUnauthorized || (rec.Code >= 300 && rec.Code < 400 && strings.HasPrefix(rec.Header().Get("Location"), "/login"))) {
				t.Errorf("%s anonymous: %d (Location %q), want a redirect to /login or 401", name, rec.Code, rec.Header().Get("Location"))
			}
			if !auth.RoleViewer.Allows(r.Role) {
				rec = env.do(secReq{method: r.Method, path: path, body: "csrf_token=" + url.QueryEscape(viewerCSRF), contentType: form, cookies: viewerCk})
				if rec.Code != http.StatusForbidden {
					t.Errorf("%s as viewer (route needs %s): %d, want 403", name, r.Role, rec.Code)
				}
			}
			if isMutating(r.Method) {
				for _, bad := range []string{"", "csrf_token=" + url.QueryEscape(viewerCSRF), "csrf_token=forged"} {
					rec = env.do(secReq{method: r.Method, path: path, body: bad, contentType: form, cookies: adminCk})
					if rec.Code != http.StatusForbidden {
						t.Errorf("%s as admin with CSRF body %q: %d, want 403", name, bad, rec.Code)
					}
				}
			}
			if after := env.auditCount(); after != before {
				t.Errorf("%s: refused calls wrote %d audit events", name, after-before)
			}
		}
		// The right token passes the CSRF check, in the form or the header.
		rec := env.do(secReq{method: http.MethodPost, path: "/pools", contentType: form, cookies: adminCk,
			body: url.Values{"csrf_token": {adminCSRF}, "name": {"csrf-ok"}, "type": {"integer"}, "first": {"1"}, "last": {"9"}}.Encode()})
		if rec.Code == http.StatusForbidden || rec.Code == http.StatusUnauthorized {
			t.Errorf("POST /pools with the session's CSRF token: %d %s", rec.Code, rec.Body)
		}
		// API calls with the session cookie: CSRF required for writes.
		body := `{"name":"csrf-api","type":"integer","ranges":[{"first":"1","last":"9"}]}`
		before := env.auditCount()
		rec = env.do(secReq{method: http.MethodPost, path: "/api/v1/pools", body: body, cookies: adminCk})
		if rec.Code != http.StatusForbidden {
			t.Errorf("POST /api/v1/pools with a session cookie and no CSRF token: %d, want 403", rec.Code)
		}
		if env.auditCount() != before {
			t.Error("a refused session write changed state")
		}
		rec = env.do(secReq{method: http.MethodPost, path: "/api/v1/pools", body: body, cookies: adminCk, header: map[string]string{CSRFHeader: adminCSRF}})
		if rec.Code != http.StatusCreated {
			t.Errorf("POST /api/v1/pools with session and CSRF header: %d %s, want 201", rec.Code, rec.Body)
		}
	})
}

// The BMC password is write-only: after creating, replacing, patching and
// importing ExpectedMachines that carry it and ingesting their host, no API
// answer of any GET route, no console page, no metric, no log line and no
// audit event contains it.
func TestSecurityBMCPasswordNeverShown(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		env := newSecEnv(t, db)
		secret := "Bmc-S3cret-" + auth.NewTokenValue()[4:20]
		secret2 := secret + "-second"
		adm := env.tok.admin
		var seen []string
		record := func(what string, rec *httptest.ResponseRecorder) {
			seen = append(seen, what+"\n"+rec.Header().Get("ETag")+"\n"+rec.Body.String())
		}
		mustDo := func(r secReq, want ...int) *httptest.ResponseRecorder {
			t.Helper()
			rec := env.do(r)
			record(r.method+" "+r.path, rec)
			for _, w := range want {
				if rec.Code == w {
					return rec
				}
			}
			t.Fatalf("%s %s: %d %s", r.method, r.path, rec.Code, strings.ReplaceAll(rec.Body.String(), secret, "<secret>"))
			return rec
		}
		mustDo(secReq{method: "POST", path: "/api/v1/pools", token: adm, body: `{"name":"lo-ip","type":"ipv4","ranges":[{"first":"10.180.62.1","last":"10.180.62.199","auto_assign":true},{"first":"10.180.62.200","last":"10.180.62.254","auto_assign":false}]}`}, 201)
		em := fmt.Sprintf(`{"bmc_mac_address":"1a:1b:1c:1d:1e:1f","bmc_username":"root","bmc_password":%q,"chassis_serial_number":"SN-SEC-1",
			"expected_dpus":[{"serial_number":"MTSEC0001","loopback_ip":"10.180.62.200"}]}`, secret)
		mustDo(secReq{method: "POST", path: "/api/v1/expected-machines", token: adm, body: em}, 201)
		mustDo(secReq{method: "PATCH", path: "/api/v1/expected-machines/1a:1b:1c:1d:1e:1f", token: adm, contentType: "application/merge-patch+json",
			body: fmt.Sprintf(`{"bmc_password":%q,"chassis_serial_number":"SN-SEC-1b"}`, secret2)}, 200)
		mustDo(secReq{method: "PUT", path: "/api/v1/expected-machines/1a:1b:1c:1d:1e:1f", token: adm,
			body: fmt.Sprintf(`{"bmc_mac_address":"1a:1b:1c:1d:1e:1f","bmc_username":"root","bmc_password":%q,"chassis_serial_number":"SN-SEC-1"}`, secret)}, 200)
		mustDo(secReq{method: "PUT", path: "/api/v1/expected-machines", token: adm,
			body: fmt.Sprintf(`{"expected_machines":[{"bmc_mac_address":"1a:1b:1c:1d:1e:1f","bmc_username":"root","bmc_password":%q,"chassis_serial_number":"SN-SEC-1"},
				{"bmc_mac_address":"2a:2b:2c:2d:2e:2f","bmc_username":"admin","bmc_password":%q,"chassis_serial_number":"SN-SEC-2"}]}`, secret, secret2)}, 200)
		// A refused write that carries the password must not echo it either.
		mustDo(secReq{method: "POST", path: "/api/v1/expected-machines", token: adm,
			body: fmt.Sprintf(`{"bmc_mac_address":"2a:2b:2c:2d:2e:2f","bmc_password":%q}`, secret)}, 409, 422)
		mustDo(secReq{method: "POST", path: "/api/v1/expected-machines", token: adm,
			body: fmt.Sprintf(`{"bmc_mac_address":"not-a-mac","bmc_password":%q}`, secret)}, 422)
		mustDo(secReq{method: "POST", path: "/api/v1/site-explorer/reports", token: adm,
			body: `{"bmc_mac_address":"1a:1b:1c:1d:1e:1f","chassis_serial_number":"SN-SEC-1","dpus":[{"serial_number":"MTSEC0001"}]}`}, 200)

		// Every GET route of the API, with parameters taken from real data.
		params := map[string]string{"name": "lo-ip", "id": "1a:1b:1c:1d:1e:1f", "value": "10.180.62.200",
			"owner_type": allocator.OwnerTypeMachine, "owner_id": allocator.DPUMachineID("MTSEC0001")}
		for _, r := range env.srv.APIRoutes() {
			if r.Method != http.MethodGet {
				continue
			}
			rec := env.do(secReq{method: "GET", path: concrete("/api/v1", r.Path, params), token: adm})
			record("GET "+r.Path, rec)
		}
		for _, p := range []string{"/api/v1/events?limit=1000", "/api/v1/machines/" + allocator.HostMachineID("1a:1b:1c:1d:1e:1f"), "/metrics", "/healthz"} {
			record("GET "+p, env.do(secReq{method: "GET", path: p, token: adm}))
		}
		// Every console page an admin can open.
		ck, _ := env.login(adm)
		var emID string
		if err := db.Raw(`SELECT id FROM expected_machines WHERE bmc_mac_address = ?`, "1a:1b:1c:1d:1e:1f").Scan(&emID).Error; err != nil || emID == "" {
			t.Fatalf("expected machine id: %v", err)
		}
		cparams := map[string]string{"name": "lo-ip", "id": emID}
		for _, r := range env.srv.ConsoleRoutes() {
			if r.Method != http.MethodGet {
				continue
			}
			p := concrete("", r.Path, cparams)
			if strings.HasPrefix(r.Path, "/machines/") {
				p = concrete("", r.Path, map[string]string{"id": allocator.HostMachineID("1a:1b:1c:1d:1e:1f")})
			}
			record("console GET "+p, env.do(secReq{method: "GET", path: p, cookies: ck}))
			record("console GET "+p+" (htmx)", env.do(secReq{method: "GET", path: p, cookies: ck, header: map[string]string{"HX-Request": "true"}}))
		}
		var audit []string
		if err := db.Raw(`SELECT COALESCE(before_json, '') || ' ' || COALESCE(after_json, '') || ' ' || object_id FROM audit_events`).Scan(&audit).Error; err != nil {
			t.Fatal(err)
		}
		if len(audit) < 5 {
			t.Fatalf("only %d audit events: the writes above did not happen", len(audit))
		}
		seen = append(seen, "audit events\n"+strings.Join(audit, "\n"), "server log\n"+env.logs.String())
		for _, s := range seen {
			for _, pw := range []string{secret, secret2} {
				if strings.Contains(s, pw) {
					what, _, _ := strings.Cut(s, "\n")
					t.Errorf("the BMC password appears in %s", what)
				}
			}
		}
		if !strings.Contains(strings.Join(seen, "\n"), `"bmc_password_set":true`) {
			t.Error(`no answer said "bmc_password_set": true`)
		}
	})
}

// Query rules (APIQueryRoles, ConsoleQueryRoles) raise the role of a route
// when a query parameter says so: each names a route of its table, a role
// above the route's, and with each of its values the route's own role gets
// 403 naming the parameter while the rule's role passes the role check.
func TestSecurityQueryRoles(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		env := newSecEnv(t, db)
		opCk, _ := env.login(env.tok.operator)
		adminCk, _ := env.login(env.tok.admin)
		tables := []struct {
			name   string
			prefix string
			routes []Route
			rules  []QueryRole
			as     func(role auth.Role, r secReq) secReq
		}{
			{"API", "/api/v1", env.srv.APIRoutes(), env.srv.APIQueryRoles(), func(role auth.Role, r secReq) secReq {
				r.token = map[auth.Role]string{auth.RoleOperator: env.tok.operator, auth.RoleAdmin: env.tok.admin}[role]
				return r
			}},
			{"console", "", env.srv.ConsoleRoutes(), env.srv.ConsoleQueryRoles(), func(role auth.Role, r secReq) secReq {
				r.cookies = map[auth.Role][]*http.Cookie{auth.RoleOperator: opCk, auth.RoleAdmin: adminCk}[role]
				return r
			}},
		}
		for _, tb := range tables {
			if len(tb.rules) == 0 {
				t.Fatalf("%s: no query rules (the force delete has one)", tb.name)
			}
			for _, q := range tb.rules {
				var route *Route
				for i := range tb.routes {
					if tb.routes[i].Method == q.Method && tb.routes[i].Path == q.Path {
						route = &tb.routes[i]
					}
				}
				if route == nil {
					t.Errorf("%s query rule %s %s names no route of its table", tb.name, q.Method, q.Path)
					continue
				}
				if route.Role.Allows(q.Role) {
					t.Errorf("%s query rule %s %s ?%s: role %s does not raise the route's %s", tb.name, q.Method, q.Path, q.Param, q.Role, route.Role)
				}
				for _, v := range q.Values {
					path := concrete(tb.prefix, q.Path, sampleParams) + "?" + q.Param + "=" + url.QueryEscape(strings.ToUpper(v))
					before := env.auditCount()
					rec := env.do(tb.as(route.Role, secReq{method: q.Method, path: path}))
					if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), q.Param) {
						t.Errorf("%s %s %s as %s: %d %s, want 403 naming %s", tb.name, q.Method, path, route.Role, rec.Code, rec.Body, q.Param)
					}
					if env.auditCount() != before {
						t.Errorf("%s %s %s: the refused call wrote audit events", tb.name, q.Method, path)
					}
					rec = env.do(tb.as(q.Role, secReq{method: q.Method, path: path}))
					if rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden {
						t.Errorf("%s %s %s as %s: %d %s, want past the role check", tb.name, q.Method, path, q.Role, rec.Code, rec.Body)
					}
				}
			}
		}
	})
}
