package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/auth/oidctest"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/web"
	"github.com/ipledger/ipledger/webhook"
)

// ssoSite is a console with single sign-on against an OIDC provider
// running in the test process (discovery, JWKS, code flow with PKCE,
// userinfo, end session).
type ssoSite struct {
	*consoleSite
	idp  *oidctest.Provider
	oidc *auth.OIDC
	db   *gorm.DB
	// feed is the running change feed (nil unless ssoOptions.feed).
	feed *feed.Feed
	// received holds the ID tokens ipledger received at sign-ins.
	received *idTokenRecorder
	// restart assembles the server again over the same database and
	// provider, at the same URL (a restart of serve).
	restart func()
}

// ssoOptions shape newSSOSiteOpts's site.
type ssoOptions struct {
	inIDToken bool
	log       io.Writer
	id        web.Identity
	// feed runs the change feed and the webhook worker, wired to every
	// writer as serve wires them.
	feed bool
	// issuerDown starts the provider answering 503 to everything;
	// silentIssuer points the relying party at an issuer that accepts
	// connections and never answers instead of the provider.
	issuerDown, silentIssuer bool
	// retry is the relying party's DiscoveryRetry (its default when 0).
	retry time.Duration
	// now is the relying party's clock (token times, key refreshes).
	now func() time.Time
	// users are the provider's people (default ssoUsers).
	users map[string]oidctest.User
}

var ssoUsers = map[string]oidctest.User{
	"u-alice": {Username: "alice", Password: "alice-pw", Email: "alice@example.com", Groups: []string{"staff", "ipam-admins"}},
	"u-bob":   {Username: "bob", Password: "bob-pw", Email: "bob@example.com", Groups: []string{"noc"}},
	"u-eve":   {Username: "eve", Password: "eve-pw", Email: "eve@example.com", Groups: []string{"staff"}},
}

func newSSOSite(t testing.TB, db *gorm.DB, inIDToken bool) *ssoSite {
	return newSSOSiteLog(t, db, inIDToken, io.Discard)
}

// newSSOSiteLog is newSSOSite with the server's log written to w.
func newSSOSiteLog(t testing.TB, db *gorm.DB, inIDToken bool, w io.Writer) *ssoSite {
	return newSSOSiteWith(t, db, inIDToken, w, web.Identity{OIDCName: "Test IdP"})
}

// newSSOSiteWith is newSSOSite with identity settings (OIDC is filled
// in).
func newSSOSiteWith(t testing.TB, db *gorm.DB, inIDToken bool, w io.Writer, id web.Identity) *ssoSite {
	t.Helper()
	return newSSOSiteOpts(t, db, ssoOptions{inIDToken: inIDToken, log: w, id: id})
}

