package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/poolfile"
	"github.com/ipledger/ipledger/webhook"
)

// eachDialect runs the browser test body on a believable site (see
// seedBelievableSite) on SQLite and on PostgreSQL.
func eachDialect(t *testing.T, body func(t *testing.T, site *consoleSite)) {
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			if d == models.Postgres {
				dbtest.RequirePostgres(t)
			}
			site := newConsoleSite(t, dbtest.Open(t, d))
			seedBelievableSite(t, site)
			body(t, site)
		})
	}
}

// evalJS evaluates a JavaScript expression, failing the test on error.
func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// TestMachineAuditLinkE2E: the machine page's "Audit log of the machine →"
// opens a log with the same events as the page's History (the reservation
// edit of its ExpectedMachine, its DPUs' events, its values), not only the
// events whose object is the host itself.
func TestMachineAuditLinkE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleViewer)
		host := allocator.HostMachineID("2a:00:00:00:00:31")
		run(t, ctx, "machine page",
			chromedp.Navigate(site.srv.URL+"/machines/"+host),
			poll(`document.querySelector("tr[data-event]") !== null`),
		)
		history := evalJS[[]string](t, ctx, `[...document.querySelectorAll("tr[data-event]")].map(r => r.dataset.event)`)
		actions := evalJS[[]string](t, ctx, `[...document.querySelectorAll("tr[data-event] td:nth-child(3)")].map(td => td.innerText.trim())`)
		if len(history) < 3 {
			t.Fatalf("the machine page's History lists %d events (%v); the seed gives it more", len(history), actions)
		}
		run(t, ctx, "follow the audit log link",
			chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("a")].find(a => a.innerText.includes("Audit log of the machine")).click(), true`),
			poll(`location.pathname === "/events" && document.querySelector("#events-table") !== null`),
		)
		logged := evalJS[[]string](t, ctx, `[...document.querySelectorAll("#events-table tr[data-event]")].map(r => r.dataset.event)`)
		in := map[string]bool{}
		for _, id := range logged {
			in[id] = true
		}
		for i, id := range history {
			if !in[id] {
				t.Errorf("History's event %s (%s) is not in the machine's audit log (%d events)", id, actions[i], len(logged))
			}
		}
		if len(logged) != len(history) {
			t.Errorf("the machine's audit log lists %d events, its History %d", len(logged), len(history))
		}
		if !evalJS[bool](t, ctx, `document.querySelector("#machine-scope") !== null && document.querySelector("#machine-scope").innerText.includes("rack8-u01")`) {
			t.Errorf("the machine's audit log does not say whose events it lists")
		}
	})
}

// TestRefusedSaveKeepsPasswordE2E: a save refused by the allocator
// re-renders the form; for a record with a stored password it must say the
// password is kept, not "No password stored.".
func TestRefusedSaveKeepsPasswordE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleOperator)
		run(t, ctx, "a refused save of a record with a password",
			chromedp.Navigate(site.srv.URL+"/expected-machines/"+emID(t, site, "1a:1b:1c:1d:1e:1f")+"/edit"),
			poll(`document.querySelector("#em-form") !== null && document.querySelector("#f-password").parentElement.innerText.includes("A password is stored")`),
			setInput(`.dpu-row input[name=dpu_ip]`, "10.180.62.10"),
			chromedp.Click(chromedp.CSS(`#em-form button.save`)),
			poll(`document.querySelector('.dpu-row .error[id$="-loopback_ip"]') !== null && document.querySelector('.dpu-row .error[id$="-loopback_ip"]').innerText.includes("auto-assign")`),
		)
		hint := evalJS[string](t, ctx, `document.querySelector("#f-password").parentElement.querySelector(".hint").innerText`)
		if !strings.Contains(hint, "A password is stored") {
			t.Errorf("after a refused save the password hint says %q, want that the stored password is kept", hint)
		}
		run(t, ctx, "a refused save with a new password typed",
			setInput(`#f-password`, "s3cret"),
			chromedp.Click(chromedp.CSS(`#em-form button.save`)),
			poll(`document.querySelector("#f-password").parentElement.querySelector(".hint").innerText.includes("not saved")`),
		)
		hint = evalJS[string](t, ctx, `document.querySelector("#f-password").parentElement.querySelector(".hint").innerText`)
		if !strings.Contains(hint, "keep the stored one") {
			t.Errorf("after a refused save with a password typed the hint says %q", hint)
		}
	})
}

