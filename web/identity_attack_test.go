package web_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

func sessionsStored(t *testing.T, db *gorm.DB) int64 {
	var n int64
	if err := db.Raw(`SELECT COUNT(*) FROM user_sessions`).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSSOCallbackAttacks tries the callback as an attacker would: a
// tampered state, a callback this browser never started (login CSRF: the
// attacker's own code pushed into a victim's browser), a replayed code,
// and a forged sign-in cookie. None opens a session.
func TestSSOCallbackAttacks(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		s := newSSOSite(t, db, true)
		u, _ := url.Parse(s.srv.URL)
		refused := func(t *testing.T, b *browser, cb string, status int) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodGet, cb, nil)
			res := b.do(req)
			body := readBody(t, res)
			if res.StatusCode != status {
				t.Fatalf("callback %s: %d, want %d\n%s", cb, res.StatusCode, status, clip(body))
			}
			for _, c := range res.Cookies() {
				if c.Name == "ipledger_session" && c.Value != "" {
					t.Fatalf("a session cookie was set: %s", c.Value[:3])
				}
			}
			if res := b.get("/"); res.StatusCode != http.StatusSeeOther {
				t.Fatalf("signed in after a refused callback: GET / = %d", res.StatusCode)
			}
		}
		t.Run("tampered state", func(t *testing.T) {
			b := newJarBrowser(s.consoleSite)
			cb := s.signIn(b, "", "alice", "alice-pw")
			q := cb.Query()
			q.Set("state", q.Get("state")+"A")
			cb.RawQuery = q.Encode()
			refused(t, b, cb.String(), http.StatusUnauthorized)
		})
		t.Run("callback not started in this browser (login CSRF)", func(t *testing.T) {
			attacker := newJarBrowser(s.consoleSite)
			cb := s.signIn(attacker, "", "eve", "eve-pw")
			victim := newJarBrowser(s.consoleSite)
			refused(t, victim, cb.String(), http.StatusBadRequest)
			// The victim's own pending sign-in does not help the attacker.
			if _, err := s.idp.Authorize(victim.c, s.srv.URL+"/auth/oidc/login", "bob", "bob-pw"); err != nil {
				t.Fatal(err)
			}
			refused(t, victim, s.signIn(attacker, "", "alice", "alice-pw").String(), http.StatusUnauthorized)
		})
		t.Run("replayed code", func(t *testing.T) {
			b := newJarBrowser(s.consoleSite)
			cb := s.signIn(b, "", "alice", "alice-pw")
			saved := b.c.Jar.Cookies(&url.URL{Scheme: "http", Host: u.Host, Path: "/auth/oidc"})
			if res := s.finish(b, cb); res.StatusCode != http.StatusSeeOther {
				t.Fatalf("first use: %d", res.StatusCode)
			}
			other := newJarBrowser(s.consoleSite)
			other.c.Jar.SetCookies(&url.URL{Scheme: "http", Host: u.Host, Path: "/auth/oidc"}, saved)
			refused(t, other, cb.String(), http.StatusUnauthorized)
		})
		t.Run("forged sign-in cookie", func(t *testing.T) {
			b := newJarBrowser(s.consoleSite)
			cb := s.signIn(b, "", "alice", "alice-pw")
			forged := auth.SealLoginState([]byte("not the site's key, 32 bytes ..."), auth.LoginState{State: cb.Query().Get("state")}, timeNow())
			b.c.Jar.SetCookies(&url.URL{Scheme: "http", Host: u.Host, Path: "/auth/oidc"}, []*http.Cookie{{Name: auth.LoginCookie, Value: forged, Path: "/auth/oidc"}})
			refused(t, b, cb.String(), http.StatusBadRequest)
		})
		t.Run("error from the provider", func(t *testing.T) {
			b := newJarBrowser(s.consoleSite)
			refused(t, b, s.srv.URL+auth.CallbackPath+"?error=access_denied&state=x", http.StatusUnauthorized)
		})
		if n := sessionsStored(t, db); n != 1 { // the first use of the replayed code only
			t.Fatalf("%d sessions stored, want 1", n)
		}
	})
}

// TestSSONextStaysLocal: next, the page to return to after sign-in, is
// kept only when it is a path of this site.
func TestSSONextStaysLocal(t *testing.T) {
	t.Parallel()
	s := newSSOSite(t, dbtest.Open(t, models.SQLite), true)
	for next, want := range map[string]string{
		"/pools/lo-ip?state=free":    "/pools/lo-ip?state=free",
		"https://evil.example/":      "/",
		"//evil.example/x":           "/",
		"/\\evil.example":            "/",
		"/\t/evil.example":           "/",
		"javascript:alert(1)":        "/",
		"/login?next=//evil.example": "/",
		"http:evil.example":          "/",
	} {
		b := newJarBrowser(s.consoleSite)
		res := s.finish(b, s.signIn(b, next, "bob", "bob-pw"))
		if got := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || got != want {
			t.Errorf("next=%q: %d → %q, want %q", next, res.StatusCode, got, want)
		}
	}
}

