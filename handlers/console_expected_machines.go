package handlers

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/views"
)

// ExpectedMachines: GET /expected-machines?q=&cursor= — list with search
// (a MAC, or part of one, in any notation finds its BMC MACs:
// allocator.ExpectedMachineFilter).
func (h *Console) ExpectedMachines(c echo.Context) error {
	v := views.EMListView{Page: h.page(c, "Expected machines", "expected"), Query: strings.TrimSpace(c.QueryParam("q"))}
	page, err := h.A.ListExpectedMachines(Ctx(c), allocator.ExpectedMachineFilter{Search: v.Query, Limit: 100, Cursor: c.QueryParam("cursor")})
	status := http.StatusOK
	if err != nil {
		if !isFormError(err) {
			return err
		}
		e, _ := fault.AsError(err)
		v.Err, status = e.Message, formStatus(err)
	} else {
		v.Items, v.Next = page.Items, page.NextCursor
	}
	return render(c, status, views.EMListPage(v))
}

// NewExpectedMachine: GET /expected-machines/new (operator).
func (h *Console) NewExpectedMachine(c echo.Context) error {
	v := views.EMFormView{Page: h.page(c, "New ExpectedMachine", "expected"), Form: views.EMForm{DPUs: []views.DPURow{views.NewDPURow()}}}
	var err error
	if v.Examples, err = h.loopbackExamples(c); err != nil {
		return err
	}
	return render(c, http.StatusOK, views.EMFormPage(v))
}

// EditExpectedMachine: GET /expected-machines/:id/edit (operator). The
// password is never put into the page.
func (h *Console) EditExpectedMachine(c echo.Context) error {
	em, err := h.A.GetExpectedMachine(Ctx(c), Param(c, "id"))
	if err != nil {
		return err
	}
	v := views.EMFormView{Page: h.page(c, "Edit "+allocator.ExpectedMachineName(em.Metadata.Name, em.BmcMacAddress), "expected"), Form: views.EMFormFrom(em)}
	if v.Msgs, err = h.pendingMessages(c, v.Form, ""); err != nil {
		return err
	}
	if v.Examples, err = h.loopbackExamples(c); err != nil {
		return err
	}
	return render(c, http.StatusOK, views.EMFormPage(v))
}

// DPURow: GET /expected-machines/dpu-row — an empty ExpectedDpu row that
// "Add DPU" appends in place.
func (h *Console) DPURow(c echo.Context) error {
	ex, err := h.loopbackExamples(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.DPURowFragment(views.NewDPURow(), nil, ex))
}

// emForm reads the ExpectedMachine form (rows in order) and the password.
func emForm(c echo.Context) (views.EMForm, string, error) {
	vals, err := c.FormParams()
	if err != nil {
		return views.EMForm{}, "", fault.Errf(fault.CodeBadRequest, "", "cannot read the form: %v", err)
	}
	get := func(k string) string { return strings.TrimSpace(vals.Get(k)) }
	f := views.EMForm{ID: get("id"), MAC: get("mac"), Username: get("username"), Chassis: get("chassis"),
		Name: get("name"), Description: get("description"), Labels: vals.Get("labels"), Fallback: vals.Get("fallback"), SkuID: get("sku_id")}
	if s := get("version"); s != "" {
		if f.Version, err = strconv.ParseInt(s, 10, 64); err != nil {
			return f, "", fault.Errf(fault.CodeBadRequest, "version", "version %q is not a number", s)
		}
	}
	keys, serials, ips, ip6s := vals["dpu_key"], vals["dpu_serial"], vals["dpu_ip"], vals["dpu_ip6"]
	n := min(len(keys), len(serials), len(ips), len(ip6s))
	if m := max(len(keys), len(serials), len(ips), len(ip6s)); m != n {
		// Every row posts its four fields; a row missing one is a broken
		// or hand-made post, never a row to drop silently.
		var missing []string
		for name, xs := range map[string][]string{"dpu_key": keys, "dpu_serial": serials, "dpu_ip": ips, "dpu_ip6": ip6s} {
			if len(xs) == n {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		fields := "field"
		if len(missing) > 1 {
			fields = "fields"
		}
		return f, "", fault.Errf(fault.CodeInvalid, fmt.Sprintf("expected_dpus[%d]", n),
			"DPU row %d of %d lacks the form %s %s: every row sends dpu_key, dpu_serial, dpu_ip and dpu_ip6 (reload the form)",
			n+1, m, fields, strings.Join(missing, ", "))
	}
	for i := 0; i < n; i++ {
		f.DPUs = append(f.DPUs, views.DPURow{Key: keys[i], Serial: strings.TrimSpace(serials[i]),
			IP: strings.TrimSpace(ips[i]), IPv6: strings.TrimSpace(ip6s[i])})
	}
	return f, vals.Get("password"), nil
}

// ValidateExpectedMachine: POST /expected-machines/validate (operator) —
// as-you-type validation by allocator.ExpectedMachineProblems, the same
// rules every write applies. It answers every error element of the form
// out-of-band: 422 when there is a problem, 200 when the record would be
// accepted now. Nothing is written.
func (h *Console) ValidateExpectedMachine(c echo.Context) error {
	f, pw, err := emForm(c)
	if err != nil {
		return err
	}
	problems, err := h.A.ExpectedMachineProblems(Ctx(c), f.ID, f.Spec(pw))
	if err != nil {
		return err
	}
	status := http.StatusOK
	if len(problems) > 0 {
		status = http.StatusUnprocessableEntity
	}
	warn, err := h.pendingMessages(c, f, pw)
	if err != nil {
		return err
	}
	msgs := f.Messages(problems).WithWarnings(warn)
	return render(c, status, views.EMValidation(f, msgs))
}

// pendingMessages are the warnings beside the reservation fields of the
// form's DPUs that are active and would keep another value
// (console.PendingLoopbacks): shown before saving, as the binding rules
// decide.
func (h *Console) pendingMessages(c echo.Context, f views.EMForm, pw string) (views.FieldMessages, error) {
	ps, err := h.Reads.PendingLoopbacks(Ctx(c), f.ID, f.Spec(pw))
	if err != nil {
		return nil, err
	}
	return f.Warnings(ps), nil
}
