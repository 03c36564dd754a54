package handlers

import (
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/txn"
)

// ExpectedMachines REST API (docs/reservations.md, docs/api.md). The handlers parse,
// call one allocator function and render; every rule (validation,
// compatibility with older clients, optimistic concurrency) lives in
// allocator/expected_machines.go.

func setETag(c echo.Context, version int64) {
	c.Response().Header().Set("ETag", strconv.Quote(strconv.FormatInt(version, 10)))
}

// IfMatchOf reads the If-Match header: absent or "*" is no precondition;
// each entity tag ("3", W/"3") is a version. Tags compare as strings, so
// only the quoted canonical decimal of a version names it: 3 unquoted,
// "03" or "+3" are tags that are not a version and can never match, so
// they become -1 (412 stale_version).
func IfMatchOf(c echo.Context) txn.IfMatch {
	h := strings.TrimSpace(c.Request().Header.Get("If-Match"))
	if h == "" {
		return nil
	}
	var m txn.IfMatch
	for _, tag := range strings.Split(h, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" {
			return nil
		}
		m = append(m, etagVersion(tag))
	}
	return m
}

// etagVersion is the version an entity tag names, or -1 when it names none.
func etagVersion(tag string) int64 {
	tag = strings.TrimPrefix(tag, "W/")
	if len(tag) < 3 || tag[0] != '"' || tag[len(tag)-1] != '"' {
		return -1
	}
	inner := tag[1 : len(tag)-1]
	n, err := strconv.ParseInt(inner, 10, 64)
	if err != nil || n < 1 || strconv.FormatInt(n, 10) != inner {
		return -1
	}
	return n
}

func expectedMachineLocation(id string) string {
	return "/api/v1/expected-machines/" + url.PathEscape(id)
}

// ListExpectedMachines: GET /api/v1/expected-machines
// ?bmc_mac_address=&serial_number=&label=key[=value]&q=&limit=&cursor=
// → {"items": [...], "next_cursor": "..."}.
func (h *API) ListExpectedMachines(c echo.Context) error {
	if err := OnlyQuery(c, "bmc_mac_address", "serial_number", "label", "q", "limit", "cursor"); err != nil {
		return err
	}
	limit, err := Limit(c)
	if err != nil {
		return err
	}
	page, err := h.A.ListExpectedMachines(Ctx(c), allocator.ExpectedMachineFilter{
		BmcMacAddress: c.QueryParam("bmc_mac_address"), SerialNumber: c.QueryParam("serial_number"),
		Label: c.QueryParam("label"), Search: c.QueryParam("q"), Limit: limit, Cursor: c.QueryParam("cursor")})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// CreateExpectedMachine: POST /api/v1/expected-machines → 201 with
// Location and ETag.
func (h *API) CreateExpectedMachine(c echo.Context) error {
	body, err := ReadBody(c)
	if err != nil {
		return err
	}
	spec, err := allocator.DecodeExpectedMachineSpec(body)
	if err != nil {
		return err
	}
	em, err := h.A.CreateExpectedMachine(Ctx(c), spec)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, expectedMachineLocation(em.ID))
	setETag(c, em.Version)
	return c.JSON(http.StatusCreated, em)
}

// GetExpectedMachine: GET /api/v1/expected-machines/{id}, {id} a UUID or a
// BMC MAC address.
func (h *API) GetExpectedMachine(c echo.Context) error {
	em, err := h.A.GetExpectedMachine(Ctx(c), Param(c, "id"))
	if err != nil {
		return err
	}
	setETag(c, em.Version)
	return c.JSON(http.StatusOK, em)
}

// ReplaceExpectedMachine: PUT /api/v1/expected-machines/{id} (If-Match
// honoured) → 200 with ETag.
func (h *API) ReplaceExpectedMachine(c echo.Context) error {
	body, err := ReadBody(c)
	if err != nil {
		return err
	}
	spec, err := allocator.DecodeExpectedMachineSpec(body)
	if err != nil {
		return err
	}
	em, err := h.A.ReplaceExpectedMachine(Ctx(c), Param(c, "id"), spec, IfMatchOf(c))
	if err != nil {
		return err
	}
	setETag(c, em.Version)
	return c.JSON(http.StatusOK, em)
}

// PatchExpectedMachine: PATCH /api/v1/expected-machines/{id}, a JSON merge
// patch (application/json or application/merge-patch+json) → 200 with ETag.
func (h *API) PatchExpectedMachine(c echo.Context) error {
	ct := strings.ToLower(strings.TrimSpace(c.Request().Header.Get(echo.HeaderContentType)))
	if mt, _, err := mime.ParseMediaType(ct); ct != "" && (err != nil || (mt != "application/json" && mt != "application/merge-patch+json")) {
		return fault.Errf(fault.CodeBadRequest, "", "Content-Type %q: PATCH takes application/json or application/merge-patch+json", ct)
	}
	body, err := ReadBody(c)
	if err != nil {
		return err
	}
	em, err := h.A.PatchExpectedMachine(Ctx(c), Param(c, "id"), body, IfMatchOf(c))
	if err != nil {
		return err
	}
	setETag(c, em.Version)
	return c.JSON(http.StatusOK, em)
}

// DeleteExpectedMachine: DELETE /api/v1/expected-machines/{id} (If-Match
// honoured) → 204.
func (h *API) DeleteExpectedMachine(c echo.Context) error {
	if err := h.A.DeleteExpectedMachine(Ctx(c), Param(c, "id"), IfMatchOf(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// ReplaceAllExpectedMachines: PUT /api/v1/expected-machines with the NICo
// file {"expected_machines": [...]} → 200 {"items": [...]}, atomically.
func (h *API) ReplaceAllExpectedMachines(c echo.Context) error {
	body, err := ReadBody(c)
	if err != nil {
		return err
	}
	specs, err := allocator.ParseExpectedMachinesFile(body)
	if err != nil {
		return err
	}
	items, err := h.A.ReplaceAllExpectedMachines(Ctx(c), specs)
	if err != nil {
		return err
	}
	return writeItems(c, items)
}

// ImportExpectedMachines: POST /api/v1/expected-machines:import?mode=merge|replace
// with a NICo expected-machines file → 200 {"mode", "created", "updated",
// "unchanged", "items"} (allocator.ImportExpectedMachinesFile). Merge
// (the default) updates the records whose BMC MAC is stored, keeping
// their ids, and creates the others; replace is the replace-all. Both are
// atomic: a refused import changes nothing and its error names the first
// problem (expected_machines[3].expected_dpus[0].loopback_ip).
func (h *API) ImportExpectedMachines(c echo.Context) error {
	if err := OnlyQuery(c, "mode"); err != nil {
		return err
	}
	mode, err := allocator.ParseImportMode(c.QueryParam("mode"))
	if err != nil {
		return err
	}
	body, err := ReadBody(c)
	if err != nil {
		return err
	}
	res, err := h.A.ImportExpectedMachinesFile(Ctx(c), body, mode)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

// DeleteAllExpectedMachines: DELETE /api/v1/expected-machines (admin) →
// 204; every ExpectedMachine and its reservations go, in one transaction.
func (h *API) DeleteAllExpectedMachines(c echo.Context) error {
	// A filter here is a mistake that must not erase everything: it is
	// refused rather than ignored.
	for k := range c.QueryParams() {
		return fault.Errf(fault.CodeInvalid, k, "DELETE /api/v1/expected-machines deletes every record and takes no query parameter (got %q); delete one record with DELETE /api/v1/expected-machines/{id}", k)
	}
	if _, err := h.A.DeleteAllExpectedMachines(Ctx(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
