package web_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// seedBelievableSite builds a small site for screenshots: pools with 30
// days of allocation history, ExpectedMachines with reservations, ingested
// hosts with DPUs in several binding states, and a force-deleted host whose
// automatic loopback sits in quarantine.
func seedBelievableSite(t testing.TB, site *consoleSite) {
	t.Helper()
	a := site.a
	seedSite(t, a)
	ctx := audit.WithActor(context.Background(), "console:alice", "")

	// 30 days of vlan-id and lo-ip history through an allocator whose clock
	// walks forward one day at a time (the usage chart reads the audit log).
	now := time.Now().UTC()
	day := now.AddDate(0, 0, -29)
	clocked := allocator.New(a.DB(), allocator.Options{Now: func() time.Time { return day }})
	for d := 0; d < 30; d++ {
		day = now.AddDate(0, 0, -29+d)
		for i := 0; i < 1+d%3; i++ {
			owner := allocator.Owner{Type: "tenant", ID: fmt.Sprintf("net-%02d-%d", d, i)}
			if d%7 == 6 && i == 0 {
				continue
			}
			if _, _, err := clocked.Allocate(ctx, "lo-ip", owner, ""); err != nil {
				t.Fatalf("history allocate: %v", err)
			}
		}
		if d%3 == 0 && d < 27 {
			if _, _, err := clocked.Allocate(ctx, "vlan-id", allocator.Owner{Type: "network", ID: fmt.Sprintf("vpc-%d", d)}, ""); err != nil {
				t.Fatalf("vlan allocate: %v", err)
			}
		}
	}

	str := func(s string) *string { return &s }
	ems := []allocator.ExpectedMachineSpec{
		{BmcMacAddress: "1a:1b:1c:1d:1e:1f", BmcUsername: "root", BmcPassword: str("never-shown"), ChassisSerialNumber: "SN-R7-U12",
			Metadata:     &allocator.Metadata{Name: "rack7-u12", Labels: []allocator.Label{{Key: "env", Value: "prod"}}},
			ExpectedDPUs: &[]allocator.ExpectedDPU{{SerialNumber: "MT2242X00001", LoopbackIP: str("10.180.62.200"), LoopbackIPv6: str("fd00:180:62:1::c8")}}},
		{BmcMacAddress: "1a:1b:1c:1d:1e:20", BmcUsername: "root", ChassisSerialNumber: "SN-R7-U14",
			Metadata:     &allocator.Metadata{Name: "rack7-u14", Labels: []allocator.Label{{Key: "env", Value: "prod"}}},
			ExpectedDPUs: &[]allocator.ExpectedDPU{{SerialNumber: "MT2242X00002", LoopbackIP: str("10.180.62.201")}, {SerialNumber: "MT2242X00003"}}},
		{BmcMacAddress: "2a:00:00:00:00:31", BmcUsername: "admin", ChassisSerialNumber: "SN-R8-U01",
			Metadata:     &allocator.Metadata{Name: "rack8-u01"},
			ExpectedDPUs: &[]allocator.ExpectedDPU{{SerialNumber: "MT2242X00010", LoopbackIP: str("10.180.62.210")}}},
		{BmcMacAddress: "2a:00:00:00:00:32", ChassisSerialNumber: "SN-R8-U03", Metadata: &allocator.Metadata{Name: "rack8-u03"},
			ExpectedDPUs: &[]allocator.ExpectedDPU{{SerialNumber: "MT2242X00020", LoopbackIP: str("10.180.62.220")}}},
	}
	for _, s := range ems {
		if _, err := a.CreateExpectedMachine(ctx, s); err != nil {
			t.Fatalf("create ExpectedMachine %s: %v", s.BmcMacAddress, err)
		}
	}
	report := func(mac, chassis string, serials ...string) {
		spec := allocator.ReportSpec{BmcMacAddress: mac, ChassisSerialNumber: chassis}
		for _, s := range serials {
			spec.DPUs = append(spec.DPUs, allocator.ReportDPU{SerialNumber: s})
		}
		if _, err := a.Report(ctx, spec); err != nil {
			t.Fatalf("report %s: %v", mac, err)
		}
	}
	report("1a:1b:1c:1d:1e:1f", "SN-R7-U12", "MT2242X00001")
	report("1a:1b:1c:1d:1e:20", "SN-R7-U14", "MT2242X00002", "MT2242X00003")
	report("2a:00:00:00:00:31", "SN-R8-U01", "MT2242X00010")
	// rack8-u01's reservation is edited after ingestion: binding pending.
	if _, err := a.PatchExpectedMachine(ctx, "2a:00:00:00:00:31",
		[]byte(`{"expected_dpus":[{"serial_number":"MT2242X00010","loopback_ip":"10.180.62.211"}]}`), nil); err != nil {
		t.Fatalf("patch: %v", err)
	}
	// MT2242X00020 is declared by rack8-u03 but shows up under rack7-u14,
	// whose ExpectedMachine does not list it: its binding is conflict
	// until an operator fixes the ExpectedMachines.
	report("1a:1b:1c:1d:1e:20", "SN-R7-U14", "MT2242X00002", "MT2242X00003", "MT2242X00020")
	report("3a:00:00:00:00:42", "SN-LAB-2", "MT2242X00098")
	// A host without an ExpectedMachine, force-deleted: its automatic
	// loopbacks go to quarantine.
	report("3a:00:00:00:00:41", "SN-LAB-1", "MT2242X00099")
	if _, err := a.DeleteMachine(ctx, allocator.HostMachineID("3a:00:00:00:00:41"), true); err != nil {
		t.Fatalf("force delete: %v", err)
	}
}

