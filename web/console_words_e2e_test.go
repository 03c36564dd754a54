package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// rawFieldNames lists the headers and labels of the page that show a
// field's name as the API spells it (loopback_ip, auto_assign, owner_id:
// a word joined by "_", which the headers' capitals turn into
// LOOPBACK_IP) instead of the console's words: table headers, form
// labels and legends, the terms of a definition list, the labels a
// table's cards show on a phone (data-label), and the names screen
// readers give the form's fields. Swagger UI's rendering of the API,
// whose fields are the API's, is left out.
const rawFieldNames = `(() => {
  const raw = /[A-Za-z0-9]_[A-Za-z0-9]/;
  const bad = new Set();
  const check = (what, e, text) => {
    if (text && raw.test(text) && !e.closest("#swagger-ui")) bad.add(what + " «" + text.trim().replace(/\s+/g, " ").slice(0, 80) + "»");
  };
  for (const e of document.querySelectorAll("th, label, legend, dt")) check(e.tagName.toLowerCase(), e, e.innerText);
  for (const e of document.querySelectorAll("[data-label]")) check("data-label", e, e.getAttribute("data-label"));
  for (const e of document.querySelectorAll("input[aria-label], select[aria-label], textarea[aria-label]")) check("aria-label", e, e.getAttribute("aria-label"));
  return [...bad].slice(0, 10);
})()`

// TestConsoleLabelsUseOperatorWordsE2E walks every console page an
// operator reaches with GET (wideWalk) and checks that no header or label
// shows a raw field name: "IPv4 loopback", "Auto-assign", "Owner ID", as
// the form's messages say them (docs/console.md "Words"), on both
// databases.
func TestConsoleLabelsUseOperatorWordsE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		ctx, walk := wideWalk(t, site)
		for _, p := range walk {
			run(t, ctx, p, chromedp.Navigate(site.srv.URL+p), poll(`document.readyState === "complete"`))
			for _, b := range evalJS[[]string](t, ctx, rawFieldNames) {
				t.Errorf("%s: %s", p, b)
			}
		}
	})
}
