package web_test

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/poolfile"
	"github.com/ipledger/ipledger/webhook"
)

// TestRangeRefusalNamesValuesInOrderE2E: a refused shrink names the
// values in its way in value order, from the lowest (10.180.62.2 before
// 10.180.62.10), each value once with everything that holds it, and says
// how many more there are when it cannot name them all.
func TestRangeRefusalNamesValuesInOrderE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleAdmin)
		refusal := func(step, row, first string) string {
			t.Helper()
			run(t, ctx, step,
				chromedp.Navigate(site.srv.URL+"/pools/lo-ip"),
				chromedp.Click(chromedp.CSS(`#ranges tbody `+row+` a[href$='/edit']`)),
				poll(`document.querySelector("dialog[open] #range-form") !== null`),
				setInput(`#re-first`, first),
				chromedp.Click(chromedp.CSS(`dialog[open] #range-form button[type=submit]`)),
				poll(`document.querySelector("dialog[open] #range-form") !== null && document.querySelector("dialog[open] #range-form").innerText.includes("would leave values outside")`),
			)
			return evalJS[string](t, ctx, `document.querySelector("dialog[open] #range-form .error").innerText`)
		}

		// The seed's month of history holds the auto range's lowest ~60
		// values: more than a refusal names.
		msg := refusal("shrink the auto range past its allocations", "tr:first-child", "10.180.62.150")
		_, list, _ := strings.Cut(msg, "outside it: ")
		var named []netip.Addr
		for _, m := range regexp.MustCompile(`10\.180\.62\.\d+`).FindAllString(list, -1) {
			named = append(named, netip.MustParseAddr(m))
		}
		if len(named) < 2 || named[0] != netip.MustParseAddr("10.180.62.1") || named[1] != netip.MustParseAddr("10.180.62.2") {
			t.Errorf("the refusal does not start from the lowest values 10.180.62.1, 10.180.62.2: %q", msg)
		}
		for i := 1; i < len(named); i++ {
			if named[i].Compare(named[i-1]) <= 0 {
				t.Errorf("the refusal names %s after %s: not in value order: %q", named[i], named[i-1], msg)
				break
			}
		}
		if !regexp.MustCompile(`and \d+ more$`).MatchString(strings.TrimSpace(msg)) {
			t.Errorf("the refusal names %d values and does not say how many more are in the way: %q", len(named), msg)
		}

		// 10.180.62.200 is both allocated to MT2242X00001 and declared for
		// it: one entry saying both.
		msg = refusal("shrink the explicit range past a reserved, held value", "tr:last-child", "10.180.62.230")
		if n := strings.Count(msg, "10.180.62.200 ("); n != 1 || !strings.Contains(msg, "allocated to DPU MT2242X00001") || !strings.Contains(msg, "declared for DPU MT2242X00001") {
			t.Errorf("the refusal names 10.180.62.200 %d times, want once with its allocation and its declaration: %q", n, msg)
		}
	})
}

// TestAuditDiffNamesOwnersE2E: the audit diff of an allocation names its
// machine owner (owner_id) as the console names machines, the DPU's
// serial, not its machine_id, on the audit log and on the machine page;
// the id stays in the line's title.
func TestAuditDiffNamesOwnersE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleViewer)
		dpu := allocator.DPUMachineID("MT2242X00001")
		ownerLine := `[...document.querySelectorAll("tr[data-event] ul.diff li")].filter(li => li.querySelector(".path") && li.querySelector(".path").innerText === "owner_id" && li.querySelector("[title='` + dpu + `']"))`
		for _, page := range []string{"/events?action=allocation.create", "/machines/" + allocator.HostMachineID("1a:1b:1c:1d:1e:1f")} {
			run(t, ctx, page, chromedp.Navigate(site.srv.URL+page), poll(`document.querySelector("tr[data-event]") !== null`))
			lines := evalJS[[]string](t, ctx, ownerLine+`.map(li => li.innerText)`)
			if len(lines) == 0 {
				t.Fatalf("%s: no diff line has owner_id %s", page, dpu)
			}
			for _, l := range lines {
				if !strings.Contains(l, "MT2242X00001") || strings.Contains(l, "fm100") {
					t.Errorf("%s: the owner_id line says %q, want the DPU's serial MT2242X00001, not its machine_id", page, l)
				}
			}
		}
	})
}

