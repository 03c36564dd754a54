package handlers

import (
	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/views"
)

// bindingAlerts lists DPU bindings in pending or conflict for the
// dashboard and the NOC wallboard.
func (h *Console) bindingAlerts(c echo.Context) ([]views.BindingAlert, error) {
	return nil, nil
}
