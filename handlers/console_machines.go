package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/views"
)

// Machines: GET /machines?state=&cursor= — managed hosts with DPUs and
// network configs (allocator.ListMachines).
func (h *Console) Machines(c echo.Context) error {
	v := views.MachinesView{Page: h.page(c, "Machines", "machines"), State: c.QueryParam("state")}
	page, err := h.A.ListMachines(Ctx(c), allocator.MachineFilter{State: v.State, Limit: 100, Cursor: c.QueryParam("cursor")})
	status := http.StatusOK
	if err != nil {
		if !isFormError(err) {
			return err
		}
		e, _ := allocator.AsError(err)
		v.Err, status = e.Message, formStatus(err)
	} else {
		v.Items, v.Next = page.Items, page.NextCursor
	}
	return render(c, status, views.MachinesPage(v))
}
