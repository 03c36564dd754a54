package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/auth/oidctest"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/web"
)

// quickBound is how long a page or a request may take while the issuer is
// unavailable: a correctness bound far below discovery's 10 s timeout
// (waiting on a discovery attempt would take all of it), not a
// measurement.
const quickBound = 2 * time.Second

// quick runs f and fails the test when it took longer than quickBound.
func quick[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	start := time.Now()
	v := f()
	if d := time.Since(start); d > quickBound {
		t.Fatalf("%s took %s with the issuer unavailable", what, d)
	}
	return v
}

// TestSSOIssuerUnavailable: an issuer that is down, or that accepts
// connections and never answers, stalls nothing. The login page answers
// at once with the notice that single sign-on is unavailable, starting a
// sign-in answers 503 with the same page, a bearer JWT is refused 401
// invalid_token, and token sign-in works. Once a down issuer answers
// again, the login page offers single sign-on and it works.
func TestSSOIssuerUnavailable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opt  ssoOptions
	}{
		{"down", ssoOptions{inIDToken: true, issuerDown: true, retry: 20 * time.Millisecond}},
		{"silent", ssoOptions{inIDToken: true, silentIssuer: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
				t.Parallel()
				s := newSSOSiteOpts(t, db, c.opt)
				b := newJarBrowser(s.consoleSite)
				for range 3 {
					expect(t, quick(t, "GET /login", func() *http.Response { return b.get("/login") }), http.StatusOK,
						`id="sso-unavailable"`, "Single sign-on is unavailable", `name="token"`)
					expect(t, quick(t, "GET /auth/oidc/login", func() *http.Response { return b.get("/auth/oidc/login") }),
						http.StatusServiceUnavailable, `id="sso-unavailable"`)
					res := quick(t, "a bearer JWT", func() *http.Response {
						res, _ := apiCall(t, s.srv.URL, "GET", "/api/v1/pools", "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.e30.c2ln", "")
						return res
					})
					if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != web.WWWAuthenticateInvalid {
						t.Fatalf("a JWT with the issuer unavailable: %d %q", res.StatusCode, res.Header.Get("WWW-Authenticate"))
					}
				}
				tok := newJarBrowser(s.consoleSite)
				if res := tok.post("/login", url.Values{"token": {s.tokens[auth.RoleAdmin]}}, false); res.StatusCode != http.StatusSeeOther {
					t.Fatalf("token sign-in with the issuer unavailable: %d", res.StatusCode)
				}
				expect(t, tok.get("/pools"), http.StatusOK, "console:test-admin")
				if !c.opt.issuerDown {
					return
				}
				s.idp.SetDown(false)
				deadline := time.Now().Add(20 * time.Second)
				for !strings.Contains(readBody(t, b.get("/login")), `id="sso"`) {
					if time.Now().After(deadline) {
						t.Fatal("the login page does not offer single sign-on after the issuer came back")
					}
					time.Sleep(20 * time.Millisecond)
				}
				res := s.finish(b, s.signIn(b, "/pools", "alice", "alice-pw"))
				if res.StatusCode != http.StatusSeeOther {
					t.Fatalf("sign-in after the issuer came back: %d", res.StatusCode)
				}
				expect(t, b.get("/pools"), http.StatusOK, "user:alice")
			})
		})
	}
}

// TestServeWithIssuerSilent: the server starts and serves while its
// issuer accepts connections and never answers.
func TestServeWithIssuerSilent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		o := auth.NewOIDC(auth.OIDCConfig{Issuer: oidctest.Silent(t), ClientID: "ipledger", ExternalURL: "http://127.0.0.1",
			Roles: auth.NewRoleMap([]string{"ipam-admins"}, nil, nil), Log: log})
		s := web.New(web.Config{Allocator: allocator.New(db, allocator.Options{Logger: log}), Logger: log, Identity: web.Identity{OIDC: o}})
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan string, 1)
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx, "127.0.0.1:0", func(addr string) { ready <- addr }) }()
		t.Cleanup(func() { cancel(); <-done })
		var base string
		select {
		case addr := <-ready:
			base = "http://" + addr
		case err := <-done:
			t.Fatalf("serve ended: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not start with the issuer silent")
		}
		for path, want := range map[string]string{"/readyz": "", "/login": `id="sso-unavailable"`} {
			res := quick(t, "GET "+path, func() *http.Response {
				res, err := http.Get(base + path)
				if err != nil {
					t.Fatal(err)
				}
				return res
			})
			expect(t, res, http.StatusOK, want)
		}
	})
}
