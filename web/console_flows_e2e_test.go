package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// signIn opens the login page and signs in with the role's token.
func signIn(t *testing.T, ctx context.Context, site *consoleSite, role auth.Role) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate(site.srv.URL+"/login"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), site.tokens[role]),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		poll(`location.pathname === "/"`),
	)
}

// TestConsoleOperatorFlowsE2E drives the flows an operator new to the
// console goes through, in headless Chromium on both databases: find a DPU
// by serial from the header's search ("/" focuses it), read its machine
// page, sort a table, read an audit diff, see the pending warning before
// saving a reservation of an active DPU, and force delete a host by typing
// its name (part of its machine id does not confirm).
func TestConsoleOperatorFlowsE2E(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			if d == models.Postgres {
				dbtest.RequirePostgres(t)
			}
			site := newConsoleSite(t, dbtest.Open(t, d))
			seedBelievableSite(t, site)
			operatorFlows(t, site)
		})
	}
}

func operatorFlows(t *testing.T, site *consoleSite) {
	ctx := newBrowser(t, 1280, 900)
	base := site.srv.URL
	signIn(t, ctx, site, auth.RoleAdmin)
	dpu := allocator.DPUMachineID("MT2242X00002")
	host := allocator.HostMachineID("1a:1b:1c:1d:1e:20")

	run(t, ctx, "'/' focuses the header search; a DPU serial goes straight to its page",
		chromedp.Navigate(base+"/pools"),
		poll(`document.querySelector("#global-q") !== null`),
		chromedp.Evaluate[chromedp.Void](`document.body.dispatchEvent(new KeyboardEvent("keydown", {key: "/", bubbles: true})), true`),
		poll(`document.activeElement && document.activeElement.id === "global-q"`),
		chromedp.SendKeys(chromedp.CSS(`#global-q`), "mt2242x00002\n"),
		poll(`location.pathname === "/machines/`+dpu+`" && document.querySelector("h1").innerText.includes("MT2242X00002")`),
	)
	run(t, ctx, "the DPU page shows its host by name, its binding and what to do",
		poll(`document.body.innerText.includes("rack7-u14") && document.querySelector("#dpus .badge.reserved") !== null`),
		poll(`document.querySelector("#dpus").innerText.includes("Settled") && document.querySelector("#held-values").innerText.includes("10.180.62.201")`),
	)
	run(t, ctx, "a MAC in another spelling finds the host",
		chromedp.Navigate(base+"/search?q=1A-1B-1C-1D-1E-20"),
		poll(`location.pathname === "/machines/`+host+`"`),
		poll(`document.querySelector("h1").innerText.includes("rack7-u14") && document.querySelectorAll("#dpus tbody tr").length === 6`),
		poll(`document.body.innerText.includes("History") && document.querySelector("ul.diff") !== null`),
	)
	run(t, ctx, "several matches are grouped by kind",
		chromedp.Navigate(base+"/search?q=rack8"),
		poll(`document.querySelectorAll(".hit-group").length >= 1 && document.body.innerText.includes("rack8-u01") && document.body.innerText.includes("rack8-u03")`),
	)

	run(t, ctx, "sorting the pool's allocations by owner, then back",
		chromedp.Navigate(base+"/pools/lo-ip"),
		poll(`document.querySelector("table.allocations th.sortable") !== null`),
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("table.allocations th.sortable")[0].click(), true`),
		poll(`document.querySelector("table.allocations th").getAttribute("aria-sort") === "ascending"`),
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("table.allocations th.sortable")[0].click(), true`),
		poll(`(() => { const ip = s => s.split(".").reduce((a, b) => a * 256 + +b, 0);
			const c = [...document.querySelectorAll("table.allocations tbody tr td:first-child")].map(x => ip(x.innerText.trim()));
			return document.querySelector("table.allocations th").getAttribute("aria-sort") === "descending" && c.length > 2 && c.every((v, i) => i === 0 || c[i-1] >= v) })()`),
	)
	run(t, ctx, "the IP filter of the allocations table takes a prefix",
		chromedp.Navigate(base+"/pools/lo-ip?value=10.180.62.200/29"),
		poll(`[...document.querySelectorAll("table.allocations tbody tr td:first-child")].every(td => /^10\.180\.62\.20[0-7]/.test(td.innerText.trim()))`),
	)

	run(t, ctx, "the audit log shows the changed fields old → new",
		chromedp.Navigate(base+"/events?action=expected_machine.update"),
		poll(`[...document.querySelectorAll("ul.diff li")].some(li => li.innerText.includes("expected_dpus[0].loopback_ip") && li.innerText.includes("10.180.62.210") && li.innerText.includes("10.180.62.211"))`),
		poll(`document.querySelector("td.object a[href^='/expected-machines/']") !== null`),
	)

	em, err := site.a.GetExpectedMachine(context.Background(), "2a:00:00:00:00:31")
	if err != nil {
		t.Fatal(err)
	}
	warn := `.dpu-row .warn-msg[id$="-loopback_ip"]`
	run(t, ctx, "changing the reservation of an active DPU warns before saving",
		chromedp.Navigate(base+"/expected-machines/"+em.ID+"/edit"),
		poll(`document.querySelector('`+warn+`') !== null && document.querySelector('`+warn+`').innerText.includes("active with 10.180.62.210 and keeps it")`),
		setInput(`.dpu-row input[name=dpu_ip]`, "10.180.62.212"),
		poll(`document.querySelector('`+warn+`').innerText.includes("10.180.62.212 is reserved")`),
		setInput(`.dpu-row input[name=dpu_ip]`, "10.180.62.210"),
		poll(`document.querySelector('`+warn+`').innerText.trim() === ""`),
	)

	run(t, ctx, "force delete from the machine page: the dialog is titled with name and MAC",
		chromedp.Navigate(base+"/machines/"+host),
		poll(`document.querySelector(".machine-head a[href$='action=force-delete']") !== null`),
		chromedp.Click(chromedp.CSS(`.machine-head a[href$='action=force-delete']`)),
		poll(`document.querySelector("dialog[open]") !== null && document.querySelector("#impact-title").innerText.includes("rack7-u14") && document.querySelector("#impact-title").innerText.includes("1a:1b:1c:1d:1e:20")`),
		poll(`document.querySelector("dialog[open] button[type=submit]").disabled`),
		poll(`!document.querySelector("dialog[open] .dialog-body").innerText.includes("`+host+`")`),
	)
	run(t, ctx, "part of the machine id does not confirm; the name does",
		setInput(`#confirm-name`, host[:20]),
		poll(`document.querySelector("dialog[open] button[type=submit]").disabled`),
		setInput(`#confirm-name`, "rack7-u14"),
		poll(`!document.querySelector("dialog[open] button[type=submit]").disabled`),
		chromedp.Click(chromedp.CSS(`dialog[open] button[type=submit]`)),
		poll(`location.pathname === "/machines" && document.querySelector("#flash") !== null && document.querySelector("#flash").innerText.includes("rack7-u14")`),
		poll(`document.querySelector("#flash a.flash-link[href^='/pools/lo-ip?value=']") !== null`),
	)
	if _, err := site.a.GetMachine(context.Background(), host); err == nil {
		t.Fatal("the force delete confirmed by name did not delete the host")
	}
	run(t, ctx, "the flash link opens the quarantined value; unquarantine uses the styled dialog",
		chromedp.Click(chromedp.CSS(`#flash a.flash-link[href^='/pools/lo-ip?value=']`)),
		poll(`location.pathname === "/pools/lo-ip" && document.querySelector("table.allocations .badge.quarantined") !== null`),
		chromedp.Click(chromedp.CSS(`table.allocations a[href*='/unquarantine?value=']`)),
		poll(`document.querySelector("dialog[open] #confirm-title") !== null && document.querySelector("dialog[open]").innerText.includes("no hardware carries it")`),
		chromedp.Click(chromedp.CSS(`dialog[open] button[type=submit]`)),
		poll(`document.querySelector("#flash") !== null && document.querySelector("#flash").innerText.includes("free again")`),
	)
}