// newSSOSiteOpts is newSSOSite as o says.
func newSSOSiteOpts(t testing.TB, db *gorm.DB, opt ssoOptions) *ssoSite {
	t.Helper()
	inIDToken, w, id := opt.inIDToken, opt.log, opt.id
	if w == nil {
		w = io.Discard
	}
	var mu sync.Mutex
	h := http.NotFoundHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hh := h
		mu.Unlock()
		hh.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	users := opt.users
	if users == nil {
		users = ssoUsers
	}
	idp := oidctest.Start(t, oidctest.Options{Users: users, RedirectURIs: []string{srv.URL + auth.CallbackPath},
		PostLogoutRedirectURIs: []string{srv.URL + "/login"}, GroupsInIDToken: inIDToken,
		JWTAccessTokens: true, ServiceGroups: []string{"ipam-admins"}})
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	issuer := idp.Issuer
	idp.SetDown(opt.issuerDown)
	if opt.silentIssuer {
		issuer = oidctest.Silent(t)
	}
	aopts, uopts := allocator.Options{Logger: log}, auth.Options{Logger: log}
	var fd *feed.Feed
	var hooks *webhook.Service
	if opt.feed {
		fd = feed.New(db, feed.Options{})
		hooks = webhook.New(db, webhook.Options{OnCommit: fd.Committed})
		fd.SetDeliveries(hooks)
		aopts.OnCommit, uopts.OnCommit = fd.Committed, fd.Committed
	}
	received := &idTokenRecorder{}
	var a *allocator.Allocator
	var au *auth.Service
	var o *auth.OIDC
	// start assembles the server over db, as a (re)start of serve does:
	// a new relying party, new services, nothing kept in memory.
	start := func() {
		o = auth.NewOIDC(auth.OIDCConfig{Issuer: issuer, ClientID: idp.ClientID, ClientSecret: idp.ClientSecret, DiscoveryRetry: opt.retry, Now: opt.now,
			ExternalURL: srv.URL, Roles: auth.NewRoleMap([]string{"ipam-admins"}, []string{"ipam-operators"}, []string{"noc"}), Log: log,
			HTTPClient: &http.Client{Timeout: 10 * time.Second, Transport: received}})
		if !opt.issuerDown && !opt.silentIssuer {
			// Discovery runs in the background; a sign-in before it
			// succeeds is refused as unavailable.
			testkit.WaitFor(t, 20*time.Second, o.Ready, "discovery of the test provider")
		}
		a = allocator.New(db, aopts)
		au = auth.New(db, uopts)
		id := id
		id.OIDC = o
		s := web.New(web.Config{Allocator: a, Auth: au, Logger: log, Identity: id, Feed: fd, Webhooks: hooks})
		mu.Lock()
		h = s.Handler()
		mu.Unlock()
	}
	start()
	if fd != nil {
		ctx, cancel := context.WithCancel(context.Background())
		fdone := fd.RunFeed(ctx, feed.FeedOptions{Poll: 50 * time.Millisecond})
		hdone := hooks.Run(ctx, webhook.WebhookOptions{BackoffBase: time.Millisecond, Poll: 20 * time.Millisecond})
		t.Cleanup(func() {
			srv.CloseClientConnections()
			cancel()
			<-fdone
			<-hdone
		})
	}
	site := &consoleSite{t: t, a: a, auth: au, hooks: hooks, srv: srv, tokens: map[auth.Role]string{}}
	tok, err := au.CreateToken(context.Background(), "test-admin", auth.RoleAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	site.tokens[auth.RoleAdmin] = tok
	sso := &ssoSite{consoleSite: site, idp: idp, oidc: o, db: db, feed: fd, received: received}
	sso.restart = func() {
		start()
		sso.oidc = o
	}
	return sso
}

// idTokenRecorder is the relying party's HTTP transport in these tests:
// it keeps the ID tokens of the token endpoint's answers, the ID tokens
// ipledger received at its sign-ins, in order.
type idTokenRecorder struct {
	mu  sync.Mutex
	got []string
}

func (r *idTokenRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost {
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	var tr struct {
		IDToken string `json:"id_token"`
	}
	if json.Unmarshal(body, &tr) == nil && tr.IDToken != "" {
		r.mu.Lock()
		r.got = append(r.got, tr.IDToken)
		r.mu.Unlock()
	}
	return res, nil
}

// last is the ID token ipledger received last ("" when none).
func (r *idTokenRecorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		return ""
	}
	return r.got[len(r.got)-1]
}

// signIn goes through the provider's login page from /auth/oidc/login and
// returns the callback URL the provider sent the browser to (not yet
// requested).
func (s *ssoSite) signIn(b *browser, next, user, pw string) *url.URL {
	s.t.Helper()
	start := s.srv.URL + "/auth/oidc/login"
	if next != "" {
		start += "?next=" + url.QueryEscape(next)
	}
	cb, err := s.idp.Authorize(b.c, start, user, pw)
	if err != nil {
		s.t.Fatalf("sign in as %s: %v", user, err)
	}
	if !strings.HasPrefix(cb.String(), s.srv.URL+auth.CallbackPath+"?") {
		s.t.Fatalf("the provider sent the browser to %s", cb)
	}
	return cb
}

// finish requests the callback and reads the CSRF token of the page it
// leads to.
func (s *ssoSite) finish(b *browser, cb *url.URL) *http.Response {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, cb.String(), nil)
	res := b.do(req)
	if res.StatusCode == http.StatusSeeOther {
		if m := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindStringSubmatch(readBody(s.t, b.get("/"))); m != nil {
			b.csrf = m[1]
		}
	}
	return res
}

func newJarBrowser(s *consoleSite) *browser {
	b := s.anonymous()
	jar, _ := cookiejar.New(nil)
	b.c.Jar = jar
	return b
}

