package web_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/poolfile"
)

// TestNOCFitsE2E opens the NOC wallboard in headless Chromium on both
// databases: at phone width (390 px) it neither lays out wider than the
// screen nor clips a tile's label; at 1920×1080 the whole board fits on the
// screen, its last line included; and once the server stops, the "no
// update" banner shows within a few seconds, not at the next 15 s refresh.
func TestNOCFitsE2E(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			if d == models.Postgres {
				dbtest.RequirePostgres(t)
			}
			site := newConsoleSite(t, dbtest.Open(t, d))
			seedBelievableSite(t, site)
			fillNOC(t, site)
			nocFits(t, site)
		})
	}
}

// fillNOC gives the board as many lines as it shows: seven pools and six
// recent force deletes.
func fillNOC(t *testing.T, site *consoleSite) {
	t.Helper()
	ctx := audit.WithActor(context.Background(), "console:alice", "")
	const pools = `
[pools.tenant-a]
type = "ipv4"
ranges = [{ start = "10.20.0.1", end = "10.20.0.50" }]
[pools.tenant-b]
type = "ipv4"
ranges = [{ start = "10.21.0.1", end = "10.21.0.50" }]
[pools.storage-vlan]
type = "integer"
ranges = [{ start = "2000", end = "2099" }]
[pools.oob-ipv6]
type = "ipv6"
ranges = [{ start = "fd00:99::1", end = "fd00:99::ffff" }]
`
	if _, err := poolfile.Load(ctx, site.a, []byte(pools)); err != nil {
		t.Fatalf("load pools: %v", err)
	}
	for i := 0; i < 6; i++ {
		mac := fmt.Sprintf("4a:00:00:00:00:%02x", i)
		if _, err := site.a.Report(ctx, allocator.ReportSpec{BmcMacAddress: mac, ChassisSerialNumber: fmt.Sprintf("SN-GONE-%d", i),
			DPUs: []allocator.ReportDPU{{SerialNumber: fmt.Sprintf("MT-GONE-%d", i)}}}); err != nil {
			t.Fatalf("report %s: %v", mac, err)
		}
		if _, err := site.a.DeleteMachine(ctx, allocator.HostMachineID(mac), true); err != nil {
			t.Fatalf("force delete %s: %v", mac, err)
		}
	}
}

// nocClipped lists the NOC's elements whose text is cut off by their box
// (a tile label shown as "DPUS COMP").
const nocClipped = `(() => {
  const bad = [];
  for (const e of document.querySelectorAll("#board .kpi, #board .kpi *, #board .noc-panel h2, #board .forecast .pname, #board .binding-counts div")) {
    if (e.offsetParent === null) continue;
    if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflow !== "visible") bad.push(e.className + " «" + e.textContent.trim().slice(0, 40) + "»");
    const r = e.getBoundingClientRect();
    if (r.right > document.documentElement.clientWidth + 1) bad.push("off screen: " + e.className + " «" + e.textContent.trim().slice(0, 40) + "»");
  }
  return bad;
})()`

func nocFits(t *testing.T, site *consoleSite) {
	base := site.srv.URL

	phone := newBrowser(t, 390, 844)
	signIn(t, phone, site, auth.RoleViewer)
	run(t, phone, "NOC at 390 px", chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/noc"), poll(`document.querySelector("#board .kpi") !== null`))
	screenshot(t, phone, "phone-noc", true)
	w, err := chromedp.Run(phone, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if w > 390 {
		t.Errorf("at 390 px the NOC lays out %d px wide (it scrolls sideways)", w)
	}
	clipped, err := chromedp.Run(phone, chromedp.Evaluate[[]string](nocClipped))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clipped {
		t.Errorf("at 390 px the NOC clips: %s", c)
	}

	wall := newBrowser(t, 1920, 1080)
	signIn(t, wall, site, auth.RoleViewer)
	run(t, wall, "NOC at 1920×1080", chromedp.EmulateViewport(1920, 1080), chromedp.Navigate(base+"/noc"), poll(`document.querySelector("#board .kpi") !== null`))
	h, err := chromedp.Run(wall, chromedp.Evaluate[int](`document.documentElement.scrollHeight`))
	if err != nil {
		t.Fatal(err)
	}
	screenshot(t, wall, "noc", false)
	if h > 1080 {
		t.Errorf("at 1920×1080 the NOC is %d px tall: its last lines are off the screen", h)
	}
	last, err := chromedp.Run(wall, chromedp.Evaluate[float64](`document.querySelector("#noc-force-deletes li:last-child").getBoundingClientRect().bottom`))
	if err != nil {
		t.Fatal(err)
	}
	if last > 1080 {
		t.Errorf("at 1920×1080 the last force delete line ends at %.0f px, below the screen", last)
	}
	clipped, err = chromedp.Run(wall, chromedp.Evaluate[[]string](nocClipped))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clipped {
		t.Errorf("at 1920×1080 the NOC clips: %s", c)
	}

	// The server stops: the banner says so within a few seconds, long
	// before the board's next 15 s refresh.
	site.srv.CloseClientConnections()
	site.srv.Close()
	sctx, cancel := context.WithTimeout(wall, 8*time.Second)
	defer cancel()
	if _, err := chromedp.Run(sctx, poll(`!document.querySelector("#noc-stale").hidden && document.body.classList.contains("stale")`)); err != nil {
		t.Errorf("8 s after the server stopped the NOC still looks live: %v", err)
	}
}

// TestNOCFitsLaptopE2E opens the NOC on a laptop's screen (1280 and 1000 px
// wide), as an operator does outside the NOC room, on both databases: the
// binding counts fold into fewer columns instead of pushing the board wider
// than the window.
func TestNOCFitsLaptopE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		fillNOC(t, site)
		// Four-digit counts, as a site of a thousand hosts has them.
		ctx := audit.WithActor(context.Background(), "console:alice", "")
		var dpus []allocator.ReportDPU
		for i := 0; i < 1000; i++ {
			dpus = append(dpus, allocator.ReportDPU{SerialNumber: fmt.Sprintf("MT-LAPTOP-%04d", i)})
		}
		if _, err := site.a.Report(ctx, allocator.ReportSpec{BmcMacAddress: "4a:00:00:00:01:00", ChassisSerialNumber: "SN-LAPTOP", DPUs: dpus}); err != nil {
			t.Fatalf("report: %v", err)
		}
		for _, w := range []int{1280, 1000} {
			b := newBrowser(t, w, 900)
			signIn(t, b, site, auth.RoleViewer)
			run(t, b, fmt.Sprintf("NOC at %d px", w), chromedp.EmulateViewport(int64(w), 900), chromedp.Navigate(site.srv.URL+"/noc"), poll(`document.querySelector("#board .kpi") !== null`))
			if sw := evalJS[int](t, b, `document.documentElement.scrollWidth`); sw > w {
				t.Errorf("at %d px the NOC lays out %d px wide (it scrolls sideways)", w, sw)
			}
			for _, c := range evalJS[[]string](t, b, nocClipped) {
				t.Errorf("at %d px the NOC clips: %s", w, c)
			}
			over := evalJS[[]string](t, b, `[...document.querySelectorAll("#board .binding-counts div")].filter(d => d.querySelector("b").getBoundingClientRect().right > d.getBoundingClientRect().right + 1).map(d => d.textContent.trim())`)
			for _, c := range over {
				t.Errorf("at %d px a binding count runs out of its cell: %s", w, c)
			}
		}
	})
}
