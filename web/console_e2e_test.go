package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit/browserkit"
	"github.com/ipledger/ipledger/models"
)

// newBrowser starts headless Chromium (browserkit.New).
func newBrowser(t *testing.T, w, h int) context.Context { return browserkit.New(t, w, h) }

// run runs browser actions, failing the test with the step's name
// (browserkit.Run).
func run(t *testing.T, ctx context.Context, step string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	browserkit.Run(t, ctx, step, actions...)
}

// poll waits until the JavaScript expression is truthy, across
// navigations (browserkit.Poll).
func poll(expr string) chromedp.Action[chromedp.Void] { return browserkit.Poll(expr) }

// setInput sets an input's value and fires the input event, as typing
// does (htmx's as-you-type validation listens to it).
func setInput(sel, value string) chromedp.Action[chromedp.Void] {
	js, _ := json.Marshal(value)
	q, _ := json.Marshal(sel)
	return chromedp.Evaluate[chromedp.Void](`(() => { const e = document.querySelector(` + string(q) + `); e.value = ` + string(js) +
		`; e.dispatchEvent(new Event("input", {bubbles: true})); return true })()`)
}

// screenshot saves a PNG of the page to $IPLEDGER_SCREENSHOTS/name.png
// when that directory is set (scripted in docs/console.md).
func screenshot(t *testing.T, ctx context.Context, name string, full bool) {
	t.Helper()
	dir := os.Getenv("IPLEDGER_SCREENSHOTS")
	if dir == "" {
		return
	}
	act := chromedp.CaptureScreenshot()
	if full {
		act = chromedp.FullScreenshot(100)
	}
	buf, err := chromedp.Run(ctx, act)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		t.Fatalf("write screenshot: %v", err)
	}
}

// TestConsoleEndToEnd drives the console in headless Chromium: sign in,
// create pool lo-ip and an explicit range, create an ExpectedMachine whose
// loopback_ip is first in an auto_assign range (inline error from the
// allocator), fix it, report the DPU, see the reserved binding, open the
// force-delete dialog, see the quarantine warning, cancel — and check that
// nothing was deleted.
func TestConsoleEndToEnd(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			if d == models.Postgres {
				dbtest.RequirePostgres(t)
			}
			site := newConsoleSite(t, dbtest.Open(t, d))
			consoleEndToEnd(t, site)
		})
	}
}

