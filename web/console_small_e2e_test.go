package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/text/unicode/norm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/poolfile"
)

// smallName is a host name with letters Unicode can write composed or
// decomposed (й, é): stored composed (NFC), typed decomposed (NFD) below.
const smallName = "Сервер-й-é"

// TestConsoleSmallPointsE2E walks the console's smaller points in headless
// Chromium on both databases, on a site of its own (lo-ip's explicit range
// 10.50.0.200–249): the ExpectedMachine form's loopback placeholders are
// that site's; the machine page counts "1 expected DPU" and leaves out an
// empty chassis; a force delete is confirmed by the host's name typed
// decomposed (NFD) and, without the dialog, by the host's machine_id; at
// 390×844 the header is one line under 64 px and its Menu reaches every
// nav link and Sign out; the dashboard shows a change made on the server
// without being reloaded.
func TestConsoleSmallPointsE2E(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			if d == models.Postgres {
				dbtest.RequirePostgres(t)
			}
			site := newConsoleSite(t, dbtest.Open(t, d))
			smallSite(t, site)
			ctx := newBrowser(t, 1280, 844)
			signIn(t, ctx, site, auth.RoleAdmin)
			smallPlaceholders(t, ctx, site)
			smallMachinePage(t, ctx, site)
			smallForceDelete(t, ctx, site)
			smallDashboardRefresh(t, ctx, site)
			smallPhoneHeader(t, ctx, site)
		})
	}
}

// smallSite loads lo-ip and lo-ip-v6 with explicit ranges of their own and
// a VLAN pool of ten values (a pool file's range ends are exclusive), and ingests two hosts: smallName (an
// ExpectedMachine without a chassis serial, one DPU) and one without an
// ExpectedMachine.
func smallSite(t *testing.T, site *consoleSite) {
	t.Helper()
	ctx := audit.WithActor(context.Background(), "test:seed", "")
	const pools = `
[pools.lo-ip]
type = "ipv4"
ranges = [
  { start = "10.50.0.1", end = "10.50.0.199" },
  { start = "10.50.0.200", end = "10.50.0.250", auto_assign = false },
]
[pools.lo-ip-v6]
type = "ipv6"
ranges = [
  { start = "fd50::1", end = "fd50::ffff" },
  { start = "fd50:0:0:1::10", end = "fd50:0:0:1::ff", auto_assign = false },
]
[pools.tenant-vlan]
type = "integer"
ranges = [{ start = "100", end = "110" }]
`
	if _, err := poolfile.Load(ctx, site.a, []byte(pools)); err != nil {
		t.Fatalf("load pools: %v", err)
	}
	name, v4 := smallName, "10.50.0.200"
	dpus := []allocator.ExpectedDPU{{SerialNumber: "MT5001X00001", LoopbackIP: &v4}}
	if _, err := site.a.CreateExpectedMachine(ctx, allocator.ExpectedMachineSpec{BmcMacAddress: "0a:00:00:00:50:01",
		FallbackDPUSerialNumbers: []string{}, Metadata: &allocator.Metadata{Name: name}, ExpectedDPUs: &dpus}); err != nil {
		t.Fatalf("create ExpectedMachine: %v", err)
	}
	for _, r := range []allocator.ReportSpec{
		{BmcMacAddress: "0a:00:00:00:50:01", ChassisSerialNumber: "CH-5001", DPUs: []allocator.ReportDPU{{SerialNumber: "MT5001X00001"}}},
		{BmcMacAddress: "0a:00:00:00:50:02", ChassisSerialNumber: "CH-5002", DPUs: []allocator.ReportDPU{{SerialNumber: "MT5002X00001"}}},
	} {
		if _, err := site.a.Report(ctx, r); err != nil {
			t.Fatalf("report %s: %v", r.BmcMacAddress, err)
		}
	}
}

// smallPlaceholders: the new form's loopback placeholders, and those of a
// row "+ Add DPU" appends, are the first values of this site's explicit
// ranges, never the demo's addresses.
func smallPlaceholders(t *testing.T, ctx context.Context, site *consoleSite) {
	const want = `(() => {
  const rows = document.querySelectorAll("#dpu-rows .dpu-row");
  if (rows.length < 2) return false;
  for (const r of rows) {
    if (r.querySelector("input[name=dpu_ip]").placeholder !== "10.50.0.200") return false;
    if (r.querySelector("input[name=dpu_ip6]").placeholder !== "fd50:0:0:1::10") return false;
  }
  return !document.documentElement.innerHTML.includes("10.180.62.") && !document.documentElement.innerHTML.includes("fd00:180:62");
})()`
	run(t, ctx, "the form's placeholders are the site's explicit ranges",
		chromedp.Navigate(site.srv.URL+"/expected-machines/new"),
		poll(`document.querySelector("#dpu-rows .dpu-row") !== null`),
		chromedp.Click(chromedp.CSS(`#em-form button[name=add_dpu]`)),
		poll(want),
	)
}