// TestMessagesNameMachinesE2E: refusals name machines as operators know
// them. A reservation of a value another DPU holds names that DPU's serial
// and its host's name, a refused range shrink names the machines whose
// values block it, and neither shows a machine/<hash> id; the refusal of a
// pool overlapping another sits beside its field without a stray "first:".
func TestMessagesNameMachinesE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleAdmin)
		errSel := `.dpu-row .error[id$="-loopback_ip"]`
		run(t, ctx, "reserve a value another DPU holds",
			chromedp.Navigate(site.srv.URL+"/expected-machines/"+emID(t, site, "2a:00:00:00:00:32")+"/edit"),
			poll(`document.querySelector("#em-form") !== null`),
			setInput(`.dpu-row input[name=dpu_ip]`, "10.180.62.210"),
			poll(`document.querySelector('`+errSel+`').innerText.includes("10.180.62.210")`),
		)
		msg := evalJS[string](t, ctx, `document.querySelector('`+errSel+`').innerText`)
		if !strings.Contains(msg, "MT2242X00010") || !strings.Contains(msg, "rack8-u01") || strings.Contains(msg, "machine/") {
			t.Errorf("the clash with a held value says %q; want the DPU serial MT2242X00010 and host rack8-u01, no machine/<id>", msg)
		}

		run(t, ctx, "shrink a range that holds machines' values",
			chromedp.Navigate(site.srv.URL+"/pools/lo-ip"),
			chromedp.Click(chromedp.CSS(`#ranges tbody tr:last-child a[href$='/edit']`)),
			poll(`document.querySelector("dialog[open] #range-form") !== null`),
			setInput(`#re-first`, "10.180.62.230"),
			chromedp.Click(chromedp.CSS(`dialog[open] #range-form button[type=submit]`)),
			poll(`document.querySelector("dialog[open] #range-form .alert.bad, dialog[open] #range-form .error") !== null && document.querySelector("dialog[open] #range-form").innerText.includes("would leave values outside")`),
		)
		msg = evalJS[string](t, ctx, `document.querySelector("dialog[open] #range-form").innerText`)
		if strings.Contains(msg, "machine/") || !strings.Contains(msg, "rack7-u14") {
			t.Errorf("the refused shrink says %q; want the machines by name (rack7-u14), no machine/<id>", msg)
		}

		run(t, ctx, "create a pool that overlaps lo-ip",
			chromedp.Navigate(site.srv.URL+"/pools"),
			chromedp.WaitVisible(chromedp.CSS(`#create-pool`)),
			chromedp.SendKeys(chromedp.CSS(`#p-name`), "lo-dup"),
			chromedp.SetValue(chromedp.CSS(`#p-type`), "ipv4"),
			chromedp.SendKeys(chromedp.CSS(`#p-first`), "10.180.62.5"),
			chromedp.SendKeys(chromedp.CSS(`#p-last`), "10.180.62.6"),
			chromedp.Click(chromedp.CSS(`#create-pool button[type=submit]`)),
			poll(`document.querySelector("#create-pool").innerText.includes("overlap")`),
		)
		msg = evalJS[string](t, ctx, `document.querySelector("#create-pool").innerText`)
		if strings.Contains(msg, "first:") {
			t.Errorf("the overlap refusal carries a stray field prefix: %q", msg)
		}
		if !evalJS[bool](t, ctx, `document.querySelector("#p-first").closest(".field").innerText.includes("overlap")`) {
			t.Errorf("the overlap refusal is not beside the first value's field")
		}
	})
}

