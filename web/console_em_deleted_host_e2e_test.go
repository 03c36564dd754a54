package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
)

// TestExpectedMachineOfForceDeletedHostE2E: the page of an ExpectedMachine
// whose host was force-deleted names the deleted host as it was, links
// its history (the deleted machine's page) and lists the values
// quarantined from it, instead of "Not ingested yet" with nothing.
func TestExpectedMachineOfForceDeletedHostE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		host := allocator.HostMachineID("1a:1b:1c:1d:1e:20")
		ctx0 := audit.WithActor(context.Background(), "console:bob", "")
		if _, err := site.a.DeleteMachine(ctx0, host, true); err != nil {
			t.Fatalf("force delete: %v", err)
		}
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleViewer)
		run(t, ctx, "the ExpectedMachine's page",
			chromedp.Navigate(site.srv.URL+"/expected-machines/"+emID(t, site, "1a:1b:1c:1d:1e:20")),
			poll(`document.querySelector("h1") !== null`),
		)
		if !evalJS[bool](t, ctx, `document.querySelector("#deleted-host") !== null`) {
			t.Fatalf("the page does not show the deleted host:\n%s", clip(evalJS[string](t, ctx, `document.body.innerText`)))
		}
		txt := evalJS[string](t, ctx, `document.querySelector("#deleted-host").innerText`)
		if !strings.Contains(txt, "rack7-u14") || !strings.Contains(txt, "console:bob") || strings.Contains(txt, "Not ingested") {
			t.Errorf("the deleted host is shown as:\n%s", txt)
		}
		rows := evalJS[string](t, ctx, `document.querySelector("#em-quarantined") ? document.querySelector("#em-quarantined").innerText : ""`)
		if !strings.Contains(rows, "MT2242X00003") || strings.Contains(rows, "machine/") {
			t.Errorf("the values quarantined from the host are not listed by DPU:\n%s", rows)
		}
		if strings.Contains(rows, "SN-LAB-1") || strings.Contains(rows, "MT2242X00099") {
			t.Errorf("values of another deleted host are listed:\n%s", rows)
		}
		run(t, ctx, "its history link",
			chromedp.Evaluate[chromedp.Void](`document.querySelector("#deleted-host a[href='/machines/`+host+`']").click(), true`),
			poll(`location.pathname === "/machines/`+host+`" && document.querySelector("h1").innerText.includes("rack7-u14")`),
			poll(`document.body.innerText.includes("machine.force_delete")`),
		)
	})
}
