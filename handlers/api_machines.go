package handlers

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
)

// Report: POST /api/v1/site-explorer/reports → 200 {"machines", "incomplete"}.
func (h *API) Report(c echo.Context) error {
	var spec allocator.ReportSpec
	if err := DecodeJSON(c, &spec); err != nil {
		return err
	}
	res, err := h.A.Report(Ctx(c), spec)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

// Discover: POST /api/v1/machines:discover → 200 {"machines", "incomplete"}.
func (h *API) Discover(c echo.Context) error {
	var spec allocator.DiscoverSpec
	if err := DecodeJSON(c, &spec); err != nil {
		return err
	}
	res, err := h.A.Discover(Ctx(c), spec)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

// ListMachines: GET /api/v1/machines?state=&limit=&cursor=.
func (h *API) ListMachines(c echo.Context) error {
	if err := OnlyQuery(c, "state", "limit", "cursor"); err != nil {
		return err
	}
	limit, err := Limit(c)
	if err != nil {
		return err
	}
	page, err := h.A.ListMachines(Ctx(c), allocator.MachineFilter{State: c.QueryParam("state"), Limit: limit, Cursor: c.QueryParam("cursor")})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// GetMachine: GET /api/v1/machines/{id} (machine_id, host BMC MAC or DPU serial).
func (h *API) GetMachine(c echo.Context) error {
	m, err := h.A.GetMachine(Ctx(c), Param(c, "id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

// MachineAction: POST /api/v1/machines/{id}:decommission → 200 with the
// machine. The route is the machine's path with the action suffix, so the
// id parameter carries ":decommission".
func (h *API) MachineAction(c echo.Context) error {
	id, ok := strings.CutSuffix(Param(c, "id"), ":decommission")
	if !ok {
		return fault.Errf(fault.CodeNotFound, "", "unknown action on machine %q (want :decommission)", Param(c, "id"))
	}
	m, err := h.A.Decommission(Ctx(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

// forceParam reads ?force= as a boolean (absent: false); anything but
// true/false/1/0 is 422 invalid.
func forceParam(c echo.Context) (bool, error) {
	switch strings.ToLower(c.QueryParam("force")) {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	}
	return false, fault.Errf(fault.CodeInvalid, "force", "force %q must be true or false", c.QueryParam("force"))
}

// DeleteImpact: GET /api/v1/machines/{id}/delete-impact?force=true.
func (h *API) DeleteImpact(c echo.Context) error {
	force, err := forceParam(c)
	if err != nil {
		return err
	}
	imp, err := h.A.DeleteImpact(Ctx(c), Param(c, "id"), force)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, imp)
}

// DeleteMachine: DELETE /api/v1/machines/{id}[?force=true] → 204. The route
// needs operator; a force delete needs admin (web.APIQueryRoles).
func (h *API) DeleteMachine(c echo.Context) error {
	force, err := forceParam(c)
	if err != nil {
		return err
	}
	if _, err := h.A.DeleteMachine(Ctx(c), Param(c, "id"), force); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// ListBindings: GET /api/v1/dpu-bindings?status=&limit=&cursor=.
func (h *API) ListBindings(c echo.Context) error {
	if err := OnlyQuery(c, "status", "limit", "cursor"); err != nil {
		return err
	}
	limit, err := Limit(c)
	if err != nil {
		return err
	}
	page, err := h.A.ListBindings(Ctx(c), allocator.BindingFilter{Status: c.QueryParam("status"), Limit: limit, Cursor: c.QueryParam("cursor")})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}