func consoleEndToEnd(t *testing.T, site *consoleSite) {
	ctx := newBrowser(t, 1280, 900)
	base := site.srv.URL
	const mac = "1a:1b:1c:1d:1e:1f"

	run(t, ctx, "sign in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), site.tokens[auth.RoleAdmin]),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		poll(`location.pathname === "/" && document.querySelector("h1").innerText === "Dashboard"`),
	)

	run(t, ctx, "create pool lo-ip",
		chromedp.Navigate(base+"/pools"),
		chromedp.WaitVisible(chromedp.CSS(`#create-pool`)),
		chromedp.SendKeys(chromedp.CSS(`#p-name`), "lo-ip"),
		chromedp.SetValue(chromedp.CSS(`#p-type`), "ipv4"),
		chromedp.SendKeys(chromedp.CSS(`#p-first`), "10.180.62.1"),
		chromedp.SendKeys(chromedp.CSS(`#p-last`), "10.180.62.199"),
		chromedp.Click(chromedp.CSS(`#create-pool button[type=submit]`)),
		poll(`location.pathname === "/pools/lo-ip" && document.querySelector("h1").innerText.includes("Pool lo-ip")`),
	)

	run(t, ctx, "add an explicit range",
		chromedp.SendKeys(chromedp.CSS(`#r-first`), "10.180.62.200"),
		chromedp.SendKeys(chromedp.CSS(`#r-last`), "10.180.62.255"),
		chromedp.Click(chromedp.CSS(`#add-range input[name=auto_assign]`)),
		chromedp.Click(chromedp.CSS(`#add-range button[type=submit]`)),
		poll(`document.querySelector("#ranges") && document.querySelector("#ranges").innerText.includes("10.180.62.255") && document.querySelector("#ranges .badge.explicit") !== null`),
	)

	errSel := `.dpu-row .error[id$="-loopback_ip"]`
	run(t, ctx, "ExpectedMachine with a loopback_ip in an auto_assign range shows the allocator's error inline",
		chromedp.Navigate(base+"/expected-machines/new"),
		chromedp.WaitVisible(chromedp.CSS(`#em-form`)),
		chromedp.SendKeys(chromedp.CSS(`#f-mac`), mac),
		chromedp.SendKeys(chromedp.CSS(`#f-chassis`), "SN-E2E-1"),
		chromedp.SendKeys(chromedp.CSS(`.dpu-row input[name=dpu_serial]`), "MT0001"),
		setInput(`.dpu-row input[name=dpu_ip]`, "10.180.62.10"),
		poll(`document.querySelector('`+errSel+`').innerText.includes("auto-assign range")`),
	)
	screenshot(t, ctx, "expected-machine-inline-error", true)

	run(t, ctx, "fixing the value clears the error",
		setInput(`.dpu-row input[name=dpu_ip]`, "10.180.62.201"),
		poll(`document.querySelector('`+errSel+`').innerText.trim() === ""`),
	)
	run(t, ctx, "ExpectedDpu rows are added and removed in place",
		chromedp.Click(chromedp.CSS(`#em-form button[name=add_dpu]`)),
		poll(`document.querySelectorAll("#dpu-rows .dpu-row").length === 2 && location.pathname === "/expected-machines/new"`),
		chromedp.Click(chromedp.CSS(`#dpu-rows .dpu-row:nth-child(2) button[data-remove-row]`)),
		poll(`document.querySelectorAll("#dpu-rows .dpu-row").length === 1 && document.querySelector("#dpu-rows input[name=dpu_serial]").value === "MT0001"`),
	)
	run(t, ctx, "save the ExpectedMachine",
		chromedp.Click(chromedp.CSS(`#em-form button.save`)),
		poll(`location.pathname.startsWith("/expected-machines/") && document.body.innerText.includes("`+mac+`") && document.body.innerText.includes("10.180.62.201") && document.querySelector("#flash").innerText.includes("saved")`),
	)

	// The DPU is reported as site-explorer does, through the REST API,
	// with a second DPU that has no reservation (automatic value).
	report := map[string]any{"bmc_mac_address": mac, "chassis_serial_number": "SN-E2E-1",
		"dpus": []map[string]string{{"serial_number": "MT0001"}, {"serial_number": "MT0002"}}}
	b, _ := json.Marshal(report)
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/site-explorer/reports", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+site.tokens[auth.RoleOperator])
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, res, http.StatusOK)

	run(t, ctx, "the DPU's binding is reserved",
		chromedp.Navigate(base+"/bindings"),
		poll(`[...document.querySelectorAll("tbody tr")].some(r => r.innerText.includes("MT0001") && r.querySelector(".badge.reserved") && r.innerText.includes("10.180.62.201"))`),
	)

	run(t, ctx, "force delete opens the impact dialog with the quarantine warning",
		chromedp.Navigate(base+"/machines/"+allocator.HostMachineID(mac)),
		chromedp.WaitVisible(chromedp.CSS(`.machine-head a[href$='action=force-delete']`)),
		chromedp.Click(chromedp.CSS(`.machine-head a[href$='action=force-delete']`)),
		poll(`document.querySelector("dialog[open]") !== null`),
		poll(`document.querySelector("dialog[open]").innerText.includes("quarantine") && document.querySelector("dialog[open] .alert.bad") !== null`),
		poll(`document.querySelector("dialog[open]").innerText.includes("returned to its reservation")`),
		poll(`document.querySelector("dialog[open] input[name=confirm_name]") !== null`),
	)
	screenshot(t, ctx, "force-delete-dialog", false)

	run(t, ctx, "cancel closes the dialog",
		chromedp.Click(chromedp.CSS(`dialog[open] [data-close-dialog]`)),
		poll(`document.querySelector("dialog[open]") === null`),
	)

	// Nothing was deleted: the host and both DPUs still hold their values.
	m, err := site.a.GetMachine(context.Background(), allocator.HostMachineID(mac))
	if err != nil {
		t.Fatalf("host after cancel: %v", err)
	}
	if m.State != allocator.StateReady || len(m.DPUs) != 2 {
		t.Fatalf("host after cancel: state %s, %d DPUs; want ready with 2", m.State, len(m.DPUs))
	}
	page, err := site.a.ListAllocations(context.Background(), "lo-ip", allocator.AllocationFilter{State: "quarantined"})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("quarantined after cancel: %v %v", page, err)
	}
	if !strings.HasPrefix(m.MachineID, "fm100ht") {
		t.Fatalf("unexpected host id %s", m.MachineID)
	}
}

