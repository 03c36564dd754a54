package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/txn"
)

// TestAuditNamesE2E (docs/console.md "Audit log names"): an audit event
// shows the names it had when it happened. Two hosts are declared by
// ExpectedMachines named rack7-u01 and rack7-u02 and ingested; then the
// first ExpectedMachine is deleted (its host is named by its chassis
// serial from then on) and the second renamed. The audit log, the hosts'
// pages and the deleted ExpectedMachine's page still show
// machine.create of rack7-u01 and rack7-u02 and the ExpectedMachine's
// creation under its old name and its rename under the new one, while
// the pages' headings name the hosts as they are now.
func TestAuditNamesE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		ctx0 := audit.WithActor(context.Background(), "console:dana", "")
		const mac1, mac2 = "0a:00:00:00:50:03", "0a:00:00:00:50:04"
		host1, host2 := allocator.HostMachineID(mac1), allocator.HostMachineID(mac2)
		var ems [2]*allocator.ExpectedMachine
		for i, c := range []struct{ mac, chassis, name, dpu string }{
			{mac1, "CH-5003", "rack7-u01", "MT2242X05003"},
			{mac2, "CH-5004", "rack7-u02", "MT2242X05004"},
		} {
			em, err := site.a.CreateExpectedMachine(ctx0, allocator.ExpectedMachineSpec{BmcMacAddress: c.mac, ChassisSerialNumber: c.chassis,
				Metadata: &allocator.Metadata{Name: c.name}})
			if err != nil {
				t.Fatalf("declare %s: %v", c.name, err)
			}
			ems[i] = em
			if _, err := site.a.Report(ctx0, allocator.ReportSpec{BmcMacAddress: c.mac, ChassisSerialNumber: c.chassis,
				DPUs: []allocator.ReportDPU{{SerialNumber: c.dpu}}}); err != nil {
				t.Fatalf("ingest %s: %v", c.name, err)
			}
		}
		if err := site.a.DeleteExpectedMachine(ctx0, ems[0].ID, txn.IfMatch{}); err != nil {
			t.Fatalf("delete rack7-u01: %v", err)
		}
		if _, err := site.a.PatchExpectedMachine(ctx0, ems[1].ID, []byte(`{"metadata": {"name": "rack7-u02-new"}}`), txn.IfMatch{}); err != nil {
			t.Fatalf("rename rack7-u02: %v", err)
		}

		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleViewer)
		// rowOf is the text of the object cell of the page's event of
		// action whose object links to href.
		rowOf := func(action, href string) string {
			t.Helper()
			js := fmt.Sprintf(`(() => {
				const r = [...document.querySelectorAll("tr[data-event]")].find(r =>
					r.cells[2].innerText.trim() === %q && r.querySelector("td.object a[href='%s']"));
				return r ? [r.querySelector("td.object").innerText.trim()] : [];
			})()`, action, href)
			got := evalJS[[]string](t, ctx, js)
			if len(got) != 1 {
				t.Fatalf("no %s event of %s on %s:\n%s", action, href, evalJS[string](t, ctx, `location.href`), clip(evalJS[string](t, ctx, `document.body.innerText`)))
			}
			return got[0]
		}

		run(t, ctx, "the audit log's machine creations",
			chromedp.Navigate(site.srv.URL+"/events?action=machine.create"),
			poll(`document.querySelector("td.object a[href='/machines/`+host1+`']") !== null`))
		if obj := rowOf("machine.create", "/machines/"+host1); !strings.Contains(obj, "rack7-u01") || strings.Contains(obj, "CH-5003") {
			t.Errorf("machine.create of the host whose ExpectedMachine was deleted reads %q; want rack7-u01, the name it had", obj)
		}
		if obj := rowOf("machine.create", "/machines/"+host2); !strings.Contains(obj, "rack7-u02") || strings.Contains(obj, "rack7-u02-new") {
			t.Errorf("machine.create of the renamed host reads %q; want rack7-u02, the name it had", obj)
		}

		run(t, ctx, "the first host's page",
			chromedp.Navigate(site.srv.URL+"/machines/"+host1),
			poll(`document.querySelector("h1") !== null && document.querySelector("tr[data-event]") !== null`))
		if h1 := evalJS[string](t, ctx, `document.querySelector("h1").innerText`); !strings.Contains(h1, "CH-5003") {
			t.Errorf("the host without an ExpectedMachine is titled %q; want its chassis serial, its name now", h1)
		}
		if obj := rowOf("machine.create", "/machines/"+host1); !strings.Contains(obj, "rack7-u01") {
			t.Errorf("the host's History shows its creation as %q; want rack7-u01", obj)
		}

		run(t, ctx, "the second host's page",
			chromedp.Navigate(site.srv.URL+"/machines/"+host2),
			poll(`document.querySelector("h1") !== null && document.querySelector("tr[data-event]") !== null`))
		if h1 := evalJS[string](t, ctx, `document.querySelector("h1").innerText`); !strings.Contains(h1, "rack7-u02-new") {
			t.Errorf("the renamed host is titled %q; want rack7-u02-new", h1)
		}
		if obj := rowOf("machine.create", "/machines/"+host2); !strings.Contains(obj, "rack7-u02") || strings.Contains(obj, "rack7-u02-new") {
			t.Errorf("the host's History shows its creation as %q; want rack7-u02", obj)
		}
		em2 := "/expected-machines/" + ems[1].ID
		if obj := rowOf("expected_machine.create", em2); !strings.Contains(obj, "rack7-u02") || strings.Contains(obj, "rack7-u02-new") {
			t.Errorf("the ExpectedMachine's creation reads %q; want rack7-u02", obj)
		}
		if obj := rowOf("expected_machine.update", em2); !strings.Contains(obj, "rack7-u02-new") {
			t.Errorf("the ExpectedMachine's rename reads %q; want rack7-u02-new", obj)
		}

		run(t, ctx, "the deleted ExpectedMachine's page",
			chromedp.Navigate(site.srv.URL+"/expected-machines/"+ems[0].ID),
			poll(`document.querySelector("tr[data-event]") !== null`))
		if obj := rowOf("expected_machine.create", "/expected-machines/"+ems[0].ID); !strings.Contains(obj, "rack7-u01") {
			t.Errorf("the deleted ExpectedMachine's creation reads %q; want rack7-u01", obj)
		}
	})
}