// TestWebhookCareE2E: deleting a webhook asks first (the dialog says what
// goes with it; cancelling keeps it), a webhook is edited and disabled
// from the console, and the page's form fields are styled like the rest.
func TestWebhookCareE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		w, err := site.hooks.CreateWebhook(context.Background(), webhook.WebhookSpec{Name: "controller", URL: "http://127.0.0.1:9/hook",
			Secret: "0123456789abcdef0123", Actions: []string{"allocation.*"}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleAdmin)
		page := site.srv.URL + "/webhooks/" + w.ID
		run(t, ctx, "the webhook page", chromedp.Navigate(page), poll(`document.querySelector("h1").innerText.includes("controller")`))
		unstyled := evalJS[[]string](t, ctx, `[...document.querySelectorAll("main form input:not([type=hidden]):not([type=checkbox]), main form select")].filter(e => !e.closest(".field")).map(e => e.id || e.name)`)
		for _, u := range unstyled {
			t.Errorf("the webhook page's field %q is not laid out as the console's other fields", u)
		}
		run(t, ctx, "delete asks first",
			chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("main a, main button")].find(b => b.innerText.includes("Delete webhook")).click(), true`),
			poll(`document.querySelector("dialog[open]") !== null && document.querySelector("dialog[open]").innerText.includes("pending deliveries")`),
			chromedp.Click(chromedp.CSS(`dialog[open] [data-close-dialog]`)),
			poll(`document.querySelector("dialog[open]") === null`),
		)
		if _, err := site.hooks.GetWebhook(context.Background(), w.ID); err != nil {
			t.Fatalf("the webhook is gone after one click and a cancel: %v", err)
		}
		run(t, ctx, "edit the webhook",
			chromedp.Click(chromedp.CSS(`#webhook-edit`)),
			poll(`document.querySelector("#w-actions") !== null && document.querySelector("#w-actions").value === "allocation.*"`),
			setInput(`#w-actions`, "allocation.*, pool.create"),
			chromedp.Click(chromedp.CSS(`#webhook-form button[type=submit]`)),
			poll(`location.pathname === "/webhooks/`+w.ID+`" && document.body.innerText.includes("pool.create")`),
		)
		run(t, ctx, "disable the webhook",
			chromedp.Click(chromedp.CSS(`#webhook-toggle`)),
			poll(`document.querySelector("#flash") !== null && document.querySelector("#flash").innerText.includes("disabled")`),
		)
		got, err := site.hooks.GetWebhook(context.Background(), w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Enabled || len(got.Actions) != 2 {
			t.Errorf("after edit and disable: enabled %t, actions %v", got.Enabled, got.Actions)
		}
		run(t, ctx, "delete after confirming",
			chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("main a, main button")].find(b => b.innerText.includes("Delete webhook")).click(), true`),
			poll(`document.querySelector("dialog[open] button[type=submit]") !== null`),
			chromedp.Click(chromedp.CSS(`dialog[open] button[type=submit]`)),
			poll(`location.pathname === "/webhooks"`),
		)
		if _, err := site.hooks.GetWebhook(context.Background(), w.ID); err == nil {
			t.Errorf("the webhook survived its confirmed delete")
		}
	})
}

// TestNamesSurviveForceDeleteE2E: after a host with an ExpectedMachine
// name is force-deleted, the audit log, the NOC and the dashboard name it
// as it was (rack7-u14, not its chassis serial); its machine link opens
// what is known of it, not a 404; /quarantine lists its DPU's quarantined
// value by the DPU's serial with who quarantined it, and an admin
// unquarantines from there while a viewer sees no control and is refused.
func TestNamesSurviveForceDeleteE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		host := allocator.HostMachineID("1a:1b:1c:1d:1e:20")
		ctx0 := audit.WithActor(context.Background(), "console:bob", "")
		if _, err := site.a.DeleteMachine(ctx0, host, true); err != nil {
			t.Fatalf("force delete: %v", err)
		}
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleAdmin)
		run(t, ctx, "the audit log names the deleted host",
			chromedp.Navigate(site.srv.URL+"/events?action=machine.force_delete"),
			poll(`document.querySelector("#events-table tr[data-event]") !== null`),
		)
		if txt := evalJS[string](t, ctx, `document.querySelector("#events-table").innerText`); !strings.Contains(txt, "rack7-u14") {
			t.Errorf("the audit log does not name the force-deleted host rack7-u14:\n%s", clip(txt))
		}
		run(t, ctx, "the dashboard names it", chromedp.Navigate(site.srv.URL+"/"), poll(`document.querySelector("h1") !== null`))
		if txt := evalJS[string](t, ctx, `document.body.innerText`); !strings.Contains(txt, "rack7-u14") {
			t.Errorf("the dashboard's recent events do not name rack7-u14")
		}
		run(t, ctx, "the NOC names it", chromedp.Navigate(site.srv.URL+"/noc"), poll(`document.querySelector("#noc-force-deletes") !== null`))
		if txt := evalJS[string](t, ctx, `document.querySelector("#noc-force-deletes").innerText`); !strings.Contains(txt, "rack7-u14") {
			t.Errorf("the NOC's force deletes say %q, want rack7-u14", txt)
		}
		run(t, ctx, "the deleted host's link opens its history",
			chromedp.Navigate(site.srv.URL+"/machines/"+host),
			poll(`document.querySelector("h1") !== null && document.querySelector("h1").innerText.includes("rack7-u14")`),
			poll(`document.querySelector("tr[data-event]") !== null && document.body.innerText.includes("machine.force_delete")`),
		)
		run(t, ctx, "the quarantine list, from the pools page",
			chromedp.Navigate(site.srv.URL+"/pools"),
			chromedp.Click(chromedp.CSS(`#quarantine-link`)),
			poll(`location.pathname === "/quarantine"`),
			poll(`document.querySelector("#quarantine tbody tr") !== null`),
		)
		rows := evalJS[[]string](t, ctx, `[...document.querySelectorAll("#quarantine tbody tr")].map(r => r.innerText)`)
		var row string
		for _, r := range rows {
			if strings.Contains(r, "MT2242X00003") {
				row = r
			}
		}
		if row == "" || !strings.Contains(row, "console:bob") || strings.Contains(row, "machine/") {
			t.Fatalf("the quarantine list has no row naming DPU MT2242X00003 quarantined by console:bob: %q", rows)
		}
		if !evalJS[bool](t, ctx, `[...document.querySelectorAll("#quarantine tbody tr")].some(r => r.innerText.includes("SN-LAB-1") || r.innerText.includes("MT2242X00099"))`) {
			t.Errorf("the quarantine list misses the values of the seed's other force-deleted host")
		}
		value := evalJS[string](t, ctx, `[...document.querySelectorAll("#quarantine tbody tr")].find(r => r.innerText.includes("MT2242X00003")).querySelector("td:nth-child(2)").innerText.trim()`)
		run(t, ctx, "unquarantine from the list",
			chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("#quarantine tbody tr")].find(r => r.innerText.includes("MT2242X00003")).querySelector("a.button").click(), true`),
			poll(`document.querySelector("dialog[open] button[type=submit]") !== null`),
			chromedp.Click(chromedp.CSS(`dialog[open] button[type=submit]`)),
			poll(`location.pathname === "/quarantine" && document.querySelector("#flash") !== null && document.querySelector("#flash").innerText.includes("free again")`),
		)
		if evalJS[bool](t, ctx, `[...document.querySelectorAll("#quarantine tbody tr td:nth-child(2)")].some(td => td.innerText.trim() === "`+value+`")`) {
			t.Errorf("the unquarantined value %s is still listed", value)
		}

		viewer := newBrowser(t, 1280, 900)
		signIn(t, viewer, site, auth.RoleViewer)
		run(t, viewer, "a viewer's quarantine list", chromedp.Navigate(site.srv.URL+"/quarantine"), poll(`document.querySelector("#quarantine tbody tr") !== null`))
		if evalJS[bool](t, viewer, `document.querySelector("#quarantine a[href*='unquarantine']") !== null`) {
			t.Errorf("a viewer sees an unquarantine control")
		}
		b := site.login(auth.RoleViewer)
		res := b.post("/pools/lo-ip/unquarantine", url.Values{"value": {"10.180.62.5"}}, true)
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("a viewer's unquarantine post answers %d, want 403", res.StatusCode)
		}
		// An invalid unquarantine post through htmx answers 422 with the
		// dialog's form, not a 303 to a flash.
		admin := site.login(auth.RoleAdmin)
		res = admin.htmx(http.MethodPost, "/pools/lo-ip/unquarantine", url.Values{"value": {"not-an-address"}})
		body := readBody(t, res)
		if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "not-an-address") {
			t.Errorf("an invalid unquarantine through htmx answers %d:\n%s", res.StatusCode, clip(body))
		}
	})
}

// TestListsE2E: a viewer's machine list has no "Actions ▾" menu; the
// search says "matches", never "match(es)"; an IPv6 pool's filter shows
// an IPv6 example; a row menu closes when the dialog of one of its actions
// opens; a DPU page links to its host's actions instead of showing the
// host's buttons.
func TestListsE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		viewer := newBrowser(t, 1280, 900)
		signIn(t, viewer, site, auth.RoleViewer)
		run(t, viewer, "a viewer's machine list", chromedp.Navigate(site.srv.URL+"/machines"), poll(`document.querySelector("table tbody tr") !== null`))
		if evalJS[bool](t, viewer, `document.querySelector("details.menu") !== null`) {
			t.Errorf("a viewer sees the rows' Actions ▾ menu")
		}
		run(t, viewer, "search with several matches", chromedp.Navigate(site.srv.URL+"/search?q=rack8"), poll(`document.querySelector("#hit-count") !== null`))
		if txt := evalJS[string](t, viewer, `document.querySelector("#hit-count").innerText`); strings.Contains(txt, "(es)") || !strings.Contains(txt, "matches") {
			t.Errorf("the search's count says %q", txt)
		}
		run(t, viewer, "an IPv6 pool's filter", chromedp.Navigate(site.srv.URL+"/pools/lo-ip-v6"), poll(`document.querySelector("#a-value") !== null`))
		if ph := evalJS[string](t, viewer, `document.querySelector("#a-value").placeholder`); !strings.Contains(ph, ":") {
			t.Errorf("the IPv6 pool's filter example is %q", ph)
		}

		admin := newBrowser(t, 1280, 900)
		signIn(t, admin, site, auth.RoleAdmin)
		run(t, admin, "a row's menu, then its force delete",
			chromedp.Navigate(site.srv.URL+"/machines"),
			poll(`document.querySelector("details.menu summary") !== null`),
			chromedp.Evaluate[chromedp.Void](`(() => { const d = [...document.querySelectorAll("details.menu")].find(d => d.querySelector("a[href$='action=force-delete']")); d.querySelector("summary").click(); return true })()`),
			poll(`document.querySelector("details.menu[open]") !== null`),
			chromedp.Evaluate[chromedp.Void](`document.querySelector("details.menu[open] a[href$='action=force-delete']").click(), true`),
			poll(`document.querySelector("dialog[open]") !== null`),
		)
		if evalJS[bool](t, admin, `document.querySelector("details.menu[open]") !== null`) {
			t.Errorf("the row menu stays open behind the dialog")
		}
		run(t, admin, "a DPU page", chromedp.Navigate(site.srv.URL+"/machines/"+allocator.DPUMachineID("MT2242X00002")),
			poll(`document.querySelector("h1") !== null && document.querySelector("h1").innerText.includes("MT2242X00002")`))
		if evalJS[bool](t, admin, `document.querySelector(".machine-head a[href*='action=']") !== null`) {
			t.Errorf("the DPU page shows the host's lifecycle buttons")
		}
		if !evalJS[bool](t, admin, `document.querySelector("#host-actions a[href^='/machines/`+allocator.HostMachineID("1a:1b:1c:1d:1e:20")+`']") !== null`) {
			t.Errorf("the DPU page does not link to its host's actions")
		}
	})
}

// TestNoTableScrollsAt1280E2E: at 1280 px no table scrolls sideways inside
// its frame: the dashboard's recent events, the audit log, an IPv6 pool's
// ranges, a machine page's history diff.
func TestNoTableScrollsAt1280E2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		// Long values, as a real site has them: full IPv6 addresses in
		// ranges, a long description and labels edited.
		actx := audit.WithActor(context.Background(), "token:continuous-integration-nightly", "")
		if _, err := poolfile.Load(actx, site.a, []byte(`