// smallMachinePage: the host's ExpectedMachine panel says "1 expected DPU"
// and, the ExpectedMachine having no chassis serial, no "chassis" at all;
// no page part says "(s)".
func smallMachinePage(t *testing.T, ctx context.Context, site *consoleSite) {
	host := allocator.HostMachineID("0a:00:00:00:50:01")
	run(t, ctx, "the machine page counts in words",
		chromedp.Navigate(site.srv.URL+"/machines/"+host),
		poll(`document.querySelector("#em-dpu-count") !== null`),
	)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[
  document.querySelector("#em-dpu-count").innerText,
  document.querySelector("#em-dpu-count").closest("section").innerText,
  document.body.innerText]`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(strings.TrimSpace(got[0]), "1 expected DPU") || strings.Contains(got[0], "DPUs") {
		t.Errorf("the DPU count reads %q, want 1 expected DPU", got[0])
	}
	if strings.Contains(got[1], "chassis") {
		t.Errorf("the ExpectedMachine panel of an ExpectedMachine without a chassis serial says chassis: %q", got[1])
	}
	if strings.Contains(got[2], "(s)") {
		t.Errorf("the machine page counts with \"(s)\":\n%s", got[2])
	}
}

// smallForceDelete: typed decomposed, the host's name enables the button
// and the server deletes the host; the other host is confirmed by its
// machine_id (server-side, without the dialog's script), and part of an id
// is refused.
func smallForceDelete(t *testing.T, ctx context.Context, site *consoleSite) {
	host := allocator.HostMachineID("0a:00:00:00:50:01")
	nfd := norm.NFD.String(smallName)
	if nfd == smallName {
		t.Fatalf("%q has no decomposed form: the test would prove nothing", smallName)
	}
	run(t, ctx, "open the force-delete dialog",
		chromedp.Navigate(site.srv.URL+"/machines/"+host),
		poll(`document.querySelector(".machine-head a[href$='action=force-delete']") !== null`),
		chromedp.Click(chromedp.CSS(`.machine-head a[href$='action=force-delete']`)),
		poll(`document.querySelector("dialog[open] #confirm-name") !== null`),
		poll(`document.querySelector("dialog[open] button[type=submit]").disabled`),
	)
	run(t, ctx, "the name typed decomposed confirms",
		setInput(`#confirm-name`, nfd),
		poll(`document.querySelector("#confirm-name").value === `+jsString(nfd)),
		poll(`!document.querySelector("dialog[open] button[type=submit]").disabled`),
		chromedp.Click(chromedp.CSS(`dialog[open] button[type=submit]`)),
		poll(`location.pathname === "/machines" && document.querySelector("#flash") !== null && document.querySelector("#flash").innerText.includes("force-deleted")`),
	)
	if _, err := site.a.GetMachine(context.Background(), host); err == nil {
		t.Fatal("the force delete confirmed by the name typed in NFD kept the host")
	}

	admin := site.login(auth.RoleAdmin)
	other := allocator.HostMachineID("0a:00:00:00:50:02")
	expect(t, admin.htmx(http.MethodPost, "/machines/"+other+"/force-delete", url.Values{"confirm_name": {other[:30]}}),
		http.StatusUnprocessableEntity, `data-field="confirm_name"`, "nor its machine_id")
	if _, err := site.a.GetMachine(context.Background(), other); err != nil {
		t.Fatalf("a refused force delete deleted the host: %v", err)
	}
	res := admin.htmx(http.MethodPost, "/machines/"+other+"/force-delete", url.Values{"confirm_name": {" " + other + " "}})
	expect(t, res, http.StatusOK)
	if res.Header.Get("HX-Redirect") != "/machines" {
		t.Fatalf("force delete by machine_id: HX-Redirect %q", res.Header.Get("HX-Redirect"))
	}
	if _, err := site.a.GetMachine(context.Background(), other); err == nil {
		t.Fatal("the force delete confirmed by the machine_id kept the host")
	}
}

