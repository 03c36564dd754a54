package main

import (
	"fmt"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ipledger/ipledger/auth/oidctest"
	"github.com/ipledger/ipledger/internal/upgrade"
)

// The people of the fixture's single sign-on and the groups that give
// them their roles.
var people = []struct {
	id   string
	user oidctest.User
	role string
}{
	{"u-ada", oidctest.User{Username: "ada", Password: "upgrade-fixture-sso-pw", Email: "ada@example.test", Groups: []string{"ipledger-admins"}}, "admin"},
	{"u-bob", oidctest.User{Username: "bob", Password: "upgrade-fixture-sso-pw", Email: "bob@example.test", Groups: []string{"ipledger-viewers"}}, "viewer"},
}

// sessionTTL is the console session lifetime asked of builds that take
// IPLEDGER_SESSION_TTL: long enough that the fixture's sessions are still
// valid whenever the test runs.
const sessionTTL = "87600h"

// idp is an OpenID Connect provider in this process (auth/oidctest), for
// builds with single sign-on.
type idp struct {
	*oidctest.Provider
	tb *processTB
}

// startIdP runs the provider for a server that will listen on addr.
func startIdP(addr string) *idp {
	tb := &processTB{}
	users := map[string]oidctest.User{}
	for _, p := range people {
		users[p.id] = p.user
	}
	p := oidctest.Start(tb, oidctest.Options{Users: users, RedirectURIs: []string{"http://" + addr + "/auth/oidc/callback"}, GroupsInIDToken: true})
	return &idp{Provider: p, tb: tb}
}

// env configures a server to sign people in through the provider.
func (p *idp) env(addr string) []string {
	return []string{"IPLEDGER_OIDC_ISSUER=" + p.Issuer, "IPLEDGER_OIDC_CLIENT_ID=" + p.ClientID,
		"IPLEDGER_OIDC_CLIENT_SECRET=" + p.ClientSecret, "IPLEDGER_EXTERNAL_URL=http://" + addr,
		"IPLEDGER_ROLE_ADMIN_GROUPS=ipledger-admins", "IPLEDGER_ROLE_VIEWER_GROUPS=ipledger-viewers",
		"IPLEDGER_SESSION_TTL=" + sessionTTL}
}

func (p *idp) Close() { p.tb.cleanup() }

// processTB lets oidctest, written for tests, run in this program.
type processTB struct {
	testing.TB
	cleanups []func()
}

func (t *processTB) Helper()                   {}
func (t *processTB) Cleanup(f func())          { t.cleanups = append(t.cleanups, f) }
func (t *processTB) Fatal(args ...any)         { die("%s", fmt.Sprint(args...)) }
func (t *processTB) Fatalf(f string, a ...any) { die(f, a...) }
func (t *processTB) Logf(f string, a ...any)   { log.Printf(f, a...) }

func (t *processTB) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// sessions signs in to the console: with the viewer token on the login
// form, and each person through single sign-on where the build has it.
// It returns the session cookies.
func (s *site) sessions(p *idp, audit upgrade.Token) []upgrade.Session {
	var out []upgrade.Session
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: noRedirect}
	res, err := c.PostForm(s.admin.Base+"/login", url.Values{"token": {audit.Value}})
	if err != nil {
		die("POST /login: %v", err)
	}
	res.Body.Close()
	if sc := sessionCookie(res); sc != nil {
		out = append(out, upgrade.Session{Kind: "token", Name: audit.Name, Role: audit.Role, Cookie: sc.Name + "=" + sc.Value, Expires: sc.Expires.UTC()})
	} else {
		log.Printf("no console session from POST /login in this build (%s)", res.Status)
	}
	res, err = c.Get(s.admin.Base + "/auth/oidc/login")
	if err != nil {
		die("GET /auth/oidc/login: %v", err)
	}
	res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		log.Printf("no single sign-on in this build")
		return out
	}
	for _, person := range people {
		u := person.user
		jar, _ := cookiejar.New(nil)
		bc := &http.Client{Timeout: 30 * time.Second, Jar: jar}
		cb, err := p.Authorize(bc, s.admin.Base+"/auth/oidc/login", u.Username, u.Password)
		if err != nil {
			die("sign in %s: %v", u.Username, err)
		}
		bc.CheckRedirect = noRedirect
		res, err := bc.Get(cb.String())
		if err != nil {
			die("callback of %s: %v", u.Username, err)
		}
		res.Body.Close()
		sc := sessionCookie(res)
		if sc == nil {
			die("callback of %s: %s, no session cookie", u.Username, res.Status)
		}
		out = append(out, upgrade.Session{Kind: "sso", Name: u.Username, Role: person.role, Cookie: sc.Name + "=" + sc.Value, Expires: sc.Expires.UTC()})
	}
	return out
}

func sessionCookie(res *http.Response) *http.Cookie {
	for _, c := range res.Cookies() {
		if strings.HasSuffix(c.Name, "ipledger_session") && c.Value != "" {
			return c
		}
	}
	return nil
}
