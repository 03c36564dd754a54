package web_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/internal/testkit/browserkit"
)

// TestSearchUnicodeFormsE2E: a name stored decomposed ("e" and a
// combining acute, as some tools write it) is found by the composed text a
// keyboard types, and a name stored composed by decomposed text, in the
// header's search (the whole name opens the ExpectedMachine) and in the
// ExpectedMachines list's search (part of the name lists it).
func TestSearchUnicodeFormsE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		actx := audit.WithActor(context.Background(), "console:alice", "")
		create := func(mac, name string) string {
			em, err := site.a.CreateExpectedMachine(actx, allocator.ExpectedMachineSpec{BmcMacAddress: mac, Metadata: &allocator.Metadata{Name: name}})
			if err != nil {
				t.Fatal(err)
			}
			return em.ID
		}
		decomposed := create("6a:00:00:00:0e:01", "Cafe\u0301-Zu\u0308rich-07")
		composed := create("6a:00:00:00:0e:02", "Cr\u00e8me-br\u00fbl\u00e9e-08")
		ctx := newBrowser(t, 1280, 800)
		signIn(t, ctx, site, auth.RoleViewer)
		for _, c := range []struct{ typed, id string }{
			{"Caf\u00e9-Z\u00fcrich-07", decomposed},
			{"Cre\u0300me-bru\u0302le\u0301e-08", composed},
		} {
			run(t, ctx, "the header's search for "+c.typed,
				chromedp.Navigate(site.srv.URL+"/pools"),
				poll(`document.querySelector("#global-q") !== null`),
				setInput(`#global-q`, c.typed),
				chromedp.Evaluate[chromedp.Void](`document.querySelector("#global-q").form.requestSubmit(), true`),
				poll(`location.pathname === "/expected-machines/`+c.id+`"`),
			)
		}
		for _, c := range []struct{ typed, id string }{
			{"f\u00e9-z\u00fc", decomposed},
			{"bru\u0302le\u0301", composed},
		} {
			row := `document.querySelector('#em-table tbody a[href="/expected-machines/` + c.id + `"]') !== null`
			run(t, ctx, "the ExpectedMachines list's search for "+c.typed,
				chromedp.Navigate(site.srv.URL+"/expected-machines"),
				poll(`document.querySelector("#em-q") !== null`),
				setInput(`#em-q`, c.typed),
				poll(`new URLSearchParams(location.search).get("q") === `+browserkit.JSString(c.typed)+` && `+row),
			)
			if n := evalJS[int](t, ctx, `document.querySelectorAll("#em-table tbody a[href^='/expected-machines/']").length`); n != 1 {
				t.Errorf("the list's search for %q lists %d ExpectedMachines, want 1", c.typed, n)
			}
		}
	})
}
