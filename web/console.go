package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/handlers"
	"github.com/ipledger/ipledger/static"
)

// ConsoleRoutes lists every signed-in route of the operator console with
// the least role it needs; state-changing ones (POST) also need the
// session's CSRF token. Like APIRoutes, it is the single list: the security
// test walks it. Public console routes (login, static files) are not here.
func (s *Server) ConsoleRoutes() []Route {
	store, _ := s.sessions.(*sessions)
	h := s.consoleHandlers(store)
	V, A := auth.RoleViewer, auth.RoleAdmin
	routes := []Route{
		{http.MethodGet, "/", V, h.Dashboard},
		{http.MethodGet, "/noc", V, h.NOC},
		{http.MethodPost, "/logout", V, func(c echo.Context) error { return h.Logout(c, store) }},
		{http.MethodGet, "/logout", V, h.LogoutPage},
		{http.MethodGet, "/pools", V, h.Pools},
		{http.MethodPost, "/pools", A, h.CreatePool},
		{http.MethodGet, "/pools/:name", V, h.Pool},
		{http.MethodPost, "/pools/:name/ranges", A, h.AddRange},
		{http.MethodGet, "/pools/:name/ranges/:id/edit", A, h.EditRange},
		{http.MethodPost, "/pools/:name/ranges/:id", A, h.UpdateRange},
		{http.MethodGet, "/pools/:name/ranges/:id/remove", A, h.ConfirmRemoveRange},
		{http.MethodPost, "/pools/:name/ranges/:id/remove", A, h.RemoveRange},
		{http.MethodGet, "/pools/:name/unquarantine", A, h.ConfirmUnquarantine},
		{http.MethodPost, "/pools/:name/unquarantine", A, h.Unquarantine},
		{http.MethodGet, "/events", V, h.Events},
		{http.MethodGet, "/quarantine", V, h.Quarantine},
	}
	routes = append(routes,
		Route{http.MethodGet, "/webhooks", A, h.Webhooks},
		Route{http.MethodPost, "/webhooks", A, h.CreateWebhook},
		Route{http.MethodGet, "/webhooks/:id", A, h.Webhook},
		Route{http.MethodPost, "/webhooks/:id/redeliver", A, h.RedeliverWebhook},
		Route{http.MethodGet, "/webhooks/:id/delete", A, h.ConfirmDeleteWebhook},
		Route{http.MethodPost, "/webhooks/:id/delete", A, h.DeleteWebhook},
		Route{http.MethodGet, "/webhooks/:id/edit", A, h.EditWebhook},
		Route{http.MethodPost, "/webhooks/:id", A, h.SaveWebhook},
		Route{http.MethodGet, "/sessions", A, h.SessionsPage},
		Route{http.MethodPost, "/sessions/:ref/end", A, h.EndSession},
	)
	return append(routes, consoleExtraRoutes(h)...)
}

// ConsoleQueryRoles are the query rules of ConsoleRoutes (see QueryRole).
func (s *Server) ConsoleQueryRoles() []QueryRole {
	return []QueryRole{
		{http.MethodGet, "/machines/:id/impact", "action", []string{"force-delete"}, auth.RoleAdmin},
	}
}

// consoleHandlers builds the console's handlers with the login page's
// options and the sessions page's store.
func (s *Server) consoleHandlers(store *sessions) *handlers.Console {
	h := &handlers.Console{A: s.a, Reads: s.reads, Auth: s.auth, Feed: s.cfg.Feed, Hooks: s.cfg.Webhooks, AuditLog: s.events,
		SecureCookies: s.cfg.SecureCookies}
	id := s.cfg.Identity
	h.SignIn.NoTokenForm = id.NoTokenLogin
	if id.OIDC != nil {
		h.SignIn.SSOName = id.OIDCName
		if h.SignIn.SSOName == "" {
			h.SignIn.SSOName = "SSO"
		}
		h.SignIn.SSOUnavailable = func(c echo.Context) string {
			if id.OIDC.Ready() {
				return ""
			}
			if id.NoTokenLogin {
				return "the identity provider does not answer; try again in a moment"
			}
			return "the identity provider does not answer; try again in a moment, or sign in with an API token"
		}
	}
	if store != nil {
		h.Sessions = store.people
	}
	return h
}

// consoleSecurityHeaders keeps console pages out of frames and limits
// scripts to the site's own files.
var consoleSecurityHeaders = securityHeaders("")

// securityHeaders is consoleSecurityHeaders with forms also allowed to
// lead to formOrigin: sign-out is a form whose answer redirects to the
// identity provider's end_session_endpoint, which form-action 'self'
// alone would block.
func securityHeaders(formOrigin string) echo.MiddlewareFunc {
	csp := "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"
	if formOrigin != "" {
		csp += " " + formOrigin
	}
	csp += "; base-uri 'none'"
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			hd := c.Response().Header()
			hd.Set("X-Frame-Options", "DENY")
			hd.Set("X-Content-Type-Options", "nosniff")
			hd.Set("Referrer-Policy", "same-origin")
			hd.Set("Content-Security-Policy", csp)
			return next(c)
		}
	}
}

