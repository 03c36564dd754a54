package web_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/web"
)

// TestProxySignOut: behind a trusted proxy the console's Sign out is the
// proxy's. With IPLEDGER_AUTH_PROXY_LOGOUT_URL the header's Sign out posts
// to /logout, which writes the person's sign-out to the audit log and
// sends the browser on to the proxy's sign-out; without it the console
// offers no
// Sign out — the header links to a page that says signing out is the
// proxy's, and a posted sign-out changes nothing.
func TestProxySignOut(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		trusted, err := auth.ParseCIDRs("127.0.0.1, ::1")
		if err != nil {
			t.Fatal(err)
		}
		site := func(db *gorm.DB, logout string) *ssoSite {
			return newSSOSiteOpts(t, db, ssoOptions{inIDToken: true, id: web.Identity{OIDCName: "Test IdP", Proxy: &auth.Proxy{
				UserHeader: "X-Forwarded-User", GroupsHeader: "X-Forwarded-Groups", Trusted: trusted, LogoutURL: logout,
				Roles: auth.NewRoleMap([]string{"ipam-admins"}, []string{"ipam-operators"}, []string{"noc"})}}})
		}
		asAlice := func(s *ssoSite, method, path, csrf string) *http.Response {
			t.Helper()
			var body *strings.Reader
			if csrf != "" {
				body = strings.NewReader("csrf_token=" + csrf)
			} else {
				body = strings.NewReader("")
			}
			req, _ := http.NewRequest(method, s.srv.URL+path, body)
			req.Header.Set("X-Forwarded-User", "alice")
			req.Header.Set("X-Forwarded-Groups", "staff,ipam-admins")
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			res, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		csrfOf := func(page string) string {
			// The page's htmx headers carry it, with or without a form.
			m := regexp.MustCompile(`X-CSRF-Token&#34;:&#34;([^&]+)&#34;`).FindStringSubmatch(page)
			if m == nil {
				t.Fatalf("no CSRF token on the page:\n%s", clip(page))
			}
			return m[1]
		}
		signOuts := func(db *gorm.DB) int { return len(events(t, db, "session.end")) }

		// Without a sign-out URL: no Sign out button, a page that says
		// whose signing out is, and a posted sign-out changes nothing.
		s := site(db, "")
		page := expect(t, asAlice(s, "GET", "/", ""), http.StatusOK, "user:alice", `id="signout-note"`, "How to sign out")
		if strings.Contains(page, `action="/logout"`) {
			t.Fatal("the console offers a Sign out that signs nobody out")
		}
		expect(t, asAlice(s, "GET", "/logout", ""), http.StatusOK, web.ProxySignOutNote)
		res := asAlice(s, "POST", "/logout", csrfOf(page))
		expect(t, res, http.StatusOK, web.ProxySignOutNote)
		if n := signOuts(db); n != 0 {
			t.Fatalf("%d sign-outs audited where none happened", n)
		}

		// With the proxy's sign-out: the button, the audit event, the
		// redirect.
		for _, logout := range []string{"/oauth2/sign_out", "https://sso.site.example/oauth2/sign_out?rd=%2F"} {
			db := dbtest.Open(t, models.DialectOf(db))
			s := site(db, logout)
			page := expect(t, asAlice(s, "GET", "/", ""), http.StatusOK, "user:alice", `action="/logout"`)
			before := signOuts(db)
			// A page that moves on to the proxy's sign-out, not a redirect
			// of the form: form-action would hold the proxy's own
			// redirects (to its identity provider) to this origin.
			esc := strings.ReplaceAll(logout, "&", "&amp;")
			expect(t, asAlice(s, "POST", "/logout", csrfOf(page)), http.StatusOK,
				`<meta http-equiv="refresh" content="0; url=`+esc+`">`, `href="`+esc+`"`)
			ev := events(t, db, "session.end")
			if len(ev) != before+1 || ev[len(ev)-1].Actor != "user:alice" || ev[len(ev)-1].ObjectID != "user:alice" ||
				ev[len(ev)-1].ActorRole == nil || *ev[len(ev)-1].ActorRole != "admin" || !strings.Contains(*ev[len(ev)-1].BeforeJSON, "signed out through the proxy") {
				t.Fatalf("%s: session.end %+v", logout, ev)
			}
			// Without the CSRF token nothing happens.
			expect(t, asAlice(s, "POST", "/logout", ""), http.StatusForbidden)
			if n := signOuts(db); n != before+1 {
				t.Fatalf("a sign-out without the CSRF token was audited")
			}
		}
	})
}
