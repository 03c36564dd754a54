package web

import (
	"net/http"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/handlers"
)

// consoleExtraRoutes are the console routes of ExpectedMachines, machines
// and DPU bindings (part of ConsoleRoutes), served by the console's one
// set of handlers h.
func consoleExtraRoutes(h *handlers.Console) []Route {
	V, O, A := auth.RoleViewer, auth.RoleOperator, auth.RoleAdmin
	return []Route{
		{http.MethodGet, "/expected-machines", V, h.ExpectedMachines},
		{http.MethodGet, "/expected-machines/new", O, h.NewExpectedMachine},
		{http.MethodGet, "/expected-machines/dpu-row", O, h.DPURow},
		{http.MethodGet, "/expected-machines/import", O, h.ImportForm},
		{http.MethodPost, "/expected-machines/import", O, h.Import},
		{http.MethodPost, "/expected-machines/validate", O, h.ValidateExpectedMachine},
		{http.MethodPost, "/expected-machines", O, h.SaveExpectedMachine},
		{http.MethodGet, "/expected-machines/:id", V, h.ExpectedMachine},
		{http.MethodGet, "/expected-machines/:id/edit", O, h.EditExpectedMachine},
		{http.MethodGet, "/expected-machines/:id/delete", O, h.ConfirmDeleteExpectedMachine},
		{http.MethodPost, "/expected-machines/:id", O, h.SaveExpectedMachine},
		{http.MethodPost, "/expected-machines/:id/delete", O, h.DeleteExpectedMachine},
		{http.MethodGet, "/machines", V, h.Machines},
		{http.MethodGet, "/machines/:id", V, h.Machine},
		{http.MethodGet, "/machines/:id/impact", O, h.MachineImpact},
		{http.MethodPost, "/machines/:id/decommission", O, h.Decommission},
		{http.MethodPost, "/machines/:id/ensure-loopbacks", O, h.EnsureLoopbacks},
		{http.MethodPost, "/machines/:id/delete", O, h.DeleteMachine},
		{http.MethodPost, "/machines/:id/force-delete", A, h.ForceDeleteMachine},
		{http.MethodGet, "/bindings", V, h.Bindings},
		{http.MethodGet, "/search", V, h.Search},
		{http.MethodGet, "/api-docs", V, h.APIDocs},
	}
}
