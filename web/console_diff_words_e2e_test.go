package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
)

// TestAuditDiffWithoutNullE2E: the audit log's diffs never read "null".
// A reservation set on a DPU row that had none reads "— → VALUE", one
// taken away "VALUE → —", and the fields without a value on either side
// (an unset IPv6 loopback, a force-deleted host's values whose owner
// became none in quarantine, and the like) show as "—" or not at all,
// over every event of the seeded site, on both databases.
func TestAuditDiffWithoutNullE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		actx := audit.WithActor(context.Background(), "console:alice", "")
		dpus := []allocator.ExpectedDPU{{SerialNumber: "MT7100X00001"}}
		em, err := site.a.CreateExpectedMachine(actx, allocator.ExpectedMachineSpec{BmcMacAddress: "6a:00:00:00:71:01",
			Metadata: &allocator.Metadata{Name: "rack71-u01"}, ExpectedDPUs: &dpus})
		if err != nil {
			t.Fatal(err)
		}
		v4 := "10.180.62.230"
		dpus[0].LoopbackIP = &v4
		if em, err = site.a.ReplaceExpectedMachine(actx, em.ID, allocator.ExpectedMachineSpec{BmcMacAddress: em.BmcMacAddress,
			Metadata: &allocator.Metadata{Name: "rack71-u01"}, ExpectedDPUs: &dpus}, nil); err != nil {
			t.Fatal(err)
		}
		dpus[0].LoopbackIP = nil
		if _, err = site.a.ReplaceExpectedMachine(actx, em.ID, allocator.ExpectedMachineSpec{BmcMacAddress: em.BmcMacAddress,
			Metadata: &allocator.Metadata{Name: "rack71-u01"}, ExpectedDPUs: &dpus}, nil); err != nil {
			t.Fatal(err)
		}

		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleViewer)
		run(t, ctx, "the ExpectedMachine's events", chromedp.Navigate(site.srv.URL+"/events?object_type=expected_machine&object_id="+em.ID), poll(`document.querySelector("ul.diff") !== null`))
		lines := evalJS[[]string](t, ctx, `[...document.querySelectorAll("ul.diff li")].map(li => li.innerText.trim().replace(/\s+/g, " "))`)
		for _, want := range []string{"expected_dpus[0].loopback_ip — → " + v4, "expected_dpus[0].loopback_ip " + v4 + " → —"} {
			found := false
			for _, l := range lines {
				found = found || l == want
			}
			if !found {
				t.Errorf("the ExpectedMachine's events have no line %q: %q", want, lines)
			}
		}

		// Every event of the site, a hundred a page.
		run(t, ctx, "the audit log", chromedp.Navigate(site.srv.URL+"/events"), poll(`document.querySelector("#events-table ul.diff") !== null`))
		for page := 1; ; page++ {
			for _, l := range evalJS[[]string](t, ctx, `[...document.querySelectorAll("ul.diff li")].map(li => li.innerText.trim().replace(/\s+/g, " "))`) {
				if strings.Contains(" "+l+" ", " null ") {
					t.Errorf("audit log page %d: %q", page, l)
				}
			}
			next := evalJS[string](t, ctx, `(() => { const a = [...document.querySelectorAll(".pager a")].find(a => a.innerText.includes("Older events")); return a ? a.getAttribute("href") : "" })()`)
			if next == "" {
				break
			}
			run(t, ctx, "the audit log's next page", chromedp.Navigate(site.srv.URL+next), poll(`document.querySelector("#events-table") !== null`))
		}
	})
}
