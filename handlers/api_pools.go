package handlers

import (
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/poolfile"
)

// ListPools: GET /api/v1/pools → {"items": [pool…]}.
func (h *API) ListPools(c echo.Context) error {
	if err := OnlyQuery(c, "limit", "cursor"); err != nil {
		return err
	}
	limit, err := Limit(c)
	if err != nil {
		return err
	}
	page, err := h.A.ListPoolsPage(Ctx(c), allocator.PoolFilter{Limit: limit, Cursor: c.QueryParam("cursor")})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// CreatePool: POST /api/v1/pools → 201 with Location.
func (h *API) CreatePool(c echo.Context) error {
	var spec allocator.PoolSpec
	if err := DecodeJSONStrict(c, &spec); err != nil {
		return err
	}
	p, err := h.A.CreatePool(Ctx(c), spec)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/v1/pools/"+url.PathEscape(p.Name))
	return c.JSON(http.StatusCreated, p)
}

// CheckPools: GET /api/v1/pools:check → {"overlaps": [...]}, every pair of
// ranges of address pools that overlap (stored before the rule existed);
// empty when the site is clean.
func (h *API) CheckPools(c echo.Context) error {
	if err := OnlyQuery(c); err != nil {
		return err
	}
	ov, err := h.A.CheckPools(Ctx(c))
	if err != nil {
		return err
	}
	if ov == nil {
		ov = []allocator.PoolOverlap{}
	}
	return c.JSON(http.StatusOK, PoolCheck{Overlaps: ov})
}

// PoolCheck is the answer of GET /api/v1/pools:check.
type PoolCheck struct {
	Overlaps []allocator.PoolOverlap `json:"overlaps"`
}

// GetPool: GET /api/v1/pools/{name}.
func (h *API) GetPool(c echo.Context) error {
	p, err := h.A.GetPool(Ctx(c), Param(c, "name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

// AddRange: POST /api/v1/pools/{name}/ranges → 201 with Location.
func (h *API) AddRange(c echo.Context) error {
	var spec allocator.RangeSpec
	if err := DecodeJSONStrict(c, &spec); err != nil {
		return err
	}
	name := Param(c, "name")
	r, err := h.A.AddRange(Ctx(c), name, spec)
	if err != nil {
		return err
	}
	if full, err := h.A.GetRange(Ctx(c), name, r.ID); err == nil {
		r = full // with its counts
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/v1/pools/"+url.PathEscape(name)+"/ranges/"+r.ID)
	setETag(c, r.Version)
	return c.JSON(http.StatusCreated, r)
}

// GetRange: GET /api/v1/pools/{name}/ranges/{id}.
func (h *API) GetRange(c echo.Context) error {
	r, err := h.A.GetRange(Ctx(c), Param(c, "name"), Param(c, "id"))
	if err != nil {
		return err
	}
	setETag(c, r.Version)
	return c.JSON(http.StatusOK, r)
}

// UpdateRange: PATCH /api/v1/pools/{name}/ranges/{id} — flip auto_assign,
// shrink or move bounds.
func (h *API) UpdateRange(c echo.Context) error {
	var u allocator.RangeUpdate
	if err := DecodeJSONStrict(c, &u); err != nil {
		return err
	}
	u.IfMatch = IfMatchOf(c)
	name := Param(c, "name")
	r, err := h.A.UpdateRange(Ctx(c), name, Param(c, "id"), u)
	if err != nil {
		return err
	}
	if full, err := h.A.GetRange(Ctx(c), name, r.ID); err == nil {
		r = full
	}
	setETag(c, r.Version)
	return c.JSON(http.StatusOK, r)
}

// RemoveRange: DELETE /api/v1/pools/{name}/ranges/{id} → 204.
func (h *API) RemoveRange(c echo.Context) error {
	if err := h.A.RemoveRangeIf(Ctx(c), Param(c, "name"), Param(c, "id"), IfMatchOf(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// LoadPools: POST /api/v1/pools:load with a TOML pool file body
// (application/toml or text/plain).
func (h *API) LoadPools(c echo.Context) error {
	ct := strings.ToLower(strings.TrimSpace(c.Request().Header.Get(echo.HeaderContentType)))
	if mt, _, err := mime.ParseMediaType(ct); ct != "" && (err != nil || (mt != "application/toml" && mt != "text/plain")) {
		return fault.Errf(fault.CodeBadRequest, "", "Content-Type %q: pools:load takes application/toml or text/plain", ct)
	}
	body, err := ReadBody(c)
	if err != nil {
		return err
	}
	res, err := poolfile.Load(Ctx(c), h.A, body)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

// ListAllocations: GET /api/v1/pools/{name}/allocations.
func (h *API) ListAllocations(c echo.Context) error {
	if err := OnlyQuery(c, "owner_type", "owner_id", "state", "limit", "cursor"); err != nil {
		return err
	}
	limit, err := Limit(c)
	if err != nil {
		return err
	}
	page, err := h.A.ListAllocations(Ctx(c), Param(c, "name"), allocator.AllocationFilter{
		OwnerType: c.QueryParam("owner_type"), OwnerID: c.QueryParam("owner_id"), State: c.QueryParam("state"),
		Limit: limit, Cursor: c.QueryParam("cursor")})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

type allocateBody struct {
	OwnerType string `json:"owner_type"`
	OwnerID   string `json:"owner_id"`
	Value     string `json:"value,omitempty"`
}

// Allocate: POST /api/v1/pools/{name}/allocations → 201 (new) or 200 (the
// owner already held it).
func (h *API) Allocate(c echo.Context) error {
	var b allocateBody
	if err := DecodeJSONStrict(c, &b); err != nil {
		return err
	}
	name := Param(c, "name")
	al, created, err := h.A.Allocate(Ctx(c), name, allocator.Owner{Type: b.OwnerType, ID: b.OwnerID}, b.Value)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/v1/pools/"+url.PathEscape(name)+"/allocations/"+url.PathEscape(al.Value))
	if created {
		return c.JSON(http.StatusCreated, al)
	}
	return c.JSON(http.StatusOK, al)
}

type batchAllocateBody struct {
	Allocations []allocateBody `json:"allocations"`
}

// AllocateBatch: POST /api/v1/pools/{name}/allocations:batch with
// {"allocations": [{owner_type, owner_id, value?}, …]} (at most 10,000) →
// 200 {"items": [allocation…]} in request order, all or nothing.
func (h *API) AllocateBatch(c echo.Context) error {
	var b batchAllocateBody
	if err := DecodeJSONStrict(c, &b); err != nil {
		return err
	}
	if b.Allocations == nil {
		return fault.Errf(fault.CodeInvalid, "allocations", "allocations is required: a list of {owner_type, owner_id, value?}")
	}
	items := make([]allocator.BulkItem, len(b.Allocations))
	for i, x := range b.Allocations {
		items[i] = allocator.BulkItem{Owner: allocator.Owner{Type: x.OwnerType, ID: x.OwnerID}, Value: x.Value}
	}
	out, _, err := h.A.AllocateBulk(Ctx(c), Param(c, "name"), items)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"items": out})
}

// GetAllocation: GET /api/v1/pools/{name}/allocations/{value}.
func (h *API) GetAllocation(c echo.Context) error {
	al, err := h.A.GetAllocation(Ctx(c), Param(c, "name"), Param(c, "value"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, al)
}

// Release: DELETE /api/v1/pools/{name}/allocations/{value}?owner_type=&owner_id= → 204.
func (h *API) Release(c echo.Context) error {
	owner := allocator.Owner{Type: c.QueryParam("owner_type"), ID: c.QueryParam("owner_id")}
	if err := h.A.Release(Ctx(c), Param(c, "name"), Param(c, "value"), owner); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// Unquarantine: POST /api/v1/pools/{name}/allocations/{value}:unquarantine
// (admin). The route is the allocation's path with the action suffix, so
// the value parameter carries ":unquarantine".
func (h *API) Unquarantine(c echo.Context) error {
	v, ok := strings.CutSuffix(Param(c, "value"), ":unquarantine")
	if !ok {
		return fault.Errf(fault.CodeNotFound, "", "unknown action on allocation %q", Param(c, "value"))
	}
	name := Param(c, "name")
	if err := h.A.Unquarantine(Ctx(c), name, v); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"pool": name, "value": v, "state": "free"})
}

// LookupAddress: GET /api/v1/addresses/{value}.
func (h *API) LookupAddress(c echo.Context) error {
	info, err := h.A.LookupAddress(Ctx(c), Param(c, "value"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, info)
}
