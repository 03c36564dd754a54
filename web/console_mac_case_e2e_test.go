package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
)

// TestSearchEveryMACNotationE2E: part of a host's BMC MAC, and of a DPU's,
// typed into the header's search in every notation — '-' or ':' between
// octets, starting or ending inside an octet, Cisco's '.' between groups
// of four, bare hex, any case — lists that host or DPU, as its ':'
// spelling does; typed into the ExpectedMachines list's search, the same
// notations list a record not yet ingested. On both databases.
func TestSearchEveryMACNotationE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		ctx := context.Background()
		if _, err := site.a.Report(ctx, allocator.ReportSpec{BmcMacAddress: "0a:5c:0f:00:00:01", ChassisSerialNumber: "CH-5C01",
			DPUs: []allocator.ReportDPU{{SerialNumber: "MT5C0F0001", BmcMacAddress: "1a:5d:0e:00:00:02"}}}); err != nil {
			t.Fatalf("report: %v", err)
		}
		if _, err := site.a.CreateExpectedMachine(ctx, allocator.ExpectedMachineSpec{BmcMacAddress: "0a:5e:0d:00:00:03",
			Metadata: &allocator.Metadata{Name: "rack5-u03"}}); err != nil {
			t.Fatal(err)
		}
		b := newBrowser(t, 1280, 900)
		signIn(t, b, site, auth.RoleViewer)
		host := "/machines/" + allocator.HostMachineID("0a:5c:0f:00:00:01")
		dpu := "/machines/" + allocator.DPUMachineID("MT5C0F0001")
		for q, href := range map[string]string{
			"5c:0f:0": host, "5c-0f-0": host, "5C-0F-0": host, "c-0f-00": host, "5c0f.0": host, "0A5C.0F00": host, "5C0F0": host, "c0f00": host,
			"5d:0e:0": dpu, "5d-0e-0": dpu, "d-0e-00": dpu, "1A5D.0E": dpu, "5d0e0": dpu, "D0E00": dpu,
		} {
			run(t, b, "search "+q,
				chromedp.Navigate(site.srv.URL+"/"),
				chromedp.WaitVisible(chromedp.CSS(`#global-q`)),
				chromedp.SendKeys(chromedp.CSS(`#global-q`), q+"\n"),
				poll(`location.pathname === "/search"`),
			)
			links := evalJS[[]string](t, b, `[...document.querySelectorAll("main a")].map(a => a.getAttribute("href"))`)
			found := false
			for _, l := range links {
				found = found || l == href
			}
			if !found {
				t.Errorf("search %q does not list %s: %s", q, href, evalJS[string](t, b, `document.querySelector("main").innerText`))
			}
		}
		for _, q := range []string{"5e:0d:00", "5e-0d-00", "E-0D-00-00-0", "5E0D.0000.03", "0a5e.0d", "5E0D00", "e0d00"} {
			run(t, b, "list search "+q,
				chromedp.Navigate(site.srv.URL+"/expected-machines"),
				chromedp.WaitVisible(chromedp.CSS(`#em-q`)),
				chromedp.SendKeys(chromedp.CSS(`#em-q`), q+"\n"),
				poll(`location.search.includes("q=")`),
			)
			if text := evalJS[string](t, b, `document.querySelector("main").innerText`); !strings.Contains(text, "0a:5e:0d:00:00:03") {
				t.Errorf("the ExpectedMachines list's search for %q does not list 0a:5e:0d:00:00:03: %s", q, text)
			}
		}
	})
}

// TestExpectedMachineSerialInAnotherCaseE2E: with MT2242X00001 declared
// by rack7-u12, the console's ExpectedMachine form refuses a DPU declared
// as mt2242x00001: the message beside the serial names the stored
// spelling and the record that declares it, saving is refused with it,
// and nothing is created. On both databases.
func TestExpectedMachineSerialInAnotherCaseE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		b := newBrowser(t, 1280, 900)
		signIn(t, b, site, auth.RoleOperator)
		serialErr := `document.querySelector('.dpu-row .error[id$="-serial_number"]')`
		run(t, b, "declare the serial in lower case",
			chromedp.Navigate(site.srv.URL+"/expected-machines/new"),
			chromedp.WaitVisible(chromedp.CSS(`#em-form`)),
			chromedp.SendKeys(chromedp.CSS(`#f-mac`), "0a:00:00:00:77:01"),
			chromedp.SendKeys(chromedp.CSS(`.dpu-row input[name=dpu_serial]`), "mt2242x00001"),
			poll(serialErr+`.innerText.includes("MT2242X00001") && `+serialErr+`.innerText.includes("rack7-u12")`),
		)
		run(t, b, "saving is refused with the message",
			// Blank the as-you-type message: the save's answer writes it again.
			chromedp.Evaluate[chromedp.Void](`(() => { `+serialErr+`.textContent = ""; return true })()`),
			chromedp.Click(chromedp.CSS(`#em-form button.save`)),
			poll(`location.pathname === "/expected-machines/new" && `+serialErr+`.innerText.includes("MT2242X00001")`),
		)
		if _, err := site.a.GetExpectedMachine(context.Background(), "0a:00:00:00:77:01"); err == nil {
			t.Fatal("the refused ExpectedMachine was created")
		}
	})
}
