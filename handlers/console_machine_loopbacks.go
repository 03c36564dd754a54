package handlers

import (
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/views"
)

// EnsureLoopbacks: POST /machines/:id/ensure-loopbacks (operator) — after
// an operator fixed what kept a DPU's loopback from being assigned (the
// ExpectedMachines of a misplaced DPU, a value freed, a range added), this
// runs allocator.EnsureLoopbacks for the DPU, or for every DPU of a host,
// now instead of at the next report. An active value is never readdressed;
// the flash says what is still missing and why.
func (h *Console) EnsureLoopbacks(c echo.Context) error {
	m, err := h.A.GetMachine(Ctx(c), Param(c, "id"))
	if err != nil {
		return err
	}
	dpus := m.DPUs
	if m.Kind == allocator.KindDPU {
		dpus = []allocator.Machine{*m}
	}
	var left []string
	for _, d := range dpus {
		inc, err := h.A.EnsureLoopbacks(Ctx(c), d.MachineID)
		if err != nil {
			if isFormError(err) {
				e, _ := fault.AsError(err)
				return h.redirect(c, views.MachineURL(m.MachineID), "bad", e.Message)
			}
			return err
		}
		for _, x := range inc {
			left = append(left, d.SerialNumber+" "+x.Family+": "+x.Message)
		}
	}
	if len(left) > 0 {
		return h.redirect(c, views.MachineURL(m.MachineID), "warn", "Loopbacks of "+m.Name+" checked; still not assigned — "+strings.Join(left, "; ")+".")
	}
	return h.redirect(c, views.MachineURL(m.MachineID), "ok", "Every loopback of "+m.Name+" is assigned.")
}
