package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/console"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/views"
)

// Machine: GET /machines/:id — one host or DPU (console.MachineDetail):
// state, ExpectedMachine, DPUs with network configs and bindings, every
// value held, history, and the actions its state and the role allow.
func (h *Console) Machine(c echo.Context) error {
	d, err := h.Reads.MachineDetail(Ctx(c), Param(c, "id"))
	if e, ok := fault.AsError(err); ok && e.Code == fault.CodeNotFound {
		// A deleted machine's link opens what is known of it.
		if gone, gerr := h.Reads.GetDeletedMachine(Ctx(c), Param(c, "id")); gerr == nil {
			return h.deletedMachine(c, gone)
		}
	}
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
	emNames, err := h.Reads.ExpectedMachineNames(Ctx(c), ems)
	if err != nil {
		return err
	}
	for id, n := range emNames {
		v.Names[id] = n
	}
	return render(c, http.StatusOK, views.MachinePage(v))
}

// deletedMachine is the page of a deleted machine: the name it had, when
// and by whom it was deleted, its host, and its audit history.
func (h *Console) deletedMachine(c echo.Context, d *console.DeletedMachine) error {
	page, err := h.AuditLog.List(Ctx(c), audit.EventFilter{Scope: &audit.EventScope{Machines: []string{d.MachineID}}, Limit: 100})
	if err != nil {
		return err
	}
	v := views.DeletedMachineView{Page: h.page(c, d.Name+" (deleted)", "machines"), D: *d, History: page.Items}
	if v.Names, err = h.eventNames(c, v.History, []string{d.MachineID, d.HostMachineID}); err != nil {
		return err
	}
	return render(c, http.StatusOK, views.DeletedMachinePage(v))
}
