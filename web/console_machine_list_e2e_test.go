package web_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
)

// TestMachineListByNameE2E: the Machines list shows hosts in the order of
// the names it shows, not of their machine ids, and a DPU discovered
// without a host is not a host row: it is listed apart, under "DPUs
// without a host".
func TestMachineListByNameE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		if _, err := site.a.Discover(context.Background(), allocator.DiscoverSpec{SerialNumber: "MT2242X00777"}); err != nil {
			t.Fatalf("discover: %v", err)
		}
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleViewer)
		run(t, ctx, "the machine list", chromedp.Navigate(site.srv.URL+"/machines"), poll(`document.querySelector("#hosts tbody tr a.name") !== null`))
		names := evalJS[[]string](t, ctx, `[...document.querySelectorAll("#hosts tbody tr a.name")].map(a => a.innerText.trim())`)
		if len(names) < 4 {
			t.Fatalf("the host list shows %v; the seed has four hosts", names)
		}
		sorted := append([]string(nil), names...)
		sort.SliceStable(sorted, func(i, j int) bool { return strings.ToLower(sorted[i]) < strings.ToLower(sorted[j]) })
		if strings.Join(names, " ") != strings.Join(sorted, " ") {
			t.Errorf("hosts are listed as %v, not by name (%v)", names, sorted)
		}
		if txt := evalJS[string](t, ctx, `document.querySelector("#hosts").innerText`); strings.Contains(txt, "MT2242X00777") {
			t.Errorf("the DPU without a host is listed as a host row:\n%s", clip(txt))
		}
		if !evalJS[bool](t, ctx, `document.querySelector("#hostless") !== null && document.querySelector("#hostless").innerText.includes("MT2242X00777") && document.querySelector("#hostless-title").innerText.includes("without a host")`) {
			t.Errorf("the DPU without a host is not listed under DPUs without a host")
		}
	})
}
