package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/web"
)

// sidewaysProblems lists what makes the page wider than the window: the
// document scrolling sideways, a box (a table's frame) that scrolls
// sideways inside the page, and an element reaching past the window's
// edge without a clipping box around it (an ellipsis).
const sidewaysProblems = `(() => {
  const bad = [];
  const W = document.documentElement.clientWidth;
  const name = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && typeof e.className === "string" ? "." + e.className.trim().replace(/ +/g, ".") : "") + " «" + (e.textContent || "").trim().slice(0, 30) + "»";
  if (document.documentElement.scrollWidth > W) bad.push("the page scrolls sideways: " + document.documentElement.scrollWidth + " px > " + W + " px");
  const clipped = (e) => {
    for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
      if (getComputedStyle(p).overflowX !== "visible") return true;
    }
    return false;
  };
  for (const e of document.body.querySelectorAll("*")) {
    const cs = getComputedStyle(e);
    if (cs.display === "none" || cs.visibility === "hidden") continue;
    if ((cs.overflowX === "auto" || cs.overflowX === "scroll") && e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0) {
      bad.push("scrolls sideways inside the page: " + name(e) + " " + e.scrollWidth + " px in " + e.clientWidth + " px");
    }
    const r = e.getBoundingClientRect();
    if (r.width > 0 && (r.right > W + 1 || r.left < -1) && !clipped(e)) {
      bad.push("past the window's edge: " + name(e) + " from " + Math.round(r.left) + " to " + Math.round(r.right) + " px");
    }
  }
  return bad.slice(0, 8);
})()`

// TestNothingScrollsSidewaysE2E walks every page of the console an
// operator reaches with GET (the console's route table, so a new page is
// walked or this test fails) on a site holding the longest data the
// rules accept (seedWideData: 250-byte names in Latin, Cyrillic, CJK and
// emoji, 33-digit counts, 39-character addresses), in Chromium at
// 1280×800, and checks that nothing scrolls sideways and no element
// reaches past the window. Both databases: the pages are the same, but
// their reads (names, counts) are not.
func TestNothingScrollsSidewaysE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		ctx, walk := wideWalk(t, site)
		for _, p := range walk {
			run(t, ctx, p, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(site.srv.URL+p), poll(`document.readyState === "complete"`))
			for _, b := range evalJS[[]string](t, ctx, sidewaysProblems) {
				t.Errorf("at 1280 px %s: %s", p, b)
			}
		}
	})
}

// wideWalk seeds the site with the longest data the rules accept
// (seedWideData), signs in as an admin whose token has the longest name
// (the sessions page and every event show it) in Chromium at 1280×800,
// and returns the browser and every console page an operator reaches
// with GET: the console's route table, so a new page is walked or the
// test fails.
func wideWalk(t *testing.T, site *consoleSite) (context.Context, []string) {
	t.Helper()
	w := seedWideData(t, site)
	q := url.QueryEscape
	pages := map[string][]string{
		"/":                              {"/"},
		"/noc":                           {"/noc"},
		"/logout":                        {"/logout"},
		"/pools":                         {"/pools"},
		"/pools/:name":                   {"/pools/" + w.prefix, "/pools/" + w.huge, "/pools/" + w.longPool, "/pools/lo-ip"},
		"/pools/:name/ranges/:id/edit":   {"/pools/" + w.huge + "/ranges/" + w.rangeID + "/edit"},
		"/pools/:name/ranges/:id/remove": {"/pools/" + w.huge + "/ranges/" + w.rangeID + "/remove"},
		"/pools/:name/unquarantine":      nil, // filled from the quarantine page below
		"/events":                        {"/events", "/events?object_type=expected_machine"},
		"/quarantine":                    {"/quarantine"},
		"/webhooks":                      {"/webhooks"},
		"/webhooks/:id":                  {"/webhooks/" + w.webhookID},
		"/webhooks/:id/delete":           {"/webhooks/" + w.webhookID + "/delete"},
		"/webhooks/:id/edit":             {"/webhooks/" + w.webhookID + "/edit"},
		"/sessions":                      {"/sessions"},
		"/expected-machines":             {"/expected-machines", "/expected-machines?q=" + q("стойка")},
		"/expected-machines/new":         {"/expected-machines/new"},
		"/expected-machines/dpu-row":     {"/expected-machines/dpu-row"},
		"/expected-machines/import":      {"/expected-machines/import"},
		"/expected-machines/:id":         {"/expected-machines/" + w.emIDs[0], "/expected-machines/" + w.emIDs[2], "/expected-machines/" + w.emIDs[4]},
		"/expected-machines/:id/edit":    {"/expected-machines/" + w.emIDs[0] + "/edit", "/expected-machines/" + w.emIDs[3] + "/edit"},
		"/expected-machines/:id/delete":  {"/expected-machines/" + w.emIDs[1] + "/delete"},
		"/machines":                      {"/machines"},
		"/machines/:id":                  {"/machines/" + w.hosts[0], "/machines/" + w.hosts[3], "/machines/" + w.dpu, "/machines/" + w.gone},
		"/machines/:id/impact":           {"/machines/" + w.hosts[1] + "/impact?action=decommission", "/machines/" + w.hosts[2] + "/impact?action=force-delete"},
		"/bindings":                      {"/bindings"},
		"/search":                        {"/search?q=5a", "/search?q=" + q("стойка"), "/search?q=MT2299X", "/search?q=3fff"},
		"/api-docs":                      {"/api-docs"},
	}
	s := web.New(web.Config{Allocator: site.a, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var missing []string
	for _, r := range s.ConsoleRoutes() {
		if _, ok := pages[r.Path]; r.Method == http.MethodGet && !ok {
			missing = append(missing, r.Path)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		t.Fatalf("console pages this walk does not know how to reach (add them to the walk): %s", strings.Join(missing, ", "))
	}

	tok, err := site.auth.CreateToken(context.Background(), fill("ci-nightly-reconciler-", 128), auth.RoleAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	site.tokens[auth.RoleAdmin] = tok
	ctx := newBrowser(t, 1280, 800)
	signIn(t, ctx, site, auth.RoleAdmin)
	var walk []string
	for _, r := range s.ConsoleRoutes() {
		if r.Method == http.MethodGet {
			walk = append(walk, pages[r.Path]...)
		}
	}
	run(t, ctx, "/quarantine", chromedp.Navigate(site.srv.URL+"/quarantine"), poll(`document.readyState === "complete"`))
	walk = append(walk, evalJS[[]string](t, ctx, `[...document.querySelectorAll("a[href*='/unquarantine']")].slice(0, 1).map(a => a.getAttribute("href"))`)...)
	return ctx, walk
}