// TestConsoleScreenshots writes docs/screenshots/*.png of the main pages
// at 1280 px and a phone width. It runs only when IPLEDGER_SCREENSHOTS
// names the output directory:
//
//	IPLEDGER_SCREENSHOTS=$PWD/docs/screenshots go test ./web -run TestConsoleScreenshots
func TestConsoleScreenshots(t *testing.T) {
	t.Parallel()
	if os.Getenv("IPLEDGER_SCREENSHOTS") == "" {
		t.Skip("set IPLEDGER_SCREENSHOTS=DIR to write the console screenshots")
	}
	site := newConsoleSite(t, dbtest.Open(t, models.SQLite))
	seedBelievableSite(t, site)
	base := site.srv.URL

	shoot := func(w, h int, pages []struct{ name, path, ready string }) {
		ctx := newBrowser(t, w, h)
		run(t, ctx, "sign in",
			chromedp.Navigate(base+"/login"),
			chromedp.SendKeys(chromedp.CSS(`#token`), site.tokens[auth.RoleAdmin]),
			chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
			poll(`location.pathname === "/"`),
		)
		for _, p := range pages {
			run(t, ctx, p.name, chromedp.EmulateViewport(int64(w), int64(h)), chromedp.Navigate(base+p.path), poll(p.ready))
			// The audit log is a long page: its first screen shows what a row looks like.
			screenshot(t, ctx, p.name, !strings.Contains(p.name, "audit-log"))
		}
	}
	shoot(1280, 860, []struct{ name, path, ready string }{
		{"dashboard", "/", `document.querySelector(".bar") !== null`},
		{"pools", "/pools", `document.querySelector("table") !== null`},
		{"pool-detail", "/pools/lo-ip", `document.querySelector("svg.usage") !== null`},
		{"expected-machines", "/expected-machines", `document.querySelector("#em-table") !== null`},
		{"machines", "/machines", `document.querySelector("table") !== null`},
		{"bindings", "/bindings", `document.querySelector(".badge.pending") !== null`},
		{"audit-log", "/events", `document.querySelector("table") !== null`},
		{"machine-page", "/machines/" + allocator.HostMachineID("1a:1b:1c:1d:1e:20"), `document.querySelector("#dpus") !== null`},
		{"dpu-page", "/machines/" + allocator.DPUMachineID("MT2242X00010"), `document.querySelector("#dpus .badge.pending") !== null`},
		{"expected-machine-view", "/expected-machines/" + emID(t, site, "1a:1b:1c:1d:1e:20"), `document.querySelector("#em-dpus") !== null`},
		{"search-results", "/search?q=rack", `document.querySelector(".hit-group") !== null`},
		{"quarantine", "/quarantine", `document.querySelector("#quarantine tbody tr") !== null`},
	})
	shoot(1920, 1080, []struct{ name, path, ready string }{
		{"noc", "/noc", `document.querySelector("#board .kpi") !== null`},
	})

	// Inline error and force-delete dialog.
	ctx := newBrowser(t, 1280, 860)
	run(t, ctx, "sign in",
		chromedp.Navigate(base+"/login"),
		chromedp.SendKeys(chromedp.CSS(`#token`), site.tokens[auth.RoleAdmin]),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		poll(`location.pathname === "/"`),
	)
	run(t, ctx, "edit with an auto_assign value",
		chromedp.Navigate(base+"/expected-machines/new"),
		chromedp.SendKeys(chromedp.CSS(`#f-mac`), "1a:1b:1c:1d:1e:99"),
		chromedp.SendKeys(chromedp.CSS(`#f-name`), "rack9-u02"),
		chromedp.SendKeys(chromedp.CSS(`.dpu-row input[name=dpu_serial]`), "MT2242X00001"),
		setInput(`.dpu-row input[name=dpu_ip]`, "10.180.62.17"),
		poll(`document.querySelector('.dpu-row .error[id$="-loopback_ip"]').innerText.includes("auto-assign")`),
	)
	screenshot(t, ctx, "expected-machine-form-inline-error", true)
	run(t, ctx, "pending warning",
		chromedp.Navigate(base+"/expected-machines/"+emID(t, site, "2a:00:00:00:00:31")+"/edit"),
		setInput(`.dpu-row input[name=dpu_ip]`, "10.180.62.212"),
		poll(`document.querySelector('.dpu-row .warn-msg[id$="-loopback_ip"]').innerText.includes("10.180.62.212 is reserved (binding pending)")`),
	)
	screenshot(t, ctx, "expected-machine-pending-warning", false)
	run(t, ctx, "row menu",
		chromedp.Navigate(base+"/machines"),
		chromedp.Click(chromedp.CSS(`tr:nth-child(2) details.menu summary`)),
		poll(`document.querySelector("details.menu[open]") !== null`),
	)
	screenshot(t, ctx, "machines-row-menu", false)
	run(t, ctx, "force delete dialog",
		chromedp.Navigate(base+"/machines/"+allocator.HostMachineID("1a:1b:1c:1d:1e:20")),
		chromedp.Click(chromedp.CSS(`.machine-head a[href$='action=force-delete']`)),
		poll(`document.querySelector("dialog[open]") !== null`),
		setInput(`#confirm-name`, "rack7-u1"),
	)
	screenshot(t, ctx, "force-delete-dialog", false)
	run(t, ctx, "decommission dialog",
		chromedp.Navigate(base+"/machines/"+allocator.HostMachineID("1a:1b:1c:1d:1e:1f")),
		chromedp.Click(chromedp.CSS(`.machine-head a[href$='action=decommission']`)),
		poll(`document.querySelector("dialog[open]") !== null`),
	)
	screenshot(t, ctx, "decommission-dialog", false)
	run(t, ctx, "unquarantine dialog",
		chromedp.Navigate(base+"/pools/lo-ip?state=quarantined"),
		chromedp.Click(chromedp.CSS(`table.allocations a[href*='/unquarantine?value=']`)),
		poll(`document.querySelector("dialog[open]") !== null`),
	)
	screenshot(t, ctx, "unquarantine-dialog", false)
	run(t, ctx, "range edit refused",
		chromedp.Navigate(base+"/pools/lo-ip"),
		chromedp.Click(chromedp.CSS(`#ranges tbody tr:last-child a[href$='/edit']`)),
		poll(`document.querySelector("dialog[open] #range-form") !== null`),
		setInput(`#re-first`, "10.180.62.230"),
		chromedp.Click(chromedp.CSS(`dialog[open] #range-form button[type=submit]`)),
		poll(`document.querySelector("dialog[open] #range-form .alert.bad, dialog[open] #range-form .error") !== null`),
	)
	screenshot(t, ctx, "range-edit-dialog", false)

	shoot(390, 844, []struct{ name, path, ready string }{
		{"phone-dashboard", "/", `document.querySelector(".bar") !== null`},
		{"phone-bindings", "/bindings", `document.querySelector("table") !== null`},
		{"phone-pool-detail", "/pools/lo-ip", `document.querySelector("svg.usage") !== null`},
		{"phone-machines", "/machines", `document.querySelector("table") !== null`},
		{"phone-expected-machines", "/expected-machines", `document.querySelector("#em-table") !== null`},
		{"phone-audit-log", "/events", `document.querySelector("table") !== null`},
		{"phone-machine-page", "/machines/" + allocator.HostMachineID("1a:1b:1c:1d:1e:20"), `document.querySelector("#dpus") !== null`},
		{"phone-noc", "/noc", `document.querySelector("#board .kpi") !== null`},
	})
	ctx = newBrowser(t, 390, 844)
	run(t, ctx, "sign in",
		chromedp.Navigate(base+"/login"),
		chromedp.SendKeys(chromedp.CSS(`#token`), site.tokens[auth.RoleAdmin]),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		poll(`location.pathname === "/"`),
	)
	run(t, ctx, "phone force delete dialog",
		chromedp.Navigate(base+"/machines/"+allocator.HostMachineID("1a:1b:1c:1d:1e:20")),
		chromedp.Click(chromedp.CSS(`.machine-head a[href$='action=force-delete']`)),
		poll(`document.querySelector("dialog[open]") !== null`),
	)
	screenshot(t, ctx, "phone-force-delete-dialog", false)

	// Last, as it stops the server: the wallboard losing its connection.
	ctx = newBrowser(t, 1920, 1080)
	run(t, ctx, "sign in",
		chromedp.Navigate(base+"/login"),
		chromedp.SendKeys(chromedp.CSS(`#token`), site.tokens[auth.RoleViewer]),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		poll(`location.pathname === "/"`),
	)
	run(t, ctx, "noc", chromedp.EmulateViewport(1920, 1080), chromedp.Navigate(base+"/noc"), poll(`document.querySelector("#board .kpi") !== null`))
	site.srv.CloseClientConnections()
	site.srv.Close()
	run(t, ctx, "noc lost connection",
		chromedp.Evaluate[chromedp.Void](`htmx.ajax("GET", "/noc", {source: "#board", target: "#board", select: "#board", swap: "outerHTML"}), true`),
		poll(`!document.querySelector("#noc-stale").hidden`),
	)
	screenshot(t, ctx, "noc-lost-connection", false)
}

// emID is the id of the ExpectedMachine with this BMC MAC.
func emID(t *testing.T, site *consoleSite, mac string) string {
	t.Helper()
	em, err := site.a.GetExpectedMachine(context.Background(), mac)
	if err != nil {
		t.Fatal(err)
	}
	return em.ID
}
