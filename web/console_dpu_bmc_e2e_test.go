package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
)

// TestDPUBMCMACE2E: a DPU's BMC MAC from a report is shown wherever the
// DPU is listed (the host page's DPU rows, the Machines list, the DPU's
// own page), and typing it into the header's search in a switch-free
// spelling opens the DPU.
func TestDPUBMCMACE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		host := "0a:00:00:00:77:01"
		if _, err := site.a.Report(context.Background(), allocator.ReportSpec{BmcMacAddress: host, ChassisSerialNumber: "CHS-7701",
			DPUs: []allocator.ReportDPU{{SerialNumber: "MT2242X07701", BmcMacAddress: "1A-2B-3C-4D-77-01"}, {SerialNumber: "MT2242X07702"}}}); err != nil {
			t.Fatalf("report: %v", err)
		}
		const mac = "1a:2b:3c:4d:77:01"
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleViewer)

		run(t, ctx, "the host page", chromedp.Navigate(site.srv.URL+"/machines/"+allocator.HostMachineID(host)), poll(`document.querySelector("#dpus") !== null`))
		rows := evalJS[[]string](t, ctx, `[...document.querySelectorAll("#dpus tbody tr.family-first")].map(r => r.cells[0].innerText)`)
		if len(rows) != 2 || !strings.Contains(rows[0]+rows[1], "MT2242X07701") {
			t.Fatalf("the host page's DPU rows: %q", rows)
		}
		for _, r := range rows {
			has := strings.Contains(r, mac)
			if strings.Contains(r, "MT2242X07701") != has {
				t.Errorf("DPU row %q: BMC MAC shown %v, want it only on the DPU that reported one", r, has)
			}
		}

		run(t, ctx, "the Machines list", chromedp.Navigate(site.srv.URL+"/machines"), poll(`document.querySelector("#hosts") !== null`))
		row := evalJS[string](t, ctx, `document.getElementById("m-`+allocator.HostMachineID(host)+`").innerText`)
		if !strings.Contains(row, "MT2242X07701") || !strings.Contains(row, mac) {
			t.Errorf("the host's row in the Machines list does not show its DPU's BMC MAC:\n%s", row)
		}

		run(t, ctx, "search by the DPU's BMC MAC",
			chromedp.SendKeys(chromedp.CSS(`#global-q`), "1A-2B-3C-4D-77-01\n"),
			poll(`location.pathname === "/machines/`+allocator.DPUMachineID("MT2242X07701")+`"`))
		if head := evalJS[string](t, ctx, `document.querySelector(".machine-head").innerText`); !strings.Contains(head, mac) || !strings.Contains(head, "MT2242X07701") {
			t.Errorf("the DPU page's head does not show its BMC MAC:\n%s", head)
		}
	})
}
