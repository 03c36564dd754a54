package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/views"
)

// Machine: GET /machines/:id — one host or DPU (allocator.MachineDetail):
// state, ExpectedMachine, DPUs with network configs and bindings, every
// value held, history, and the actions its state and the role allow.
func (h *Console) Machine(c echo.Context) error {
	d, err := h.A.MachineDetail(Ctx(c), Param(c, "id"))
	if err != nil {
		return err
	}
	v := views.MachineView{Page: h.page(c, d.Machine.Name, "machines"), D: *d}
	if v.Names, err = h.eventNames(c, d.History, machineIDsOf(d)); err != nil {
		return err
	}
	var ems []string
	for _, b := range d.Bindings {
		if b.ExpectedMachineID != nil {
			ems = append(ems, *b.ExpectedMachineID)
		}
	}
	emNames, err := h.A.ExpectedMachineNames(Ctx(c), ems)
	if err != nil {
		return err
	}
	for id, n := range emNames {
		v.Names[id] = n
	}
	return render(c, http.StatusOK, views.MachinePage(v))
}
