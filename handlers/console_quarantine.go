package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/views"
)

// Quarantine: GET /quarantine — every quarantined value of every pool with
// the host or DPU it came from (by the name it had), when and by whom it
// was quarantined and when it frees itself; admins unquarantine from here.
func (h *Console) Quarantine(c echo.Context) error {
	vals, err := h.Reads.QuarantinedValues(Ctx(c), 0)
	if err != nil {
		return err
	}
	v := views.QuarantineView{Page: h.page(c, "Quarantine", "pools"), Values: vals, Hold: h.A.QuarantineHold()}
	return render(c, http.StatusOK, views.QuarantinePage(v))
}
