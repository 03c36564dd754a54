package web_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
)

// TestSearchMatchedE2E: part of a BMC MAC typed into the header's search
// lists the host and the DPU it belongs to, and each row's "Matched"
// column names that field (BMC MAC, DPU BMC MAC), not the host's chassis
// serial or the DPU's serial.
func TestSearchMatchedE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		if _, err := site.a.Report(context.Background(), allocator.ReportSpec{BmcMacAddress: "0a:5e:77:00:00:01", ChassisSerialNumber: "CHS-5E01",
			DPUs: []allocator.ReportDPU{{SerialNumber: "MT2242X5E001", BmcMacAddress: "1a:5e:77:00:00:02"}}}); err != nil {
			t.Fatalf("report: %v", err)
		}
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleViewer)
		run(t, ctx, "search part of the BMC MACs",
			chromedp.SendKeys(chromedp.CSS(`#global-q`), "5E-77-00\n"),
			poll(`document.querySelector("#hit-count") !== null`))
		matched := evalJS[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll(".hit-group tbody tr")].map(r =>
			[r.querySelector("a").getAttribute("href"), r.cells[1].innerText.trim()]))`)
		for id, want := range map[string]string{
			allocator.HostMachineID("0a:5e:77:00:00:01"): "BMC MAC 0a:5e:77:00:00:01",
			allocator.DPUMachineID("MT2242X5E001"):       "DPU BMC MAC 1a:5e:77:00:00:02",
		} {
			if got := matched["/machines/"+id]; got != want {
				t.Errorf("the row of %s says Matched %q, want %q (rows %q)", id, got, want, matched)
			}
		}
	})
}
