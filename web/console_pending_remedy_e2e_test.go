package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
)

// TestPendingRemedyE2E: the form's warning, the flash after saving and
// the dashboard's alert tell an operator how to apply a pending
// reservation in the one wording the machine page uses ("Decommission
// and delete the host, then ingest it again"), never "until it is
// decommissioned and ingested again": a decommissioned host that reports
// again is refused until it is deleted.
func TestPendingRemedyE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleOperator)
		const stale = "decommissioned and ingested again"
		warn := `.dpu-row .warn-msg[id$="-loopback_ip"]`
		run(t, ctx, "the form of a host whose binding is pending",
			chromedp.Navigate(site.srv.URL+"/expected-machines/"+emID(t, site, "2a:00:00:00:00:31")+"/edit"),
			poll(`document.querySelector('`+warn+`') !== null && document.querySelector('`+warn+`').innerText.includes("10.180.62.210")`),
			setInput(`.dpu-row input[name=dpu_ip]`, "10.180.62.212"),
			poll(`document.querySelector('`+warn+`').innerText.includes("10.180.62.212")`),
		)
		if txt := evalJS[string](t, ctx, `document.querySelector('`+warn+`').innerText`); !strings.Contains(txt, allocator.PendingRemedy) || strings.Contains(txt, stale) {
			t.Errorf("the form's pending warning says %q; want %q", txt, allocator.PendingRemedy)
		}
		run(t, ctx, "save: the flash repeats the warning",
			chromedp.Click(chromedp.CSS(`#em-form button.save`)),
			poll(`document.querySelector("#flash") !== null && document.querySelector("#flash").innerText.includes("10.180.62.212")`),
		)
		if txt := evalJS[string](t, ctx, `document.querySelector("#flash").innerText`); !strings.Contains(txt, allocator.PendingRemedy) || strings.Contains(txt, stale) {
			t.Errorf("the flash after saving says %q; want %q", txt, allocator.PendingRemedy)
		}
		run(t, ctx, "the dashboard's pending alert",
			chromedp.Navigate(site.srv.URL+"/"),
			poll(`[...document.querySelectorAll(".alert")].some(a => a.innerText.includes("MT2242X00010"))`),
		)
		alert := evalJS[string](t, ctx, `[...document.querySelectorAll(".alert")].find(a => a.innerText.includes("MT2242X00010")).innerText`)
		if !strings.Contains(alert, allocator.PendingRemedy) || strings.Contains(alert, stale) {
			t.Errorf("the dashboard's pending alert says %q; want %q", alert, allocator.PendingRemedy)
		}
		run(t, ctx, "the machine page says the same",
			chromedp.Navigate(site.srv.URL+"/machines/"+allocator.DPUMachineID("MT2242X00010")),
			poll(`document.body.innerText.includes("pending")`),
		)
		if body := evalJS[string](t, ctx, `document.body.innerText`); !strings.Contains(body, allocator.PendingRemedy) {
			t.Errorf("the DPU's page does not say %q:\n%s", allocator.PendingRemedy, clip(body))
		}
	})
}
