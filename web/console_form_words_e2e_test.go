package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/fault"
)

// TestFormMessagesInOperatorWordsE2E: the ExpectedMachine form names a
// DPU of the record by its serial and row ("by DPU MT2242X00002 (row 1)"),
// never by the request path expected_dpus[0], which REST keeps; a value
// outside the pool is answered with the pool's explicit ranges; a value
// refused for being held elsewhere gets no amber "binding pending" note
// under its red error.
func TestFormMessagesInOperatorWordsE2E(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, site *consoleSite) {
		ctx := newBrowser(t, 1280, 900)
		signIn(t, ctx, site, auth.RoleOperator)
		row2 := `#dpu-rows .dpu-row:nth-child(2) `
		errOf := func(row, field string) string {
			return `document.querySelector('` + row + `.error[id$="-` + field + `"]').innerText`
		}
		save := chromedp.Click(chromedp.CSS(`#em-form button.save`))
		run(t, ctx, "a serial given twice in the record",
			chromedp.Navigate(site.srv.URL+"/expected-machines/"+emID(t, site, "1a:1b:1c:1d:1e:20")+"/edit"),
			poll(`document.querySelectorAll("#dpu-rows .dpu-row").length === 2`),
			setInput(row2+`input[name=dpu_serial]`, "MT2242X00002"),
			save,
			poll(errOf(row2, "serial_number")+`.includes("MT2242X00002 is already used")`),
		)
		if msg := evalJS[string](t, ctx, errOf(row2, "serial_number")); !strings.Contains(msg, "by DPU MT2242X00002 (row 1)") || strings.Contains(msg, "expected_dpus") {
			t.Errorf("the duplicate serial says %q; want it named as DPU MT2242X00002 (row 1)", msg)
		}
		run(t, ctx, "a loopback given twice in the record",
			setInput(row2+`input[name=dpu_serial]`, "MT2242X00003"),
			setInput(row2+`input[name=dpu_ip]`, "10.180.62.201"),
			save,
			poll(errOf(row2, "loopback_ip")+`.includes("10.180.62.201 is already reserved")`),
		)
		if msg := evalJS[string](t, ctx, errOf(row2, "loopback_ip")); !strings.Contains(msg, "by DPU MT2242X00002 (row 1)") || strings.Contains(msg, "expected_dpus") {
			t.Errorf("the duplicate loopback says %q; want it named as DPU MT2242X00002 (row 1)", msg)
		}
		run(t, ctx, "a loopback outside the pool",
			setInput(row2+`input[name=dpu_ip]`, "10.99.0.5"),
			save,
			poll(errOf(row2, "loopback_ip")+`.includes("10.99.0.5 is not in pool")`),
		)
		if msg := evalJS[string](t, ctx, errOf(row2, "loopback_ip")); !strings.Contains(msg, "10.180.62.200..10.180.62.255") {
			t.Errorf("a value outside the pool says %q; want the explicit range 10.180.62.200..10.180.62.255", msg)
		}

		// rack8-u01's DPU is active with 10.180.62.210; 10.180.62.200 is
		// held by MT2242X00001.
		row1 := `#dpu-rows .dpu-row:nth-child(1) `
		warn := `document.querySelector('` + row1 + `.warn-msg[id$="-loopback_ip"]').innerText`
		run(t, ctx, "an active DPU's reservation set to a value held elsewhere",
			chromedp.Navigate(site.srv.URL+"/expected-machines/"+emID(t, site, "2a:00:00:00:00:31")+"/edit"),
			poll(`document.querySelector("#em-form") !== null`),
			setInput(row1+`input[name=dpu_ip]`, "10.180.62.200"),
			save,
			poll(errOf(row1, "loopback_ip")+`.includes("MT2242X00001")`),
		)
		if w := evalJS[string](t, ctx, warn); strings.TrimSpace(w) != "" {
			t.Errorf("the refused value also gets the note %q under its error", w)
		}
		run(t, ctx, "as-you-type validation does the same",
			setInput(row1+`input[name=dpu_ip]`, "10.180.62.212"),
			poll(warn+`.includes("10.180.62.212")`),
			setInput(row1+`input[name=dpu_ip]`, "10.180.62.200"),
			poll(errOf(row1, "loopback_ip")+`.includes("MT2242X00001") && `+warn+`.trim() === ""`),
		)

		// REST keeps the request paths: they are the API's contract.
		ctxA := audit.WithActor(context.Background(), "test:rest", "")
		_, err := site.a.CreateExpectedMachine(ctxA, allocator.ExpectedMachineSpec{BmcMacAddress: "4a:00:00:00:00:01",
			ExpectedDPUs: &[]allocator.ExpectedDPU{{SerialNumber: "MT9000X00001"}, {SerialNumber: "MT9000X00001"}}})
		if e, ok := fault.AsError(err); !ok || e.Field != "expected_dpus[1].serial_number" || !strings.Contains(e.Message, "expected_dpus[0]") {
			t.Errorf("the API's duplicate serial is %v; want the field expected_dpus[1].serial_number naming expected_dpus[0]", err)
		}
	})
}