// TestSSOSessionFixation: signing in never keeps a session id the
// browser had before — a planted cookie (the attacker's own session) is
// ended and replaced by a fresh one.
func TestSSOSessionFixation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		s := newSSOSite(t, db, true)
		u, _ := url.Parse(s.srv.URL)
		attacker := newJarBrowser(s.consoleSite)
		s.finish(attacker, s.signIn(attacker, "", "bob", "bob-pw"))
		planted := attacker.c.Jar.Cookies(u)
		victim := newJarBrowser(s.consoleSite)
		victim.c.Jar.SetCookies(u, planted)
		s.finish(victim, s.signIn(victim, "", "alice", "alice-pw"))
		expect(t, victim.get("/"), http.StatusOK, "user:alice")
		if victim.c.Jar.Cookies(u)[0].Value == planted[0].Value {
			t.Fatal("the session id planted before sign-in was kept")
		}
		// The planted (attacker's) session was ended: it is not alice's.
		if res := attacker.get("/"); res.StatusCode != http.StatusSeeOther {
			body := readBody(t, res)
			if strings.Contains(body, "user:alice") {
				t.Fatal("the attacker's cookie is signed in as alice")
			}
			t.Fatalf("the planted session still works: %d", res.StatusCode)
		}
	})
}

// lockedBuffer is a log sink the server writes from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSSOSecretsNowhere: the client secret, ID tokens, codes and session
// ids appear in no log line, audit event, stored row or page, through a
// sign-in, a console edit, a refused sign-in, a refused JWT, the sessions
// page and sign-out. The ID token a session keeps for sign-out's
// id_token_hint is stored sealed, and leaves only in that redirect.
func TestSSOSecretsNowhere(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, models.SQLite)
	var logs lockedBuffer
	s := newSSOSiteLog(t, db, true, &logs)
	u, _ := url.Parse(s.srv.URL)
	var pages strings.Builder
	b := newJarBrowser(s.consoleSite)
	cb := s.signIn(b, "/events", "alice", "alice-pw")
	secrets := []string{s.idp.ClientSecret, cb.Query().Get("code")}
	for _, c := range b.c.Jar.Cookies(&url.URL{Scheme: "http", Host: u.Host, Path: "/auth/oidc"}) {
		secrets = append(secrets, c.Value)
	}
	s.finish(b, cb)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "ipledger_session" {
			secrets = append(secrets, c.Value, strings.Split(c.Value, ".")[1])
		}
	}
	b.post("/pools", url.Values{"name": {"p1"}, "type": {"integer"}, "first": {"1"}, "last": {"5"}}, true)
	for _, p := range []string{"/events", "/sessions", "/"} {
		pages.WriteString(readBody(t, b.get(p)))
	}
	jwt := s.idToken(t, "bob", "bob-pw")
	secrets = append(secrets, jwt, strings.Split(jwt, ".")[2])
	res, body := apiCall(t, s.srv.URL, "GET", "/api/v1/pools", jwt[:len(jwt)-4]+"AAAA", "")
	pages.WriteString(body + res.Header.Get("WWW-Authenticate"))
	bad := newJarBrowser(s.consoleSite)
	cb2 := s.signIn(bad, "", "alice", "alice-pw")
	secrets = append(secrets, cb2.Query().Get("code"))
	q := cb2.Query()
	q.Set("state", "forged")
	cb2.RawQuery = q.Encode()
	pages.WriteString(readBody(t, bad.do(mustRequest(t, cb2.String()))))
	// alice's session row, sealed ID token and all, before sign-out
	// deletes it.
	var rows []map[string]any
	db.Raw(`SELECT * FROM user_sessions`).Scan(&rows)
	if !strings.Contains(fmt.Sprint(rows), "v1.") {
		t.Fatalf("no sealed ID token stored: %v", rows)
	}
	out := b.post("/logout", nil, true)
	pages.WriteString(readBody(t, out))
	loc, _ := url.Parse(out.Header.Get("Location"))
	hint := loc.Query().Get("id_token_hint")
	if len(strings.Split(hint, ".")) != 3 {
		t.Fatalf("sign-out sent no ID token as id_token_hint: %s", loc)
	}
	secrets = append(secrets, hint, strings.Split(hint, ".")[1], strings.Split(hint, ".")[2])

	var evs []models.AuditEvent
	db.Find(&evs)
	var stored strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&stored, "%s %s %s %s %v %v\n", e.Actor, e.Action, e.ObjectID, e.RequestID, deref(e.BeforeJSON), deref(e.AfterJSON))
	}
	fmt.Fprint(&stored, rows)
	for _, sec := range secrets {
		if len(sec) < 8 {
			t.Fatalf("secret too short to look for: %q", sec)
		}
		for where, text := range map[string]string{"log": logs.String(), "audit log or sessions table": stored.String(), "pages": pages.String()} {
			if strings.Contains(text, sec) {
				t.Errorf("a secret (%.6s…) appears in the %s", sec, where)
			}
		}
	}
	if !strings.Contains(logs.String(), `"actor":"user:alice"`) || !strings.Contains(logs.String(), `"role":"admin"`) {
		t.Fatal("the request log does not name the person and role")
	}
}

func mustRequest(t *testing.T, u string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
