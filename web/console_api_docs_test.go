package web_test

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/ipledger/ipledger/auth"
)

// The console's API page loads the vendored Swagger UI under the
// console's Content-Security-Policy and renders one operation per REST
// route from /api/v1/openapi.json.
func TestConsoleAPIDocsE2E(t *testing.T) {
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
