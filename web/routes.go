package web

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/handlers"
)

// Route is one authenticated API route and the least role it needs. The
// table is the single list of API routes: the security test walks it so a
// new route cannot be forgotten.
type Route struct {
	Method  string
	Path    string
	Role    auth.Role
	Handler echo.HandlerFunc
}

// APIRoutes lists every /api/v1 route (paths relative to /api/v1; an
// escaped colon, `\:`, is a literal colon of an action such as pools:load).
func (s *Server) APIRoutes() []Route {
	h := s.api
	V, O, A := auth.RoleViewer, auth.RoleOperator, auth.RoleAdmin
	return []Route{
		{http.MethodGet, "/pools", V, h.ListPools},
		{http.MethodPost, "/pools", A, h.CreatePool},
		{http.MethodPost, `/pools\:load`, A, h.LoadPools},
		{http.MethodGet, `/pools\:check`, V, h.CheckPools},
		{http.MethodGet, "/pools/:name", V, h.GetPool},
		{http.MethodPost, "/pools/:name/ranges", A, h.AddRange},
		{http.MethodGet, "/pools/:name/ranges/:id", V, h.GetRange},
		{http.MethodPatch, "/pools/:name/ranges/:id", A, h.UpdateRange},
		{http.MethodDelete, "/pools/:name/ranges/:id", A, h.RemoveRange},
		{http.MethodGet, "/pools/:name/allocations", V, h.ListAllocations},
		{http.MethodPost, "/pools/:name/allocations", O, h.Allocate},
		{http.MethodPost, `/pools/:name/allocations\:batch`, O, h.AllocateBatch},
		{http.MethodGet, "/pools/:name/allocations/:value", V, h.GetAllocation},
		{http.MethodDelete, "/pools/:name/allocations/:value", O, h.Release},
		{http.MethodPost, "/pools/:name/allocations/:value", A, h.Unquarantine},
		{http.MethodGet, "/addresses/:value", V, h.LookupAddress},
		{http.MethodGet, "/events", V, h.ListEvents},
		{http.MethodGet, `/events\:stream`, V, h.StreamEvents},
		{http.MethodGet, "/webhooks", A, h.ListWebhooks},
		{http.MethodPost, "/webhooks", A, h.CreateWebhook},
		{http.MethodGet, "/webhooks/:id", A, h.GetWebhook},
		{http.MethodPatch, "/webhooks/:id", A, h.PatchWebhook},
		{http.MethodDelete, "/webhooks/:id", A, h.DeleteWebhook},
		{http.MethodGet, "/webhooks/:id/deliveries", A, h.ListDeliveries},
		{http.MethodPost, "/webhooks/:id/deliveries/:delivery", A, h.Redeliver},
		{http.MethodPost, "/site-explorer/reports", O, h.Report},
		{http.MethodPost, `/machines\:discover`, O, h.Discover},
		{http.MethodGet, "/machines", V, h.ListMachines},
		{http.MethodGet, "/machines/:id", V, h.GetMachine},
		{http.MethodPost, "/machines/:id", O, h.MachineAction},
		{http.MethodGet, "/machines/:id/delete-impact", V, h.DeleteImpact},
		{http.MethodDelete, "/machines/:id", O, h.DeleteMachine},
		{http.MethodGet, "/dpu-bindings", V, h.ListBindings},
		{http.MethodGet, "/expected-machines", V, h.ListExpectedMachines},
		{http.MethodPost, "/expected-machines", O, h.CreateExpectedMachine},
		{http.MethodPut, "/expected-machines", O, h.ReplaceAllExpectedMachines},
		{http.MethodPost, `/expected-machines\:import`, O, h.ImportExpectedMachines},
		{http.MethodDelete, "/expected-machines", A, h.DeleteAllExpectedMachines},
		{http.MethodGet, "/expected-machines/:id", V, h.GetExpectedMachine},
		{http.MethodPut, "/expected-machines/:id", O, h.ReplaceExpectedMachine},
		{http.MethodPatch, "/expected-machines/:id", O, h.PatchExpectedMachine},
		{http.MethodDelete, "/expected-machines/:id", O, h.DeleteExpectedMachine},
		{http.MethodGet, "/owners/:owner_type/:owner_id/cni-ipam", V, h.OwnerCNIIPAM},
		{http.MethodPost, "/owners/:owner_type/:owner_id/allocations", O, h.AllocateForOwner},
		{http.MethodDelete, "/owners/:owner_type/:owner_id/allocations", O, h.ReleaseOwner},
	}
}

// QueryRole raises the role a route of a table needs when one of its
// query parameters has one of Values (compared in any case): deleting a
// machine is an operator's, a force delete an admin's. Like the route
// tables, these rules are data that the security test walks.
type QueryRole struct {
	Method string
	Path   string
	Param  string
	Values []string
	Role   auth.Role
}

// APIQueryRoles are the query rules of APIRoutes.
func (s *Server) APIQueryRoles() []QueryRole {
	return []QueryRole{
		{http.MethodDelete, "/machines/:id", "force", []string{"true", "1"}, auth.RoleAdmin},
	}
}

// withQueryRoles applies to h the rules of rules that name r's method and
// path; it runs after require, which has checked the identity.
func withQueryRoles(r Route, rules []QueryRole, h echo.HandlerFunc) echo.HandlerFunc {
	var mine []QueryRole
	for _, q := range rules {
		if q.Method == r.Method && q.Path == r.Path {
			mine = append(mine, q)
		}
	}
	if len(mine) == 0 {
		return h
	}
	return func(c echo.Context) error {
		id := handlers.CallerOf(c)
		for _, q := range mine {
			v := c.QueryParam(q.Param)
			for _, want := range q.Values {
				if strings.EqualFold(v, want) && (id == nil || !id.Role.Allows(q.Role)) {
					return fault.Errf(fault.CodeForbidden, q.Param, "%s=%s needs role %s", q.Param, v, q.Role)
				}
			}
		}
		return h(c)
	}
}

func (s *Server) routes() {
	e := s.e
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	e.GET("/readyz", s.readyz)
	e.GET("/api/v1/openapi.json", s.serveOpenAPI)
	s.consoleRoutes()
	// ContinueOnError: a collector that reads the database (pool values,
	// queue depths) must not fail the whole scrape while the database is
	// unreachable, or IpledgerDown would fire for a running server and
	// the 503s that IpledgerErrors counts would go unseen.
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)})))
	g := e.Group("/api/v1", s.authenticate)
	for _, r := range s.APIRoutes() {
		g.Add(r.Method, r.Path, s.require(r.Role, withQueryRoles(r, s.APIQueryRoles(), r.Handler)))
	}
}

func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
	defer cancel()
	db, err := s.db.DB()
	if err == nil {
		err = db.PingContext(ctx)
	}
	if err != nil {
		s.log.Warn("readiness check failed", "error", err)
		return fault.Errf(fault.CodeUnavailable, "", "the database is unreachable")
	}
	if full, since := database.StorageWatchOf(s.db).Full(); full {
		// Logged when it began (database.StorageWatch), not at every probe.
		return fault.Errf(fault.CodeUnavailable, "", "the database's storage has refused writes since %s (full or failing); ready again once a write commits",
			since.UTC().Format(time.RFC3339))
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
