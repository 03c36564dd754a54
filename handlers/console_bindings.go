package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/views"
)

// maxBindingAlerts bounds the alerts the dashboard lists per status; the
// rest are counted in one line that links to the DPU bindings page.
const maxBindingAlerts = 5

// bindingAlerts lists DPU bindings in conflict, then pending, for the
// dashboard: at most maxBindingAlerts DPU families of each status
// (allocator.ListBindings, one filtered read per status), then a line
// with how many more there are (the NOC's counts).
func (h *Console) bindingAlerts(c echo.Context) ([]views.BindingAlert, error) {
	var out []views.BindingAlert
	var counts map[string]int64
	for _, status := range []string{allocator.BindingConflict, allocator.BindingPending} {
		page, err := h.A.ListBindings(Ctx(c), allocator.BindingFilter{Status: status, Limit: maxBindingAlerts})
		if err != nil {
			return nil, err
		}
		shown := 0
		for _, b := range page.Items {
			if b.StatusV4 == status && shown < maxBindingAlerts {
				out = append(out, views.BindingAlert{MachineID: b.MachineID, Serial: b.SerialNumber, Family: "IPv4",
					Status: status, Reserved: views.Str(b.ReservedIP), Active: views.Str(b.LoopbackIP), Host: b.HostName})
				shown++
			}
			if b.StatusV6 == status && shown < maxBindingAlerts {
				out = append(out, views.BindingAlert{MachineID: b.MachineID, Serial: b.SerialNumber, Family: "IPv6",
					Status: status, Reserved: views.Str(b.ReservedIPv6), Active: views.Str(b.LoopbackIPv6), Host: b.HostName})
				shown++
			}
		}
		if shown < maxBindingAlerts && page.NextCursor == "" {
			continue
		}
		if counts == nil {
			if counts, err = h.Reads.BindingCounts(Ctx(c)); err != nil {
				return nil, err
			}
		}
		if n := counts[status] - int64(shown); n > 0 {
			out = append(out, views.BindingAlert{Status: status, More: n})
		}
	}
	return out, nil
}

// Bindings: GET /bindings?status=&cursor= — DPU bindings with status
// badges (allocator.ListBindings).
func (h *Console) Bindings(c echo.Context) error {
	v := views.BindingsView{Page: h.page(c, "DPU bindings", "bindings"), Status: c.QueryParam("status")}
	page, err := h.A.ListBindings(Ctx(c), allocator.BindingFilter{Status: v.Status, Limit: 100, Cursor: c.QueryParam("cursor")})
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
	return render(c, status, views.BindingsPage(v))
}
