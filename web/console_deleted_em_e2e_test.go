package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/txn"
)

// TestDeletedExpectedMachinePageE2E: the audit log's link to a deleted
// ExpectedMachine opens what the log knows of it (its name, when and by
// whom it was deleted, its last DPUs and reservations, its events), as a
// deleted machine's link does, instead of a bare 404.
func TestDeletedExpectedMachinePageE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		id := emID(t, site, "2a:00:00:00:00:32")
		ctx0 := audit.WithActor(context.Background(), "console:carol", "")
		if err := site.a.DeleteExpectedMachine(ctx0, id, txn.IfMatch{}); err != nil {
			t.Fatalf("delete ExpectedMachine: %v", err)
		}
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleViewer)
		run(t, ctx, "the delete in the audit log links the ExpectedMachine",
			chromedp.Navigate(site.srv.URL+"/events?action=expected_machine.delete"),
			poll(`document.querySelector("td.object a[href='/expected-machines/`+id+`']") !== null`),
			chromedp.Evaluate[chromedp.Void](`document.querySelector("td.object a[href='/expected-machines/`+id+`']").click(), true`),
			poll(`location.pathname === "/expected-machines/`+id+`" && document.querySelector("h1") !== null`),
		)
		h1 := evalJS[string](t, ctx, `document.querySelector("h1").innerText`)
		if !strings.Contains(h1, "rack8-u03") || !strings.Contains(h1, "deleted") {
			t.Fatalf("the deleted ExpectedMachine's page is titled %q:\n%s", h1, clip(evalJS[string](t, ctx, `document.body.innerText`)))
		}
		facts := evalJS[string](t, ctx, `document.querySelector("#deleted-em").innerText`)
		if !strings.Contains(facts, "console:carol") || !strings.Contains(facts, "2a:00:00:00:00:32") || !strings.Contains(facts, "SN-R8-U03") {
			t.Errorf("the deleted ExpectedMachine's facts are:\n%s\nwant who deleted it, its BMC MAC and chassis serial", facts)
		}
		dpus := evalJS[string](t, ctx, `document.querySelector("#deleted-em-dpus").innerText`)
		if !strings.Contains(dpus, "MT2242X00020") || !strings.Contains(dpus, "10.180.62.220") {
			t.Errorf("the deleted ExpectedMachine's DPUs are:\n%s\nwant MT2242X00020 reserving 10.180.62.220", dpus)
		}
		events := evalJS[[]string](t, ctx, `[...document.querySelectorAll("tr[data-event] td:nth-child(3)")].map(td => td.innerText.trim())`)
		if !strings.Contains(strings.Join(events, " "), "expected_machine.create") || !strings.Contains(strings.Join(events, " "), "expected_machine.delete") {
			t.Errorf("the deleted ExpectedMachine's history lists %v; want its create and its delete", events)
		}
	})
}
