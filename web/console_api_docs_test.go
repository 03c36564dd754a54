package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/ipledger/ipledger/auth"
)

// The console's API page loads the vendored Swagger UI under the
// console's Content-Security-Policy and renders one operation per REST
// route from /api/v1/openapi.json.
func TestConsoleAPIDocsE2E(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	b := site.login(auth.RoleViewer)
	expect(t, b.get("/api-docs"), http.StatusOK, `id="swagger-ui"`, `/static/swagger-ui-bundle.js`, `href="/api-docs" class="active"`)
	expect(t, site.anonymous().get("/static/swagger-ui-bundle.js"), http.StatusOK)

	ctx := newBrowser(t, 1280, 900)
	run(t, ctx, "sign in",
		chromedp.Navigate(site.srv.URL+"/login"),
		chromedp.SendKeys(chromedp.CSS(`#token`), site.tokens[auth.RoleViewer]),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		poll(`location.pathname === "/"`),
	)
	run(t, ctx, "API page renders the document",
		chromedp.Navigate(site.srv.URL+"/api-docs"),
		poll(`document.querySelectorAll(".opblock").length >= 30`),
	)
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".opblock").length`))
	if err != nil || n < 30 {
		t.Fatalf("Swagger UI shows %d operations (%v)", n, err)
	}
	screenshot(t, ctx, "api-docs", false)
}

// TestAPIDocsAuthorizeCurlE2E is what an operator does to get a curl
// that works in a terminal: signed in as admin, on the API page, click
// Authorize, paste an API token, open an operation, Try it out, Execute.
// The curl the page then shows carries Authorization: Bearer with that
// token (the page never puts one there on its own), the request ran as
// the token, and the operation's 401 example is not its 422 example.
func TestAPIDocsAuthorizeCurlE2E(t *testing.T) {
	t.Parallel()
	site := newSQLiteSite(t)
	ctx := newBrowser(t, 1280, 900)
	token := site.tokens[auth.RoleViewer]
	op := `#operations-pools-listPools`
	run(t, ctx, "sign in as admin",
		chromedp.Navigate(site.srv.URL+"/login"),
		chromedp.SendKeys(chromedp.CSS(`#token`), site.tokens[auth.RoleAdmin]),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		poll(`location.pathname === "/"`),
	)
	run(t, ctx, "API page",
		chromedp.Navigate(site.srv.URL+"/api-docs"),
		poll(`document.querySelector("`+op+`") !== null && document.querySelector(".auth-wrapper .btn.authorize") !== null`),
	)
	page, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil || strings.Contains(page, token) {
		t.Fatalf("the page holds the token before anyone pasted it (%v)", err)
	}
	run(t, ctx, "Authorize with the token",
		chromedp.Click(chromedp.CSS(`.auth-wrapper .btn.authorize`)),
		poll(`document.querySelector("#auth-bearer-value") !== null`),
		chromedp.SendKeys(chromedp.CSS(`#auth-bearer-value`), token),
		chromedp.Click(chromedp.CSS(`button[aria-label="Apply credentials"]`)),
		poll(`document.querySelector(".btn-done") !== null`),
		chromedp.Click(chromedp.CSS(`.btn-done`)),
		poll(`document.querySelector(".auth-wrapper .btn.authorize.locked") !== null`),
	)
	run(t, ctx, "open GET /pools, Try it out, Execute",
		chromedp.Click(chromedp.CSS(op+` .opblock-summary-control`)),
		poll(`document.querySelector("`+op+` .try-out__btn") !== null`),
		chromedp.Click(chromedp.CSS(op+` .try-out__btn`)),
		poll(`document.querySelector("`+op+` .btn.execute") !== null`),
		chromedp.Click(chromedp.CSS(op+` .btn.execute`)),
		poll(`document.querySelector("`+op+` .curl-command") !== null && document.querySelector("`+op+` .live-responses-table tbody .response-col_status") !== null`),
	)
	curl, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("`+op+` .curl-command").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the curl Swagger UI shows:\n%s", curl)
	if !strings.Contains(curl, "Authorization: Bearer "+token) {
		t.Errorf("the curl has no Authorization: Bearer header with the pasted token:\n%s", curl)
	}
	if strings.Contains(curl, "X-CSRF-Token") {
		t.Errorf("the curl carries the session's CSRF token:\n%s", curl)
	}
	status, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("`+op+` .live-responses-table tbody .response-col_status").innerText`))
	if err != nil || !strings.Contains(status, "200") {
		t.Errorf("Execute answered %q (%v), want 200", status, err)
	}
	example := func(code string) string {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector('`+op+` tr.response[data-code="`+code+`"] .response-col_description') || {innerText: ""}).innerText`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	e401, e422 := example("401"), example("422")
	t.Logf("401 example shown:\n%s\n422 example shown:\n%s", e401, e422)
	if !strings.Contains(e401, `"unauthorized"`) || !strings.Contains(e422, `"invalid"`) || e401 == e422 {
		t.Errorf("the 401 and 422 examples shown are not the two answers:\n401: %s\n422: %s", e401, e422)
	}
	screenshot(t, ctx, "api-docs-authorized", false)
}
