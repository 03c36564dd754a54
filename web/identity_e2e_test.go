package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/database/dbtest"
)

// TestSSOBrowserLogin signs in with Chromium through the provider's own
// login page: the SSO button, the provider's form, back in the console as
// user:alice with the admin role; the audit log shows the sign-in with
// the role; signing out ends the session and, through the provider,
// comes back to the login page. IPLEDGER_SCREENSHOTS=DIR writes the
// screenshots of docs/identity.md.
func TestSSOBrowserLogin(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			if d == "postgres" {
				dbtest.RequirePostgres(t)
			}
			s := newSSOSite(t, dbtest.Open(t, d), true)
			ctx := newBrowser(t, 1280, 860)
			base := s.srv.URL
			run(t, ctx, "login page",
				chromedp.Navigate(base+"/pools"),
				poll(`document.querySelector("#sso") !== null`),
			)
			if d == "sqlite" {
				screenshot(t, ctx, "login-sso", false)
			}
			run(t, ctx, "the provider's page",
				chromedp.Click(chromedp.CSS(`#sso`)),
				poll(`location.href.startsWith(`+jsString(s.idp.Issuer)+`) && document.querySelector("#username") !== null`),
				chromedp.SendKeys(chromedp.CSS(`#username`), "alice"),
				chromedp.SendKeys(chromedp.CSS(`#password`), "alice-pw"),
			)
			if d == "sqlite" {
				screenshot(t, ctx, "login-provider", false)
			}
			run(t, ctx, "back in the console",
				chromedp.Click(chromedp.CSS(`button[type=submit]`)),
				poll(`location.href === `+jsString(base+"/pools")+` && document.querySelector(".who") !== null`),
			)
			who, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(".who").innerText`))
			if err != nil || !strings.Contains(who, "user:alice") || !strings.Contains(who, "admin") {
				t.Fatalf("signed in as %q (%v), want user:alice admin", who, err)
			}
			run(t, ctx, "the audit log names the person and the role",
				chromedp.Navigate(base+"/events"),
				poll(`document.body.innerText.includes("session.open") && /user:alice\s*\(admin\)/.test(document.body.innerText)`),
			)
			if d == "sqlite" {
				screenshot(t, ctx, "login-signed-in", false)
			}
			// Sign-out goes through the provider's end_session_endpoint
			// (with the sign-in's ID token as id_token_hint), which sends
			// the browser back to the login page.
			run(t, ctx, "sign out",
				chromedp.Click(chromedp.CSS(`.who button[type=submit]`)),
				poll(`location.href === `+jsString(base+"/login")),
				chromedp.Navigate(base+"/"),
				poll(`location.pathname === "/login"`),
			)
		})
	}
}

func jsString(s string) string { return "\"" + strings.ReplaceAll(s, "\"", "\\\"") + "\"" }