// smallDashboardRefresh: a value allocated on the server shows on the open
// dashboard (tenant-vlan's tile goes from 10 free to 9) without the page
// being loaded again (a mark set on the window survives).
func smallDashboardRefresh(t *testing.T, ctx context.Context, site *consoleSite) {
	const tile = `[...document.querySelectorAll("#dash .panel")].find(p => p.innerText.includes("tenant-vlan"))`
	run(t, ctx, "the dashboard before the change",
		chromedp.Navigate(site.srv.URL+"/"),
		poll(tile+` !== undefined && `+tile+`.innerText.includes("free 10 ·")`),
		chromedp.Evaluate[chromedp.Void](`window.smallMark = "not reloaded"`),
	)
	actx := audit.WithActor(context.Background(), "test:seed", "")
	if _, _, err := site.a.Allocate(actx, "tenant-vlan", allocator.Owner{Type: "tenant", ID: "t-1"}, ""); err != nil {
		t.Fatalf("allocate: %v", err)
	}
	// The dashboard polls on its own schedule: wait for the figure (a
	// condition), however long the refresh takes on a loaded machine.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](tile+`.innerText.includes("free 9 ·") && window.smallMark === "not reloaded"`,
		chromedp.WithPollingInterval(200*time.Millisecond))); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#dash") ? document.querySelector("#dash").innerText : document.body.innerText`))
		t.Fatalf("the dashboard never showed tenant-vlan's new free count without a reload: %v\n%s", err, body)
	}
}

// smallPhoneHeader: at 390×844 the closed header is one line no taller
// than 64 px, the navigation hidden; the Menu button opens it, and every
// nav link and Sign out is then on screen and the element at its centre
// (nothing covers it); a link followed and Sign out pressed work.
func smallPhoneHeader(t *testing.T, ctx context.Context, site *consoleSite) {
	run(t, ctx, "the dashboard at 390×844",
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(site.srv.URL+"/"),
		poll(`document.querySelector("#menu-toggle") !== null && document.querySelector("#menu-toggle").offsetParent !== null`),
	)
	closed, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`[
  document.querySelector("header.top").getBoundingClientRect().height,
  document.querySelector("header.top nav").offsetParent === null ? 0 : 1,
  document.documentElement.scrollWidth]`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("at 390×844 the closed header is %.0f px tall", closed[0])
	if closed[0] > 64 {
		t.Errorf("at 390×844 the closed header is %.0f px tall, want at most 64", closed[0])
	}
	if closed[1] != 0 {
		t.Error("at 390×844 the navigation shows before the Menu button is pressed")
	}
	if closed[2] > 390 {
		t.Errorf("at 390×844 the page lays out %.0f px wide", closed[2])
	}
	const unreachable = `(() => {
  const bad = [];
  const W = document.documentElement.clientWidth, H = document.documentElement.clientHeight;
  const items = [...document.querySelectorAll("header.top nav a")];
  const out = document.querySelector("header.top .who button[type=submit]");
  if (items.length < 9) bad.push("only " + items.length + " nav links");
  if (!out) bad.push("no Sign out button");
  for (const e of out ? [...items, out] : items) {
    const r = e.getBoundingClientRect();
    const label = e.innerText.trim();
    if (e.offsetParent === null || r.width === 0) { bad.push("hidden: " + label); continue; }
    if (r.left < 0 || r.right > W || r.top < 0 || r.bottom > H) { bad.push("off screen: " + label); continue; }
    const at = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    if (!at || !e.contains(at)) bad.push("covered: " + label);
  }
  return bad;
})()`
	run(t, ctx, "the Menu button opens the navigation",
		chromedp.Click(chromedp.CSS(`#menu-toggle`)),
		poll(`document.querySelector("#menu-toggle").getAttribute("aria-expanded") === "true" && document.querySelector("header.top nav").offsetParent !== null`),
	)
	bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](unreachable))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("at 390×844 with the menu open, not reachable: %s", b)
	}
	run(t, ctx, "a nav link from the menu opens its page, with the menu closed",
		chromedp.Click(chromedp.CSS(`header.top nav a[href="/pools"]`)),
		poll(`location.pathname === "/pools" && document.querySelector("#menu-toggle").getAttribute("aria-expanded") === "false" && document.querySelector("header.top nav").offsetParent === null`),
	)
	run(t, ctx, "Sign out from the menu",
		chromedp.Click(chromedp.CSS(`#menu-toggle`)),
		poll(`document.querySelector("header.top .who button[type=submit]") !== null && document.querySelector("header.top .who button[type=submit]").offsetParent !== null`),
		chromedp.Click(chromedp.CSS(`header.top .who button[type=submit]`)),
		poll(`location.pathname === "/login"`),
	)
}
