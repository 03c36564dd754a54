package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/views"
)

// SessionAdmin lists and ends console sessions.
type SessionAdmin interface {
	List(ctx context.Context) ([]auth.OpenSession, error)
	End(ctx context.Context, ref string) (*auth.OpenSession, error)
}

// SessionsPage: GET /sessions (admin) — every open console session.
func (h *Console) SessionsPage(c echo.Context) error {
	list, err := h.Sessions.List(Ctx(c))
	if err != nil {
		return err
	}
	mine := SessionRefOf(c)
	v := views.SessionsView{Page: h.page(c, "Sessions", "sessions")}
	for _, s := range list {
		v.Sessions = append(v.Sessions, views.SessionRow{Ref: s.Ref, Actor: s.Actor, Role: string(s.Role),
			Since: s.Since, LastSeen: s.LastSeen, Expires: s.Expires, Yours: s.Ref == mine})
	}
	return render(c, http.StatusOK, views.SessionsPage(v))
}

// EndSession: POST /sessions/:ref/end (admin, CSRF) — its holder is
// signed out at their next request; 303 back to the list.
func (h *Console) EndSession(c echo.Context) error {
	s, err := h.Sessions.End(Ctx(c), c.Param("ref"))
	if err != nil {
		return err
	}
	return h.redirect(c, "/sessions", "ok", "Ended the session of "+s.Actor+": they are signed out at their next request.")
}