// loginOrigin is the login form's CSRF defence: there is no session yet to
// bind a token to, so a cross-site POST /login (which could sign the
// victim's browser in with the attacker's token) is refused by the
// browser's own Sec-Fetch-Site / Origin headers (net/http
// CrossOriginProtection): 403. Same-origin posts and clients that send
// neither header (curl, older browsers) pass.
var loginOrigin = http.NewCrossOriginProtection()

func loginCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := loginOrigin.Check(c.Request()); err != nil {
			return fault.Errf(fault.CodeForbidden, "", "sign-in from another site is refused: open the console's own login page")
		}
		return next(c)
	}
}

// consoleFormNUL refuses a console form post holding a NUL character
// (rejectNUL leaves console forms to it): after sign-in and the role and
// CSRF checks, so the refused form can come back with the message under
// its field (422). Nothing is written.
func consoleFormNUL(h *handlers.Console) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if isUnsafe(c.Request().Method) {
				if bad := handlers.FormNUL(c); len(bad) > 0 {
					if c.Path() == "/login" {
						return fault.Errf(fault.CodeInvalid, "token", "the token contains a NUL character")
					}
					return h.RefuseNUL(c, bad)
				}
			}
			return next(c)
		}
	}
}

// consoleMaxBody bounds a console form post: the largest import file
// (handlers.MaxBodyBytes) plus room for the other fields and the multipart
// framing.
const consoleMaxBody = handlers.MaxBodyBytes + 256<<10

// consoleBodyLimit answers 413 to a console post larger than
// consoleMaxBody, before the CSRF check reads the form (which would
// otherwise find no token in a truncated form and answer a misleading
// 403). The form is parsed here once, under the limit.
func consoleBodyLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if !isUnsafe(r.Method) {
			return next(c)
		}
		tooLarge := func() error {
			return fault.Errf(fault.CodeTooLarge, "",
				"the form is larger than %d bytes: nothing was changed", consoleMaxBody)
		}
		if r.ContentLength > consoleMaxBody {
			return tooLarge()
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, consoleMaxBody)
		var err error
		if strings.HasPrefix(r.Header.Get(echo.HeaderContentType), echo.MIMEMultipartForm) {
			err = r.ParseMultipartForm(32 << 20)
		} else {
			err = r.ParseForm()
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge()
		}
		return next(c)
	}
}

// consoleAuth resolves the session of a console request; without one the
// error handler sends the browser to /login (HX-Redirect for htmx).
func (s *Server) consoleAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := s.ambient(c)
		if err != nil {
			return err
		}
		if id != nil {
			if err := s.ambientCSRF(c, id); err != nil {
				return err
			}
		} else {
			id = s.sessions.Identify(c)
		}
		if err, ok := c.Get(sessionUnavailableKey).(error); ok && id == nil {
			return err
		}
		if id == nil {
			return fault.Errf(fault.CodeUnauthorized, "", "sign in to use the console")
		}
		handlers.SetCaller(c, id)
		c.SetRequest(c.Request().WithContext(audit.WithActorRole(c.Request().Context(), id.Name, string(id.Role), requestID(c))))
		return next(c)
	}
}

// optionalSession identifies a session when there is one (login page).
func (s *Server) optionalSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if id := s.sessions.Identify(c); id != nil {
			handlers.SetCaller(c, id)
		}
		return next(c)
	}
}

// consoleRoutes mounts the console: static files and login (public), then
// every ConsoleRoutes entry behind the session, role and CSRF checks.
func (s *Server) consoleRoutes() {
	store := newSessions(s.auth, s.cfg.SecureCookies, s.log, s.cfg.Identity.SessionTTL, s.cfg.Identity.OIDC)
	s.sessions = store
	h := s.consoleHandlers(store)
	s.htmlError = handlers.ConsoleError
	s.oidcRoutes(h)

	files := http.StripPrefix("/static/", http.FileServer(http.FS(static.FS)))
	s.e.GET("/static/*", func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(c.Response(), c.Request())
		return nil
	})
	// Sign-out is a form whose answer may redirect to the issuer's
	// end_session_endpoint. (The proxy's sign-out is reached from a page,
	// views.ProxySignOutPage, not by a redirect of the form.)
	sec := consoleSecurityHeaders
	if o := s.cfg.Identity.OIDC; o != nil {
		sec = securityHeaders(o.IssuerOrigin())
	}
	s.e.GET("/login", h.LoginForm, sec, s.optionalSession)
	nul := consoleFormNUL(h)
	s.e.POST("/login", func(c echo.Context) error { return h.Login(c, store) }, sec, loginCSRF, nul)
	for _, r := range s.ConsoleRoutes() {
		s.e.Add(r.Method, r.Path, s.require(r.Role, withQueryRoles(r, s.ConsoleQueryRoles(), nul(r.Handler))), sec, s.consoleAuth, consoleBodyLimit)
	}
}