func events(t testing.TB, db *gorm.DB, action string) []models.AuditEvent {
	var evs []models.AuditEvent
	if err := db.Where("action = ?", action).Order("id").Find(&evs).Error; err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestSSOSignIn: the whole sign-in through the provider, on both
// databases; groups give the role, the console acts as user:NAME, and the
// audit actor of a console edit is that person.
func TestSSOSignIn(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		s := newSSOSite(t, db, true)
		b := newJarBrowser(s.consoleSite)
		expect(t, b.get("/login"), http.StatusOK, "Sign in with Test IdP", `href="/auth/oidc/login"`, `name="token"`)
		res := s.finish(b, s.signIn(b, "/pools?x=1", "alice", "alice-pw"))
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/pools?x=1" {
			t.Fatalf("callback: %d → %q", res.StatusCode, res.Header.Get("Location"))
		}
		expect(t, b.get("/pools"), http.StatusOK, "user:alice", ">admin<")
		expect(t, b.get("/sessions"), http.StatusOK, "user:alice", "End session")

		res = b.post("/pools", url.Values{"name": {"sso-vlans"}, "type": {"integer"}, "first": {"100"}, "last": {"199"}, "auto_assign": {"on"}}, true)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("create pool: %d %s", res.StatusCode, clip(readBody(t, res)))
		}
		ev := events(t, db, "pool.create")
		if len(ev) != 1 || ev[0].Actor != "user:alice" {
			t.Fatalf("pool.create events: %+v", ev)
		}
		open := events(t, db, "session.open")
		if len(open) != 1 || open[0].Actor != "user:alice" || !strings.Contains(*open[0].AfterJSON, `"role":"admin"`) {
			t.Fatalf("session.open: %+v", open)
		}

		// bob's groups give viewer: he may read, not create.
		bb := newJarBrowser(s.consoleSite)
		s.finish(bb, s.signIn(bb, "", "bob", "bob-pw"))
		expect(t, bb.get("/"), http.StatusOK, "user:bob", ">viewer<")
		expect(t, bb.post("/pools", url.Values{"name": {"x"}, "type": {"integer"}, "first": {"1"}, "last": {"2"}}, true), http.StatusForbidden)
		expect(t, bb.get("/sessions"), http.StatusForbidden)
	})
}

// TestSSOGroupsFromUserinfo: a provider that keeps groups out of the ID
// token is asked at its userinfo endpoint.
func TestSSOGroupsFromUserinfo(t *testing.T) {
	t.Parallel()
	s := newSSOSite(t, dbtest.Open(t, models.SQLite), false)
	b := newJarBrowser(s.consoleSite)
	s.finish(b, s.signIn(b, "", "alice", "alice-pw"))
	expect(t, b.get("/"), http.StatusOK, "user:alice", ">admin<")
}

// TestSSONoGroupRefused: a person whose groups map to no role gets a 403
// page saying so and naming the claim read — and no session.
func TestSSONoGroupRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		s := newSSOSite(t, db, true)
		b := newJarBrowser(s.consoleSite)
		res := s.finish(b, s.signIn(b, "", "eve", "eve-pw"))
		body := expect(t, res, http.StatusForbidden, "No ipledger role", "<strong>eve</strong>", "<code>groups</code>", "staff")
		if strings.Contains(body, "csrf_token") {
			t.Fatal("the refusal page carries a session's CSRF token")
		}
		if res := b.get("/"); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("after a refusal GET / = %d, want the login redirect", res.StatusCode)
		}
		var n int64
		db.Raw(`SELECT COUNT(*) FROM user_sessions`).Scan(&n)
		if n != 0 {
			t.Fatalf("%d sessions stored for a person without a role", n)
		}
	})
}