// TestAuditNamesWebhooksE2E: the audit log names a webhook by its name
// (linked to its page while it exists), not "webhook 1"; a deleted one by
// the name its events recorded.
func TestAuditNamesWebhooksE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		actx := audit.WithActor(context.Background(), "console:alice", "")
		spec := func(name string) webhook.WebhookSpec {
			return webhook.WebhookSpec{Name: name, URL: "http://127.0.0.1:9/hook", Secret: "0123456789abcdef0123", Actions: []string{"allocation.*"}}
		}
		kept, err := site.hooks.CreateWebhook(actx, spec("vpc-controller"))
		if err != nil {
			t.Fatal(err)
		}
		gone, err := site.hooks.CreateWebhook(actx, spec("old-controller"))
		if err != nil {
			t.Fatal(err)
		}
		if err := site.hooks.DeleteWebhook(actx, gone.ID, nil); err != nil {
			t.Fatal(err)
		}
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleAdmin)
		run(t, ctx, "the webhooks' events", chromedp.Navigate(site.srv.URL+"/events?object_type=webhook"), poll(`document.querySelector("#events-table tr[data-event]") !== null`))
		objects := evalJS[[]string](t, ctx, `[...document.querySelectorAll("#events-table tr[data-event] td.object")].map(td => td.innerText.trim() + " -> " + (td.querySelector("a") ? td.querySelector("a").getAttribute("href") : ""))`)
		want := map[string]string{
			"webhook vpc-controller -> /webhooks/" + kept.ID: "the kept webhook's create, linked to its page",
			"webhook old-controller -> ":                     "the deleted webhook, by the name its events recorded, without a dead link",
		}
		have := map[string]bool{}
		for _, o := range objects {
			have[o] = true
		}
		for w, what := range want {
			if !have[w] {
				t.Errorf("the audit log lacks %s (%q) among %q", what, w, objects)
			}
		}
	})
}

// TestSearchNumberInSerialsE2E: a number that is only a free value of an
// integer pool (2242 of vni 2000-3000) does not jump to that pool: the
// DPUs whose serials hold it are listed, with the pool beside them.
func TestSearchNumberInSerialsE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		actx := audit.WithActor(context.Background(), "console:alice", "")
		if _, err := poolfile.Load(actx, site.a, []byte("[pools.vni]\ntype = \"integer\"\nranges = [{ start = \"2000\", end = \"3001\" }]\n")); err != nil {
			t.Fatal(err)
		}
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleViewer)
		run(t, ctx, "search 2242", chromedp.Navigate(site.srv.URL+"/search?q=2242"), poll(`document.readyState === "complete" && document.querySelector("h1") !== null`))
		if path := evalJS[string](t, ctx, `location.pathname`); path != "/search" {
			t.Fatalf("searching 2242 went to %s, not to the list of DPUs whose serials hold it", path)
		}
		body := evalJS[string](t, ctx, `document.querySelector("main").innerText`)
		for _, w := range []string{"MT2242X00001", "MT2242X00010", "vni"} {
			if !strings.Contains(body, w) {
				t.Errorf("searching 2242 does not list %s:\n%s", w, clip(body))
			}
		}
		// A number nothing else holds still goes to its pool.
		run(t, ctx, "search 2500", chromedp.Navigate(site.srv.URL+"/search?q=2500"), poll(`location.pathname === "/pools/vni"`))
	})
}

// TestExplicitRangesAlertE2E: when a pool's explicit ranges (where
// reservations live) pass 80 % while the whole pool does not, the
// dashboard raises an alert naming them (not only the pools that are full
// as a whole, while the pool card shows the explicit share in red), and
// the NOC counts the pool.
func TestExplicitRangesAlertE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		actx := audit.WithActor(context.Background(), "console:alice", "")
		for i := 230; i <= 255; i++ {
			v := fmt.Sprintf("10.180.62.%d", i)
			if _, _, err := site.a.Allocate(actx, "lo-ip", allocator.Owner{Type: "tenant", ID: "pinned-" + v}, v); err != nil {
				t.Fatal(err)
			}
		}
		for i := 202; i <= 219; i++ {
			v := fmt.Sprintf("10.180.62.%d", i)
			if i == 210 || i == 211 {
				continue
			}
			if _, _, err := site.a.Allocate(actx, "lo-ip", allocator.Owner{Type: "tenant", ID: "pinned-" + v}, v); err != nil {
				t.Fatal(err)
			}
		}
		ctx := newBrowser(t, 1920, 1080)
		signIn(t, ctx, site, auth.RoleViewer)
		run(t, ctx, "the dashboard", chromedp.Navigate(site.srv.URL+"/"), poll(`document.querySelector("section[aria-label=alerts]") !== null`))
		alerts := evalJS[string](t, ctx, `document.querySelector("section[aria-label=alerts]").innerText`)
		if strings.Contains(alerts, "No alert") || !strings.Contains(alerts, "explicit ranges of pool lo-ip") {
			t.Errorf("lo-ip's explicit ranges are past 80 %%; the dashboard's alerts say %q", alerts)
		}
		run(t, ctx, "the NOC", chromedp.Navigate(site.srv.URL+"/noc"), poll(`document.querySelector(".kpi") !== null`))
		kpi := evalJS[string](t, ctx, `[...document.querySelectorAll(".kpi")].find(k => k.innerText.includes("80")).innerText`)
		if !strings.Contains(kpi, "2/ 3") {
			t.Errorf("the NOC's pools above 80 %% say %q, want 2 of 3 (vlan-id, and lo-ip by its explicit ranges)", kpi)
		}
	})
}

