package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/auth/oidctest"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/web"
)

// lookalikes are user names that read as "alice" (or as another name) on
// a page and in the audit log.
var lookalikes = map[string]string{
	"variation selector":        "alice\ufe0f",
	"combining grapheme joiner": "alice\u034f",
	"Hangul filler":             "alice\u3164",
	"Braille blank":             "alice\u2800",
	"trailing spaces":           "alice   ",
	"no-break space":            "alice\u00a0",
	"fullwidth":                 "\uff41\uff4c\uff49\uff43\uff45",
	"leading combining mark":    "\u0301alice",
}

// TestLookalikeNamesRefused: a name that would read as another person's
// is refused at every door that takes a name from outside — single
// sign-on (no session, no audit event), a bearer JWT (401
// invalid_token) and the trusted proxy's header (401) — and is never
// trimmed into the plain name. A name the provider sends decomposed is
// recorded composed (NFC).
func TestLookalikeNamesRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		users := map[string]oidctest.User{"u-jose": {Username: "Jose\u0301", Password: "pw", Groups: []string{"ipam-admins"}}}
		i := 0
		for _, n := range lookalikes {
			i++
			users[fmt.Sprintf("u-%d", i)] = oidctest.User{Username: n, Password: "pw", Groups: []string{"ipam-admins"}}
		}
		s := newSSOSiteOpts(t, db, ssoOptions{inIDToken: true, users: users})
		for what, n := range lookalikes {
			b := newJarBrowser(s.consoleSite)
			res := s.finish(b, s.signIn(b, "", n, "pw"))
			if body := readBody(t, res); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "preferred_username") {
				t.Errorf("SSO as %s (%q): %d\n%s", what, n, res.StatusCode, clip(body))
			}
		}
		if n := sessionsStored(t, db); n != 0 {
			t.Fatalf("%d sessions stored for lookalike names", n)
		}
		jose := newJarBrowser(s.consoleSite)
		if res := s.finish(jose, s.signIn(jose, "", "Jose\u0301", "pw")); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("a decomposed name: %d", res.StatusCode)
		}
		if ev := events(t, db, "session.open"); len(ev) != 1 || ev[0].Actor != "user:Jos\u00e9" {
			t.Fatalf("session.open: %+v", ev)
		}

		for what, n := range lookalikes {
			now := time.Now()
			tok := s.idp.Sign(t, map[string]any{"iss": s.idp.Issuer, "sub": "u-x", "aud": s.idp.ClientID, "iat": now.Unix(),
				"exp": now.Add(5 * time.Minute).Unix(), "preferred_username": n, "groups": []string{"ipam-admins"}})
			res, body := apiCall(t, s.srv.URL, "GET", "/api/v1/pools", tok, "")
			if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != web.WWWAuthenticateInvalid {
				t.Errorf("JWT as %s (%q): %d %s", what, n, res.StatusCode, body)
			}
		}

		p := newProxySite(t, db)
		for what, n := range lookalikes {
			rec := p.do("192.0.2.10:1", "GET", "/api/v1/pools", "", "X-Forwarded-User", n, "X-Forwarded-Groups", "ipam-admins")
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("proxy header as %s (%q): %d %s", what, n, rec.Code, rec.Body)
			}
		}
		if rec := p.do("192.0.2.10:1", "GET", "/api/v1/pools", "", "X-Forwarded-User", "alice", "X-Forwarded-Groups", "ipam-admins"); rec.Code != http.StatusOK {
			t.Fatalf("the plain name through the proxy: %d", rec.Code)
		}
	})
}
