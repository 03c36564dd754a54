package web_test

import (
	"slices"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit/browserkit"
	"github.com/ipledger/ipledger/models"
)

// readyJS, run in every document before its own scripts, records when
// the page is ready: its load event passed, its content is drawn (on the
// API page, the first operation Swagger UI draws from the OpenAPI
// document after the load) and painted (a task after the next animation
// frame), and the last long task (50 ms or more of script, style or
// layout: the page does not answer a click meanwhile) has ended.
// window.__ready() is that time (performance.now(), ms since the
// navigation began) once nothing has run long for a second since, else
// null.
const readyJS = `(() => {
  const api = location.pathname === "/api-docs";
  let loaded = false, drawn = !api, painted = null, busy = 0;
  new PerformanceObserver(l => {
    for (const e of l.getEntries()) busy = Math.max(busy, e.startTime + e.duration);
  }).observe({type: "longtask", buffered: true});
  const paint = () => {
    if (painted !== null || !loaded || !drawn) return;
    painted = -1;
    requestAnimationFrame(() => setTimeout(() => { painted = performance.now(); }));
  };
  addEventListener("load", () => { loaded = true; paint(); });
  if (api) {
    new MutationObserver((_, obs) => {
      if (document.querySelector("#swagger-ui .opblock")) { drawn = true; obs.disconnect(); paint(); }
    }).observe(document, {childList: true, subtree: true});
  }
  let ready = null;
  window.__ready = () => {
    if (ready !== null || painted === null || painted < 0) return ready;
    const t = Math.max(painted, busy);
    if (performance.now() - t >= 1000) ready = t;
    return ready;
  };
})()`

// BenchmarkBrowserRender measures in Chromium how long the dashboard and
// the API page take to be ready (readyJS: from the navigation's start to
// the content painted and the last long task ended), the two pages
// alternating so that both see the same load on the machine. It reports
// each page's median and the ratio of the medians: the browser's share
// of a page, which the HTTP benchmarks do not see (docs/benchmarks.md,
// "Console pages in the browser"). A speed is never a test's assertion;
// this runs only as a benchmark.
func BenchmarkBrowserRender(b *testing.B) {
	site := newConsoleSite(b, dbtest.Open(b, models.SQLite))
	seedBelievableSite(b, site)
	ctx := browserkit.New(b, 1280, 800)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: readyJS}); err != nil {
		b.Fatal(err)
	}
	browserkit.Run(b, ctx, "sign in",
		chromedp.Navigate(site.srv.URL+"/login"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), site.tokens[auth.RoleViewer]),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		browserkit.Poll(`location.pathname === "/"`),
	)
	pages := []string{"/", "/api-docs"}
	measure := func(path string) float64 {
		browserkit.Run(b, ctx, path, chromedp.Navigate(site.srv.URL+path), browserkit.Poll(`window.__ready && window.__ready() !== null`))
		ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.__ready()`))
		if err != nil {
			b.Fatalf("%s: %v", path, err)
		}
		return ms
	}
	for _, p := range pages { // the browser's caches and the server warm
		measure(p)
	}
	ms := map[string][]float64{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, p := range pages {
			ms[p] = append(ms[p], measure(p))
		}
	}
	b.StopTimer()
	median := func(xs []float64) float64 {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	dash, api := median(ms["/"]), median(ms["/api-docs"])
	b.ReportMetric(dash, "dashboard-ms")
	b.ReportMetric(api, "api-docs-ms")
	b.ReportMetric(api/dash, "api/dashboard")
}