// TestConsoleNOCE2E loads the wallboard at 1920×1080 on both databases:
// fleet counts, bindings, forecasts and force deletes fill the screen
// without scrolling, the text is large enough to read across a room, and a
// refresh that cannot reach the server shows "No update since HH:MM:SS".
func TestConsoleNOCE2E(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			if d == models.Postgres {
				dbtest.RequirePostgres(t)
			}
			site := newConsoleSite(t, dbtest.Open(t, d))
			seedBelievableSite(t, site)
			ctx := newBrowser(t, 1920, 1080)
			signIn(t, ctx, site, auth.RoleViewer)
			run(t, ctx, "the wallboard fits 1920×1080 and reads across a room",
				chromedp.EmulateViewport(1920, 1080),
				chromedp.Navigate(site.srv.URL+"/noc"),
				poll(`document.querySelector("#board .kpi") !== null`),
				poll(`document.querySelectorAll(".kpi").length === 4 && document.querySelectorAll(".forecast").length >= 3`),
				poll(`document.documentElement.scrollWidth <= 1920 && document.documentElement.scrollHeight <= 1080 && innerHeight === 1080`),
				poll(`parseFloat(getComputedStyle(document.querySelector(".kpi .big")).fontSize) >= 48 && parseFloat(getComputedStyle(document.querySelector(".forecast")).fontSize) >= 20`),
				poll(`document.querySelector("#noc-force-deletes").innerText.includes("SN-LAB-1") && document.querySelector("#noc-conflicts").innerText.includes("MT2242X00020")`),
				poll(`document.querySelector(".forecast .days").innerText.length > 0 && document.body.innerText.includes("days left")`),
				poll(`document.querySelector("#noc-stale").hidden`),
			)
			screenshot(t, ctx, "noc", false)
			updated, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#board").getAttribute("data-updated")`))
			if err != nil || len(updated) != 8 {
				t.Fatalf("data-updated %q %v", updated, err)
			}
			// The server goes away: the next refresh fails and the board
			// says since when it has had no update.
			site.srv.CloseClientConnections()
			site.srv.Close()
			run(t, ctx, "a failed refresh shows the lost connection",
				chromedp.Evaluate[chromedp.Void](`htmx.ajax("GET", "/noc", {source: "#board", target: "#board", select: "#board", swap: "outerHTML"}), true`),
				poll(`!document.querySelector("#noc-stale").hidden && document.querySelector("#noc-stale").innerText.includes("No update since `+updated+`")`),
				poll(`document.body.classList.contains("stale")`),
			)
			screenshot(t, ctx, "noc-lost-connection", false)
			time.Sleep(50 * time.Millisecond)
		})
	}
}
