package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/views"
)

// dashboard gathers what the dashboard and the NOC wallboard show: pool
// bars, overlapping address pools, pool-file drift, DPU bindings in
// pending/conflict, recent events; and the pools as read, for the NOC.
func (h *Console) dashboard(c echo.Context, title, nav string, events int) (views.Dashboard, []allocator.Pool, error) {
	d := views.Dashboard{Page: h.page(c, title, nav)}
	pools, err := h.A.ListPools(Ctx(c))
	if err != nil {
		return d, nil, err
	}
	for _, p := range pools {
		d.Pools = append(d.Pools, views.NewPoolBar(p))
	}
	if d.Drift, err = h.Reads.PoolFileDrift(Ctx(c)); err != nil {
		return d, nil, err
	}
	if d.Bindings, err = h.bindingAlerts(c); err != nil {
		return d, nil, err
	}
	if d.Overlaps, err = h.A.CheckPools(Ctx(c)); err != nil {
		return d, nil, err
	}
	if events > 0 {
		page, err := h.AuditLog.List(Ctx(c), audit.EventFilter{Limit: events})
		if err != nil {
			return d, nil, err
		}
		d.Events = page.Items
		if d.Names, err = h.eventNames(c, d.Events, nil); err != nil {
			return d, nil, err
		}
	}
	return d, pools, nil
}

// Dashboard: GET / — htmx polls it for its figures (views.DashboardFigures).
func (h *Console) Dashboard(c echo.Context) error {
	d, _, err := h.dashboard(c, "Dashboard", "dashboard", 15)
	if err != nil {
		return err
	}
	d.Refreshed = time.Now().UTC().Format("15:04:05")
	return render(c, http.StatusOK, views.DashboardPage(d))
}

// NOC: GET /noc — the read-only wallboard (viewer); htmx polls it.
func (h *Console) NOC(c echo.Context) error {
	d, pools, err := h.dashboard(c, "NOC", "noc", 0)
	if err != nil {
		return err
	}
	f, err := h.Reads.Fleet(Ctx(c), pools, 6)
	if err != nil {
		return err
	}
	names, err := h.eventNames(c, f.ForceDeletes, nil)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.NOCPage(views.NOCView{Dashboard: d, Fleet: *f, Names: names, Refreshed: time.Now().UTC().Format("15:04:05")}))
}
