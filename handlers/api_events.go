package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
)

// ListEvents: GET /api/v1/events?actor=&action=&object_type=&object_id=&since=&until=&limit=&cursor=
// (since/until RFC 3339), newest first.
func (h *API) ListEvents(c echo.Context) error {
	if err := OnlyQuery(c, "actor", "action", "object_type", "object_id", "since", "until", "limit", "cursor"); err != nil {
		return err
	}
	limit, err := Limit(c)
	if err != nil {
		return err
	}
	f := allocator.EventFilter{Actor: c.QueryParam("actor"), Action: c.QueryParam("action"),
		ObjectType: c.QueryParam("object_type"), ObjectID: c.QueryParam("object_id"), Limit: limit, Cursor: c.QueryParam("cursor")}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if s := c.QueryParam(p.name); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return allocator.Errf(allocator.CodeInvalid, p.name, "%s %q is not an RFC 3339 time", p.name, s)
			}
			*p.dst = t
		}
	}
	page, err := h.A.ListEvents(Ctx(c), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}
