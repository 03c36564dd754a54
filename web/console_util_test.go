package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/poolfile"
	"github.com/ipledger/ipledger/web"
	"github.com/ipledger/ipledger/webhook"
)

// consoleSite is a server under test with one token per role.
type consoleSite struct {
	t      testing.TB
	a      *allocator.Allocator
	auth   *auth.Service
	hooks  *webhook.Service
	srv    *httptest.Server
	tokens map[auth.Role]string
}

func newConsoleSite(t testing.TB, db *gorm.DB) *consoleSite {
	t.Helper()
	a := allocator.New(db, allocator.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	au := auth.New(db, auth.Options{})
	hooks := webhook.New(db, webhook.Options{})
	s := web.New(web.Config{Allocator: a, Auth: au, Webhooks: hooks, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	site := &consoleSite{t: t, a: a, auth: au, hooks: hooks, srv: srv, tokens: map[auth.Role]string{}}
	for _, r := range []auth.Role{auth.RoleViewer, auth.RoleOperator, auth.RoleAdmin} {
		tok, err := au.CreateToken(context.Background(), "test-"+string(r), r, "")
		if err != nil {
			t.Fatalf("create %s token: %v", r, err)
		}
		site.tokens[r] = tok
	}
	return site
}

func newSQLiteSite(t *testing.T) *consoleSite {
	return newConsoleSite(t, dbtest.Open(t, models.SQLite))
}

// browser is a cookie-keeping HTTP client that does not follow redirects,
// signed in as one role.
type browser struct {
	t    testing.TB
	site *consoleSite
	c    *http.Client
	csrf string
}

func (s *consoleSite) anonymous() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: s.t, site: s, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// login signs in with the role's token and reads the CSRF token from the
// dashboard.
func (s *consoleSite) login(role auth.Role) *browser {
	s.t.Helper()
	b := s.anonymous()
	res := b.post("/login", url.Values{"token": {s.tokens[role]}}, false)
	if res.StatusCode != http.StatusSeeOther {
		s.t.Fatalf("login as %s: status %d", role, res.StatusCode)
	}
	res = b.get("/")
	body := readBody(s.t, res)
	m := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		s.t.Fatalf("no CSRF token on the dashboard:\n%s", body)
	}
	b.csrf = m[1]
	return b
}

func (b *browser) do(req *http.Request) *http.Response {
	b.t.Helper()
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	return res
}

func (b *browser) get(path string) *http.Response {
	req, _ := http.NewRequest(http.MethodGet, b.site.srv.URL+path, nil)
	return b.do(req)
}

func (b *browser) htmx(method, path string, form url.Values) *http.Response {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.site.srv.URL+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("HX-Request", "true")
	req.Header.Set("X-CSRF-Token", b.csrf)
	return b.do(req)
}

// post sends a form; withCSRF adds the session's CSRF field.
func (b *browser) post(path string, form url.Values, withCSRF bool) *http.Response {
	if form == nil {
		form = url.Values{}
	}
	if withCSRF {
		form.Set("csrf_token", b.csrf)
	}
	req, _ := http.NewRequest(http.MethodPost, b.site.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

func readBody(t testing.TB, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return string(b)
}

// expect checks the status and that the body holds every want string.
func expect(t *testing.T, res *http.Response, status int, want ...string) string {
	t.Helper()
	body := readBody(t, res)
	if res.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d\n%s", res.Request.Method, res.Request.URL.Path, res.StatusCode, status, clip(body))
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Fatalf("%s %s: body lacks %q\n%s", res.Request.Method, res.Request.URL.Path, w, clip(body))
		}
	}
	return body
}

func clip(s string) string {
	if len(s) > 4000 {
		return s[:4000] + "…"
	}
	return s
}

// seedSite loads pools lo-ip (auto 10.180.62.1-199, explicit .200-.255),
// lo-ip-v6 and vlan-id through the allocator.
func seedSite(t testing.TB, a *allocator.Allocator) {
	t.Helper()
	const pools = `
[pools.lo-ip]
type = "ipv4"
ranges = [
  { start = "10.180.62.1", end = "10.180.62.200" },
  { start = "10.180.62.200", end = "10.180.63.0", auto_assign = false },
]
[pools.lo-ip-v6]
type = "ipv6"
ranges = [
  { start = "fd00:180:62::1", end = "fd00:180:62::1:0" },
  { start = "fd00:180:62:1::", end = "fd00:180:62:1::100", auto_assign = false },
]
[pools.vlan-id]
type = "integer"
ranges = [{ start = "100", end = "110" }]
`
	ctx := audit.WithActor(context.Background(), "test:seed", "")
	if _, err := poolfile.Load(ctx, a, []byte(pools)); err != nil {
		t.Fatalf("load pools: %v", err)
	}
}

// noRedirect is a client that returns redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// newHTTPTest serves s until the test ends.
func newHTTPTest(t testing.TB, s *web.Server) *httptest.Server {
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// newServer serves s and returns its URL.
func newServer(t *testing.T, s *web.Server) string { return newHTTPTest(t, s).URL }