// layoutProblems lists what is wrong with the page's layout at the
// current width: a number, address, code value, badge, button or nav link
// broken over two lines; the page itself scrolling sideways; a nav link
// or a row's action (button, link or menu) off screen; the pool stats table wider than
// its panel; a table in a fixed-height box; a table that scrolls sideways
// without the visible hint.
const layoutProblems = `(() => {
  const bad = [];
  const W = document.documentElement.clientWidth;
  const lines = (e) => {
    const r = document.createRange();
    r.selectNodeContents(e);
    const tops = new Set();
    for (const x of r.getClientRects()) if (x.width > 0 && x.height > 0) tops.add(Math.round(x.bottom));
    return tops.size;
  };
  const name = (e) => e.tagName.toLowerCase() + (e.className ? "." + String(e.className).replace(/ +/g, ".") : "") + " «" + e.textContent.trim().slice(0, 40) + "»";
  for (const e of document.querySelectorAll("td.num, td .addr, td code, td .mono:not(.wrap-id), td .badge, td .button, td button:not(.copy), table.stats td, .top nav a, thead th:not(:empty)")) {
    if (e.offsetParent === null) continue;
    if (lines(e) > 1) bad.push("breaks over lines: " + name(e));
  }
  if (document.documentElement.scrollWidth > W + 1) bad.push("the page scrolls sideways: " + document.documentElement.scrollWidth + " > " + W);
  for (const a of document.querySelectorAll(".top nav a")) {
    const r = a.getBoundingClientRect();
    if (r.right > W + 1 || r.left < -1) bad.push("nav link off screen: " + name(a));
  }
  for (const b of document.querySelectorAll("td.actions .button, td.actions button, td.actions summary")) {
    const r = b.getBoundingClientRect();
    if (r.right > W + 1) bad.push("action off screen: " + name(b));
  }
  for (const t of document.querySelectorAll("table.stats")) {
    const p = t.closest(".panel");
    if (p && t.getBoundingClientRect().right > p.getBoundingClientRect().right + 1) bad.push("stats table wider than its panel");
  }
  for (const w of document.querySelectorAll(".table-wrap")) {
    if (w.scrollHeight > w.clientHeight + 1) bad.push("table in a fixed-height box: " + w.clientHeight + " of " + w.scrollHeight + " px shown");
    if (w.scrollWidth > w.clientWidth + 1) {
      const h = w.previousElementSibling;
      if (!h || !h.classList.contains("scroll-hint") || h.offsetParent === null) bad.push("a table scrolls sideways without the hint: " + name(w.querySelector("th") || w));
    } else {
      const th = w.querySelector("thead th");
      if (th && th.offsetParent !== null && getComputedStyle(th).position !== "sticky") bad.push("table header not sticky: " + name(th));
    }
  }
  return bad;
})()`

// TestConsoleLayoutE2E loads every page at 1280 px and at phone width
// (390 px) in headless Chromium and checks layoutProblems on each, on both
// databases.
func TestConsoleLayoutE2E(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			if d == models.Postgres {
				dbtest.RequirePostgres(t)
			}
			site := newConsoleSite(t, dbtest.Open(t, d))
			seedBelievableSite(t, site)
			for _, w := range []int{1280, 390} {
				ctx := newBrowser(t, w, 844)
				run(t, ctx, "sign in",
					chromedp.Navigate(site.srv.URL+"/login"),
					chromedp.SendKeys(chromedp.CSS(`#token`), site.tokens[auth.RoleAdmin]),
					chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
					poll(`location.pathname === "/"`),
				)
				em, err := site.a.GetExpectedMachine(context.Background(), "1a:1b:1c:1d:1e:1f")
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range []string{"/", "/pools", "/pools/lo-ip", "/expected-machines", "/machines", "/bindings", "/events",
					"/machines/" + allocator.HostMachineID("1a:1b:1c:1d:1e:20"), "/machines/" + allocator.DPUMachineID("MT2242X00020"),
					"/expected-machines/" + em.ID, "/search?q=rack", "/machines/" + allocator.HostMachineID("1a:1b:1c:1d:1e:20") + "/impact?action=force-delete"} {
					run(t, ctx, p, chromedp.Navigate(site.srv.URL+p), poll(`document.readyState === "complete" && document.querySelector("table") !== null`))
					time.Sleep(100 * time.Millisecond)
					bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](layoutProblems))
					if err != nil {
						t.Fatalf("%d px %s: %v", w, p, err)
					}
					for _, b := range bad {
						t.Errorf("%d px %s: %s", w, p, b)
					}
				}
			}
		})
	}
}
