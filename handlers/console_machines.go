package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/views"
)

// Machines: GET /machines?state=&cursor= — managed hosts by name with
// their DPUs and network configs (allocator.ListHostsByName), and on the
// first page the DPUs without a host in their own section.
func (h *Console) Machines(c echo.Context) error {
	v := views.MachinesView{Page: h.page(c, "Machines", "machines"), State: c.QueryParam("state")}
	cursor := c.QueryParam("cursor")
	page, err := h.Reads.ListHostsByName(Ctx(c), allocator.MachineFilter{State: v.State, Limit: 100, Cursor: cursor})
	if err == nil && cursor == "" {
		v.Hostless, v.HostlessMore, err = h.Reads.ListHostlessDPUs(Ctx(c), v.State, 100)
	}
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
	return render(c, status, views.MachinesPage(v))
}
