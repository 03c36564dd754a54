package handlers

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/fault"
)

// ListEvents: GET /api/v1/events?actor=&action=&object_type=&object_id=&since=&until=&limit=&cursor=
// (since/until RFC 3339), newest first.
//
// With after=R it is the change feed instead (readFeed, docs/feed.md).
func (h *API) ListEvents(c echo.Context) error {
	if c.QueryParams().Has("after") {
		return h.readFeed(c)
	}
	for _, p := range []string{"wait", "pool"} {
		if c.QueryParams().Has(p) {
			return fault.Errf(fault.CodeInvalid, p, "%s filters the change feed, which is read with after=REVISION (after=0 from the start)", p)
		}
	}
	if err := OnlyQuery(c, "actor", "action", "object_type", "object_id", "since", "until", "limit", "cursor"); err != nil {
		return err
	}
	limit, err := Limit(c)
	if err != nil {
		return err
	}
	action := c.QueryParam("action")
	if p, ok := strings.CutSuffix(action, ".*"); ok {
		action = p + "." // the feed's prefix syntax means the same here
	}
	f := audit.EventFilter{Actor: c.QueryParam("actor"), Action: action,
		ObjectType: c.QueryParam("object_type"), ObjectID: c.QueryParam("object_id"), Limit: limit, Cursor: c.QueryParam("cursor")}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if s := c.QueryParam(p.name); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return fault.Errf(fault.CodeInvalid, p.name, "%s %q is not an RFC 3339 time", p.name, s)
			}
			*p.dst = t
		}
	}
	page, err := h.AuditLog.List(Ctx(c), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}