// TestSSOLogoutAndEndedSessions: sign-out ends the session on the server
// and sends the browser to the provider's end_session_endpoint; an admin
// ending a session signs its holder out at the next request.
func TestSSOLogoutAndEndedSessions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		s := newSSOSite(t, db, true)
		alice, bob := newJarBrowser(s.consoleSite), newJarBrowser(s.consoleSite)
		s.finish(alice, s.signIn(alice, "", "alice", "alice-pw"))
		s.finish(bob, s.signIn(bob, "", "bob", "bob-pw"))
		u, _ := url.Parse(s.srv.URL)
		bobCookie := bob.c.Jar.Cookies(u)

		page := expect(t, alice.get("/sessions"), http.StatusOK, "user:alice", "user:bob")
		m := regexp.MustCompile(`data-session="user:bob">(?s:.*?)action="/sessions/([a-z0-9]+)/end"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no end-session form for bob:\n%s", clip(page))
		}
		expect(t, alice.post("/sessions/"+m[1]+"/end", nil, false), http.StatusForbidden) // CSRF
		expect(t, alice.post("/sessions/"+m[1]+"/end", nil, true), http.StatusSeeOther)
		if res := bob.get("/"); res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/login") {
			t.Fatalf("bob after his session was ended: %d %s", res.StatusCode, res.Header.Get("Location"))
		}
		ended := events(t, db, "session.end")
		if len(ended) != 1 || ended[0].Actor != "user:alice" || ended[0].ObjectID != "user:bob" {
			t.Fatalf("session.end events: %+v", ended)
		}

		res := alice.post("/logout", nil, true)
		loc, _ := url.Parse(res.Header.Get("Location"))
		if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc.String(), s.idp.Issuer) ||
			loc.Query().Get("post_logout_redirect_uri") != s.srv.URL+"/login" || loc.Query().Get("client_id") != s.idp.ClientID {
			t.Fatalf("logout: %d → %s", res.StatusCode, loc)
		}
		// The sign-out carries the ID token of alice's sign-in as
		// id_token_hint: an ID token for this client naming alice (which
		// the API refuses as a bearer token), and the provider takes it
		// and sends the browser back to the login page; a forged hint it
		// refuses.
		hint := loc.Query().Get("id_token_hint")
		if c := jwtClaims(t, hint); c["sub"] != "u-alice" || !strings.Contains(fmt.Sprint(c["aud"]), s.idp.ClientID) || c["nonce"] == nil {
			t.Fatalf("id_token_hint is not alice's ID token: %v", c)
		}
		if res, body := apiCall(t, s.srv.URL, "GET", "/api/v1/pools", hint, ""); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, auth.ReceivedAtSignIn) {
			t.Fatalf("id_token_hint as a bearer token: %d %s", res.StatusCode, body)
		}
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for h, want := range map[string]int{hint: http.StatusFound, hint[:len(hint)-6] + "AAAAAA": http.StatusBadRequest} {
			u := *loc
			q := u.Query()
			q.Set("id_token_hint", h)
			u.RawQuery = q.Encode()
			r, err := noFollow.Get(u.String())
			if err != nil {
				t.Fatal(err)
			}
			r.Body.Close()
			if r.StatusCode != want || (want == http.StatusFound && r.Header.Get("Location") != s.srv.URL+"/login") {
				t.Fatalf("the provider's end session with a hint: %d → %q, want %d", r.StatusCode, r.Header.Get("Location"), want)
			}
		}
		if res := alice.get("/"); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("alice after sign-out: %d", res.StatusCode)
		}
		// A copy of bob's old cookie is refused too.
		replay := newJarBrowser(s.consoleSite)
		replay.c.Jar.SetCookies(u, bobCookie)
		if res := replay.get("/"); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("an ended session's cookie still works: %d", res.StatusCode)
		}
	})
}

func timeNow() time.Time { return time.Now() }

// TestSSOOnlyWithoutTokenForm: IPLEDGER_TOKEN_LOGIN=false leaves the
// login page with the SSO button only and refuses a posted token.
func TestSSOOnlyWithoutTokenForm(t *testing.T) {
	t.Parallel()
	s := newSSOSiteWith(t, dbtest.Open(t, models.SQLite), true, io.Discard, web.Identity{OIDCName: "Corp", NoTokenLogin: true})
	b := newJarBrowser(s.consoleSite)
	body := expect(t, b.get("/login"), http.StatusOK, "Sign in with Corp")
	if strings.Contains(body, `name="token"`) {
		t.Fatal("the token form is offered")
	}
	expect(t, b.post("/login", url.Values{"token": {s.tokens[auth.RoleAdmin]}}, false), http.StatusForbidden, "turned off")
	if res := b.get("/"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("signed in with a token: %d", res.StatusCode)
	}
}