// TestLifecycleDialogFocusE2E: the force delete dialog opens with the
// cursor in the field where the host's name is typed, and a decommission
// dialog on its Cancel button, never on the machine_id's copy button.
func TestLifecycleDialogFocusE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleAdmin)
		host := allocator.HostMachineID("1a:1b:1c:1d:1e:1f")
		focused := `(document.activeElement.id || document.activeElement.className || document.activeElement.tagName) + ": " + document.activeElement.innerText`
		for _, c := range []struct{ action, want string }{{"force-delete", "confirm-name: "}, {"decommission", "BUTTON: Cancel"}} {
			run(t, ctx, c.action,
				chromedp.Navigate(site.srv.URL+"/machines/"+host),
				poll(`document.querySelector(".machine-head a[href$='action=`+c.action+`']") !== null`),
				chromedp.Click(chromedp.CSS(`.machine-head a[href$='action=`+c.action+`']`)),
				poll(`document.querySelector("dialog[open] button[type=submit]") !== null`),
			)
			if got := evalJS[string](t, ctx, focused); got != c.want {
				t.Errorf("the %s dialog opens with the focus on %q, want %q", c.action, got, c.want)
			}
		}
	})
}

// TestDeleteFlashSaysWhatHappenedE2E: after a delete the flash says what
// happened to each kind of value (a reserved value returns to its
// reservation, it is not "released"), never "value(s)"; a deleted
// webhook is named.
func TestDeleteFlashSaysWhatHappenedE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		actx := audit.WithActor(context.Background(), "console:alice", "")
		host := allocator.HostMachineID("1a:1b:1c:1d:1e:1f")
		if _, err := site.a.Decommission(actx, host); err != nil {
			t.Fatal(err)
		}
		w, err := site.hooks.CreateWebhook(actx, webhook.WebhookSpec{Name: "vpc-controller", URL: "http://127.0.0.1:9/hook", Secret: "0123456789abcdef0123", Actions: []string{"*"}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleAdmin)
		flash := func(step string, actions ...chromedp.Action[chromedp.Void]) string {
			t.Helper()
			run(t, ctx, step, append(actions, poll(`document.querySelector("#flash") !== null`))...)
			return evalJS[string](t, ctx, `document.querySelector("#flash").innerText`)
		}
		// rack7-u12's DPU holds its reserved 10.180.62.200 and
		// fd00:180:62:1::c8: both go back to their reservations.
		msg := flash("delete rack7-u12",
			chromedp.Navigate(site.srv.URL+"/machines/"+host),
			chromedp.Click(chromedp.CSS(`.machine-head a[href$='action=delete']`)),
			poll(`document.querySelector("dialog[open] button[type=submit]") !== null`),
			chromedp.Click(chromedp.CSS(`dialog[open] button[type=submit]`)),
		)
		if !strings.Contains(msg, "2 values returned to their reservations") || strings.Contains(msg, "released") {
			t.Errorf("after deleting rack7-u12 the flash says %q, want its 2 values returned to their reservations", msg)
		}
		msg = flash("force delete rack7-u14",
			chromedp.Navigate(site.srv.URL+"/machines/"+allocator.HostMachineID("1a:1b:1c:1d:1e:20")),
			chromedp.Click(chromedp.CSS(`.machine-head a[href$='action=force-delete']`)),
			poll(`document.querySelector("dialog[open] #confirm-name") !== null`),
			setInput(`#confirm-name`, "rack7-u14"),
			chromedp.Click(chromedp.CSS(`dialog[open] button[type=submit]`)),
		)
		if strings.Contains(msg, "(s)") || !strings.Contains(msg, "quarantined") {
			t.Errorf("after force deleting rack7-u14 the flash says %q", msg)
		}
		msg = flash("delete the webhook",
			chromedp.Navigate(site.srv.URL+"/webhooks/"+w.ID),
			chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("main a, main button")].find(b => b.innerText.includes("Delete webhook")).click(), true`),
			poll(`document.querySelector("dialog[open] button[type=submit]") !== null`),
			chromedp.Click(chromedp.CSS(`dialog[open] button[type=submit]`)),
		)
		if !strings.Contains(msg, "vpc-controller") {
			t.Errorf("after deleting webhook vpc-controller the flash says %q", msg)
		}
	})
}

// TestSearchSaysWhatMatchedE2E: a host found by part of a text says which
// of its fields holds it (an expected DPU's serial, its BMC MAC), not
// only "ExpectedMachine rack7-u12".
func TestSearchSaysWhatMatchedE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleViewer)
		for _, c := range []struct{ q, want string }{
			{"X00001", "MT2242X00001"},
			{"1e:1f", "BMC MAC 1a:1b:1c:1d:1e:1f"},
		} {
			run(t, ctx, "search "+c.q, chromedp.Navigate(site.srv.URL+"/search?q="+c.q), poll(`document.querySelector("#hit-count") !== null || location.pathname !== "/search"`))
			row := evalJS[string](t, ctx, `(() => { const r = [...document.querySelectorAll("main tr")].find(r => r.innerText.includes("rack7-u12")); return r ? r.innerText : location.pathname })()`)
			if !strings.Contains(row, c.want) {
				t.Errorf("searching %s, rack7-u12's row says %q; want what matched: %s", c.q, row, c.want)
			}
		}
	})
}

// TestDashboardBindingAlertsBoundedE2E: many pending bindings (a batch of
// reservation edits) do not bury the dashboard: it lists a few per status
// and one line counting the rest, linked to the DPU bindings page, so the
// pool utilization stays near the top.
func TestDashboardBindingAlertsBoundedE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		actx := audit.WithActor(context.Background(), "console:alice", "")
		for mac, dpus := range map[string]string{
			"1a:1b:1c:1d:1e:1f": `[{"serial_number":"MT2242X00001","loopback_ip":"10.180.62.240","loopback_ip_v6":"fd00:180:62:1::f0"}]`,
			"1a:1b:1c:1d:1e:20": `[{"serial_number":"MT2242X00002","loopback_ip":"10.180.62.241","loopback_ip_v6":"fd00:180:62:1::f1"},{"serial_number":"MT2242X00003","loopback_ip":"10.180.62.242","loopback_ip_v6":"fd00:180:62:1::f2"}]`,
		} {
			if _, err := site.a.PatchExpectedMachine(actx, mac, []byte(`{"expected_dpus":`+dpus+`}`), nil); err != nil {
				t.Fatal(err)
			}
		}
		bindings, err := site.a.ListBindings(actx, allocator.BindingFilter{Status: allocator.BindingPending})
		if err != nil {
			t.Fatal(err)
		}
		pending := 0
		for _, b := range bindings.Items {
			for _, s := range []string{b.StatusV4, b.StatusV6} {
				if s == allocator.BindingPending {
					pending++
				}
			}
		}
		if pending <= 5 {
			t.Fatalf("the test needs more than 5 pending bindings, has %d", pending)
		}
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleViewer)
		run(t, ctx, "the dashboard", chromedp.Navigate(site.srv.URL+"/"), poll(`document.querySelector("section[aria-label=alerts]") !== null`))
		listed := evalJS[int](t, ctx, `[...document.querySelectorAll("section[aria-label=alerts] .alert")].filter(a => a.querySelector(".badge.pending") && !a.dataset.bindingMore).length`)
		more := evalJS[string](t, ctx, `(document.querySelector("[data-binding-more=pending]") || {innerText: ""}).innerText`)
		if listed > 5 {
			t.Errorf("the dashboard lists %d pending bindings one by one, want at most 5", listed)
		}
		if want := fmt.Sprintf("And %d more DPU famil", pending-listed); !strings.Contains(more, want) || !evalJS[bool](t, ctx, `document.querySelector("[data-binding-more=pending] a[href='/bindings?status=pending']") !== null`) {
			t.Errorf("the line counting the other pending bindings says %q, want %q… linked to /bindings?status=pending", more, want)
		}
	})
}
