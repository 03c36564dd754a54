package main

import (
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/internal/testkit/browserkit"
	"github.com/ipledger/ipledger/internal/testkit/idpkit"
)

// TestOAuth2ProxySignInOut: ipledger behind oauth2-proxy, which signs
// people in with Dex, each as its example configures it. A person goes
// to the proxy, signs in on Dex's login page and is in the console as
// user:alice (admin, from the groups the proxy passes on); the console's
// Sign out writes the sign-out to the audit log and goes through the
// proxy's sign-out (IPLEDGER_AUTH_PROXY_LOGOUT_URL), so the next page is
// Dex's login page, not the console.
func TestOAuth2ProxySignInOut(t *testing.T) {
	t.Parallel()
	bins := idpkit.Build(t)
	port, proxyPort := idpkit.FreePort(t), idpkit.FreePort(t)
	ipl, proxy := idpkit.Origin(port), idpkit.Origin(proxyPort)
	dex := idpkit.StartDex(t, bins, idpkit.Origin(idpkit.FreePort(t)), proxy)
	env := idpkit.Env(t, idpkit.Example(t, "ipledger-proxy.env", map[string]string{
		idpkit.ExampleBehindProxy: "127.0.0.1:" + strconv.Itoa(port), idpkit.ExampleProxyOwnPrefix: "127.0.0.1/32",
	}))
	env = append(env, "IPLEDGER_DATABASE_URL=sqlite:"+t.TempDir()+"/ipledger.db", "IPLEDGER_ADMIN_TOKEN="+mpAdminToken)
	srv := idpkit.Start(t, "ipledger", t.TempDir(), mpBinary(t), env, "serve")
	srv.WaitHTTP(t, ipl+"/readyz")
	idpkit.StartOAuth2Proxy(t, bins, dex, proxyPort, "127.0.0.1:"+strconv.Itoa(port))

	ctx := browserkit.New(t, 1280, 860)
	js := browserkit.JSString
	atDexLogin := `location.href.startsWith(` + js(dex.Issuer) + `) && document.querySelector("#login") !== null`
	browserkit.Run(t, ctx, "the proxy sends the browser to Dex's login page",
		chromedp.Navigate(proxy+"/pools"),
		browserkit.Poll(atDexLogin),
		chromedp.SendKeys(chromedp.CSS(`#login`), "alice@site.example"),
		chromedp.SendKeys(chromedp.CSS(`#password`), idpkit.AlicePassword),
	)
	browserkit.Run(t, ctx, "in the console through the proxy as alice, admin",
		chromedp.Click(chromedp.CSS(`#submit-login`)),
		browserkit.Poll(`location.href.startsWith(`+js(proxy+"/")+`) && document.querySelector(".who") !== null && /user:alice\s*admin/.test(document.querySelector(".who").innerText)`),
		browserkit.Poll(`document.querySelector(".who button[type=submit]") !== null`),
	)
	browserkit.Run(t, ctx, "sign out: through the proxy's sign-out to Dex's login page",
		chromedp.Click(chromedp.CSS(`.who button[type=submit]`)),
		browserkit.Poll(atDexLogin),
	)
	browserkit.Run(t, ctx, "the next page is not signed in",
		chromedp.Navigate(proxy+"/pools"),
		browserkit.Poll(atDexLogin),
	)
	if a := lastActor(t, ipl, "session.end"); a != "user:alice" {
		t.Fatalf("session.end by %s", a)
	}
}
