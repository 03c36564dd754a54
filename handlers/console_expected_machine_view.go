package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/console"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/views"
)

// ExpectedMachine: GET /expected-machines/:id — the read-only view of one
// ExpectedMachine (every role), with its host and the bindings of its DPUs
// once ingested.
func (h *Console) ExpectedMachine(c echo.Context) error {
	em, err := h.A.GetExpectedMachine(Ctx(c), Param(c, "id"))
	if e, ok := fault.AsError(err); ok && e.Code == fault.CodeNotFound {
		// A deleted ExpectedMachine's link opens what the audit log
		// knows of it, as a deleted machine's does.
		if gone, gerr := h.Reads.GetDeletedExpectedMachine(Ctx(c), Param(c, "id")); gerr == nil {
			return h.deletedExpectedMachine(c, gone)
		}
	}
	if err != nil {
		return err
	}
	name := allocator.ExpectedMachineName(em.Metadata.Name, em.BmcMacAddress)
	v := views.EMView{Page: h.page(c, name, "expected"), EM: *em, Bindings: map[string]allocator.Binding{}}
	if m, err := h.A.GetMachine(Ctx(c), allocator.HostMachineID(em.BmcMacAddress)); err == nil {
		v.Host = m
	} else if e, ok := fault.AsError(err); !ok || e.Code != fault.CodeNotFound {
		return err
	} else if d, err := h.Reads.GetDeletedMachine(Ctx(c), allocator.HostMachineID(em.BmcMacAddress)); err == nil {
		// Its host was deleted: name it as it was, link its page (its
		// history) and list what was quarantined from it.
		v.DeletedHost = d
		if v.Quarantined, err = h.Reads.QuarantinedFromHost(Ctx(c), d.MachineID); err != nil {
			return err
		}
	} else if e, ok := fault.AsError(err); !ok || e.Code != fault.CodeNotFound {
		return err
	}
	for _, d := range em.ExpectedDPUs {
		b, err := h.A.GetBinding(Ctx(c), d.SerialNumber)
		if err == nil {
			v.Bindings[d.SerialNumber] = *b
		} else if e, ok := fault.AsError(err); !ok || e.Code != fault.CodeNotFound {
			return err
		}
	}
	return render(c, http.StatusOK, views.EMViewPage(v))
}

// deletedExpectedMachine is the page of a deleted ExpectedMachine: its
// last state, when and by whom it was deleted, and its events.
func (h *Console) deletedExpectedMachine(c echo.Context, d *console.DeletedExpectedMachine) error {
	v := views.DeletedEMView{Page: h.page(c, d.Name+" (deleted)", "expected"), D: *d}
	var err error
	if v.Names, err = h.eventNames(c, d.History, nil); err != nil {
		return err
	}
	v.Names[d.ID] = d.Name
	return render(c, http.StatusOK, views.DeletedEMPage(v))
}
