package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/views"
)

// usageDays is the span of the pool usage chart.
const usageDays = 30

// allocationsView reads one keyset page of the pool's allocations with the
// filter of the query string. A bad filter (unknown state, foreign cursor)
// is shown above the table with its status.
func (h *Console) allocationsView(c echo.Context, pool string) (views.AllocationsView, int, error) {
	v := views.AllocationsView{Pool: pool, OwnerType: c.QueryParam("owner_type"), OwnerID: c.QueryParam("owner_id"),
		State: c.QueryParam("state"), Value: c.QueryParam("value"), Cursor: c.QueryParam("cursor"), CSRF: CSRFOf(c)}
	if id := CallerOf(c); id != nil {
		v.CanAdmin = id.Role.Allows(auth.RoleAdmin)
	}
	if p, err := h.A.GetPool(Ctx(c), pool); err == nil {
		v.Type = string(p.Type)
	}
	page, err := h.A.ListAllocations(Ctx(c), pool, allocator.AllocationFilter{OwnerType: v.OwnerType, OwnerID: v.OwnerID,
		State: v.State, Value: v.Value, Limit: 100, Cursor: v.Cursor})
	if err != nil {
		if !isFormError(err) {
			return v, 0, err
		}
		e, _ := fault.AsError(err)
		v.Err = e.Message
		return v, formStatus(err), nil
	}
	v.Items, v.Next = page.Items, page.NextCursor
	var owners []string
	for _, a := range page.Items {
		for _, o := range []*string{a.OwnerID, a.FormerOwnerID} {
			if o != nil {
				owners = append(owners, *o)
			}
		}
	}
	names, err := h.Reads.MachineNames(Ctx(c), owners)
	if err != nil {
		return v, 0, err
	}
	v.Names = names
	return v, http.StatusOK, nil
}

func (h *Console) poolDetail(c echo.Context, name string) (views.PoolDetail, int, error) {
	v := views.PoolDetail{Range: views.RangeForm{AutoAssign: true}}
	p, err := h.A.GetPool(Ctx(c), name)
	if err != nil {
		return v, 0, err
	}
	v.Page = h.page(c, "Pool "+p.Name, "pools")
	v.Pool, v.Bar = *p, views.NewPoolBar(*p)
	usage, err := h.Reads.PoolUsageOf(Ctx(c), p, usageDays)
	if err != nil {
		return v, 0, err
	}
	size := views.NewPoolBar(*p).Size
	v.Chart = views.NewUsageChart(usage, size)
	allocs, status, err := h.allocationsView(c, name)
	if err != nil {
		return v, 0, err
	}
	v.Allocs = allocs
	return v, status, nil
}

// Pool: GET /pools/:name — ranges, stats, usage chart and one page of
// allocations. An htmx request aimed at #allocations (filter, next page)
// gets only the allocations fragment.
func (h *Console) Pool(c echo.Context) error {
	name := Param(c, "name")
	if IsHTMX(c) && c.Request().Header.Get("HX-Target") == "allocations" {
		if _, err := h.A.GetPool(Ctx(c), name); err != nil {
			return err
		}
		v, status, err := h.allocationsView(c, name)
		if err != nil {
			return err
		}
		return render(c, status, views.AllocationsTable(v))
	}
	v, status, err := h.poolDetail(c, name)
	if err != nil {
		return err
	}
	return render(c, status, views.PoolDetailPage(v))
}
