package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/views"
)

// parseWhen accepts a UTC date (2026-01-31) or an RFC 3339 time.
func parseWhen(s string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, true
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, true
	}
	if t, err := time.Parse("2006-01-02 15:04", s); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// Events: GET /events — the audit log with filters (actor, action or
// action prefix, object type and id, since/until) and keyset pages.
func (h *Console) Events(c echo.Context) error {
	v := views.EventsView{Page: h.page(c, "Audit log", "events"), Errors: views.Errors{}}
	v.Filter = views.EventFilter{Actor: c.QueryParam("actor"), Action: c.QueryParam("action"),
		ObjectType: c.QueryParam("object_type"), ObjectID: c.QueryParam("object_id"),
		Since: c.QueryParam("since"), Until: c.QueryParam("until"), Machine: c.QueryParam("machine")}
	f := audit.EventFilter{Actor: v.Filter.Actor, Action: v.Filter.Action, ObjectType: v.Filter.ObjectType,
		ObjectID: v.Filter.ObjectID, Limit: 100, Cursor: c.QueryParam("cursor")}
	if v.Filter.Machine != "" {
		v.Filter.MachineName = h.machineName(c, v.Filter.Machine)
		scope, err := h.Reads.MachineEventScope(Ctx(c), v.Filter.Machine)
		if err != nil {
			return err
		}
		f.Scope = scope
	}
	for _, p := range []struct {
		name, val string
		dst       *time.Time
	}{{"since", v.Filter.Since, &f.Since}, {"until", v.Filter.Until, &f.Until}} {
		if p.val == "" {
			continue
		}
		t, ok := parseWhen(p.val)
		if !ok {
			v.Errors[p.name] = p.name + " \"" + p.val + "\" is not a date (2026-01-31) or an RFC 3339 time"
			continue
		}
		*p.dst = t
	}
	status := http.StatusOK
	if len(v.Errors) == 0 {
		page, err := h.AuditLog.List(Ctx(c), f)
		if err != nil {
			if !isFormError(err) {
				return err
			}
			v.Errors = views.FromError(err)
			status = formStatus(err)
		} else {
			v.Events, v.Next = page.Items, page.NextCursor
			if v.Names, err = h.eventNames(c, v.Events, nil); err != nil {
				return err
			}
		}
	} else {
		status = http.StatusUnprocessableEntity
	}
	return render(c, status, views.EventsPage(v))
}