[pools.tenant-v6]
type = "ipv6"
ranges = [
  { start = "fd00:1234:5678:9abc:def0:1234:5678:1", end = "fd00:1234:5678:9abc:def0:1234:5678:ffff" },
  { start = "fd00:1234:5678:9abc:def0:1234:5679:0", end = "fd00:1234:5678:9abc:def0:1234:5679:ffff", auto_assign = false },
]`)); err != nil {
			t.Fatal(err)
		}
		if _, err := site.a.PatchExpectedMachine(actx, "2a:00:00:00:00:31", []byte(`{"metadata":{"name":"rack8-u01","description":"spine-facing host of the storage cluster, moved from row 7 during the 2026 re-cabling","labels":[{"key":"owner","value":"storage-platform-team@example.com"},{"key":"maintenance-window","value":"sundays-0200-0400-utc"}]}}`), nil); err != nil {
			t.Fatal(err)
		}
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleAdmin)
		for _, p := range []string{"/", "/events", "/pools/tenant-v6", "/machines/" + allocator.HostMachineID("2a:00:00:00:00:31"), "/quarantine"} {
			run(t, ctx, p, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(site.srv.URL+p), poll(`document.readyState === "complete" && document.querySelector("table") !== null`))
			wide := evalJS[[]string](t, ctx, `[...document.querySelectorAll(".table-wrap")].filter(w => w.scrollWidth > w.clientWidth + 1).map(w => (w.querySelector("table").id || w.querySelector("table").className) + ": " + w.scrollWidth + " > " + w.clientWidth)`)
			for _, w := range wide {
				t.Errorf("at 1280 px %s: a table scrolls sideways: %s", p, w)
			}
		}
	})
}
