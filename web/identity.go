package web

import (
	"errors"
	"net"
	"net/http"
	"regexp"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/handlers"
	"github.com/ipledger/ipledger/views"
)

// Identity configures the ways of signing in besides API tokens
// (docs/identity.md): single sign-on and bearer JWTs (OIDC), a trusted
// proxy, client certificates, and the console sessions' lifetime.
type Identity struct {
	// OIDC is the relying party and JWT verifier (nil: no single
	// sign-on, no JWTs).
	OIDC *auth.OIDC
	// OIDCName labels the sign-in button (default "SSO").
	OIDCName string
	// NoTokenLogin turns the login page's token form off.
	NoTokenLogin bool
	// Proxy is the trusted authenticating proxy (nil: none).
	Proxy *auth.Proxy
	// ClientRoles maps verified client certificates to roles.
	ClientRoles auth.ClientRoles
	// SessionTTL is a console session's lifetime (default SessionTTL).
	SessionTTL time.Duration
}

// WWWAuthenticateInvalid is the challenge of a refused bearer JWT.
const WWWAuthenticateInvalid = `Bearer error="invalid_token"`

// clientIP is the address logged as a request's "remote": the TCP peer,
// or, when the peer is the trusted proxy, the client X-Forwarded-For
// names. echo's default believes X-Forwarded-For and X-Real-IP from
// anyone, which let a client write any address into the log line of its
// own refused sign-in.
func clientIP(p *auth.Proxy) echo.IPExtractor {
	if p == nil || len(p.Trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, pr := range p.Trusted {
		opts = append(opts, echo.TrustIPRange(&net.IPNet{IP: pr.Addr().AsSlice(), Mask: net.CIDRMask(pr.Bits(), pr.Addr().BitLen())}))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// proxyGuard refuses, on every path, a request carrying the trusted
// proxy's user header from an address that is not a trusted proxy (401,
// logged): a client must not name itself.
func (s *Server) proxyGuard(next echo.HandlerFunc) echo.HandlerFunc {
	p := s.cfg.Identity.Proxy
	if p == nil {
		return next
	}
	return func(c echo.Context) error {
		_, err := p.Identify(c.Request())
		var pe *auth.ProxyError
		if errors.As(err, &pe) {
			s.log.Warn("proxy user header refused", "request_id", requestID(c), "remote", c.Request().RemoteAddr,
				"header", p.UserHeader, "reason", pe.Reason, "path", c.Request().URL.Path)
			return &proxyRefused{fault.Errf(fault.CodeUnauthorized, "", "%s", pe.Reason)}
		}
		return next(c)
	}
}

// proxyRefused is the 401 of a user header from an untrusted address: the
// console shows it as a page instead of sending the browser to the login
// page, where the header would be refused again.
type proxyRefused struct{ e *fault.Error }

func (e *proxyRefused) Error() string { return e.e.Error() }
func (e *proxyRefused) Unwrap() error { return e.e }

// ambient identifies a caller whom the browser or the connection
// authenticates on its own: the trusted proxy's user header, else a
// verified client certificate. nil when neither is there.
func (s *Server) ambient(c echo.Context) (*handlers.Caller, error) {
	r := c.Request()
	px := s.cfg.Identity.Proxy
	who, err := px.Identify(r)
	if who != nil {
		id := &handlers.Caller{Name: who.Actor, Role: who.Role, Ambient: true, LogoutURL: px.LogoutURL}
		if id.LogoutURL == "" {
			id.SignOutNote = ProxySignOutNote
		}
		return id, nil
	}
	if err == nil && len(s.cfg.Identity.ClientRoles) > 0 {
		who, err = s.cfg.Identity.ClientRoles.Identify(r.TLS)
	}
	if err != nil {
		return nil, identityError(err)
	}
	if who == nil {
		return nil, nil
	}
	return &handlers.Caller{Name: who.Actor, Role: who.Role, Ambient: true, SignOutNote: CertSignOutNote}, nil
}

// What the console says instead of offering a Sign out that would sign
// nobody out (docs/identity.md "Trusted proxy").
const (
	ProxySignOutNote = "The sign-in proxy in front of ipledger signed you in and keeps your sign-in: " +
		"ipledger has no session of yours to end. Sign out at the proxy, or close the browser. " +
		"(An admin can set IPLEDGER_AUTH_PROXY_LOGOUT_URL to the proxy sign-out to give this console a Sign out.)"
	CertSignOutNote = "Your client certificate signs you in on every request: ipledger has no session of yours to end. " +
		"Stop presenting the certificate (close the browser) to sign out."
)

// identityError maps the auth package's refusals to the error type: a
// refused JWT or proxy header is 401, a person or certificate without a
// role 403.
func identityError(err error) error {
	var nr *auth.NoRoleError
	var ce *auth.CertError
	var pe *auth.ProxyError
	switch {
	case auth.IsInvalidToken(err):
		return &jwtRefused{fault.Errf(fault.CodeUnauthorized, "", "%s", err.Error())}
	case errors.As(err, &nr):
		return &noRole{e: fault.Errf(fault.CodeForbidden, "", "%s", nr.Error()), nr: nr}
	case errors.As(err, &ce):
		return fault.Errf(fault.CodeForbidden, "", "%s", ce.Error())
	case errors.As(err, &pe):
		return fault.Errf(fault.CodeUnauthorized, "", "%s", pe.Reason)
	}
	return err
}

// jwtRefused is a 401 that carries WWW-Authenticate: Bearer
// error="invalid_token".
type jwtRefused struct{ e *fault.Error }

func (e *jwtRefused) Error() string { return e.e.Error() }
func (e *jwtRefused) Unwrap() error { return e.e }

// noRole is a 403 that the console renders as the no-role page.
type noRole struct {
	e  *fault.Error
	nr *auth.NoRoleError
}

func (e *noRole) Error() string { return e.e.Error() }
func (e *noRole) Unwrap() error { return e.e }

// ambientCSRF gives a console page of an ambient caller a CSRF token bound
// to the caller, so its forms pass the same check as a session's.
func (s *Server) ambientCSRF(c echo.Context, id *handlers.Caller) error {
	key, err := s.sessionStore().signingKey(c.Request().Context())
	if err != nil {
		return err
	}
	handlers.SetCSRF(c, b64.EncodeToString(handlers.Sign(key, "csrf-ambient", id.Name)))
	id.Session = true // forms carry the token; require checks it
	return nil
}

func (s *Server) sessionStore() *sessions {
	st, _ := s.sessions.(*sessions)
	return st
}

// crossSite refuses a state-changing request of an ambient caller that the
// browser marks as made by another site.
func crossSite(c echo.Context) error {
	if err := loginOrigin.Check(c.Request()); err != nil {
		return fault.Errf(fault.CodeForbidden, "", "a cross-site request is refused: use ipledger's own pages")
	}
	return nil
}

// oidcRoutes mounts GET /auth/oidc/login and GET /auth/oidc/callback.
func (s *Server) oidcRoutes(h *handlers.Console) {
	o := s.cfg.Identity.OIDC
	if o == nil {
		return
	}
	s.e.GET("/auth/oidc/login", func(c echo.Context) error { return s.oidcLogin(c, h) }, consoleSecurityHeaders)
	s.e.GET(auth.CallbackPath, func(c echo.Context) error { return s.oidcCallback(c, h) }, consoleSecurityHeaders)
}

// loginCookieName is the sign-in cookie's name: behind TLS it carries the
// __Host- prefix, so that no other host of the domain (a compromised
// sibling subdomain) can plant a sign-in of its own in the browser.
func (s *Server) loginCookieName() (name, path string) {
	if s.cfg.SecureCookies || s.cfg.TLS != nil {
		return "__Host-" + auth.LoginCookie, "/"
	}
	return auth.LoginCookie, "/auth/oidc"
}

func (s *Server) loginCookie(c echo.Context, val string, maxAge int) {
	name, path := s.loginCookieName()
	c.SetCookie(&http.Cookie{Name: name, Value: val, Path: path, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.cfg.SecureCookies || s.cfg.TLS != nil})
}

// oidcLogin starts a sign-in at the issuer; next is kept only when it is a
// path of this site.
func (s *Server) oidcLogin(c echo.Context, h *handlers.Console) error {
	next := handlers.SafeNext(c.QueryParam("next"))
	ctx := c.Request().Context()
	u, st, err := s.cfg.Identity.OIDC.Begin(ctx, next)
	if err != nil {
		return handlers.Render(c, http.StatusServiceUnavailable, views.LoginPage(h.LoginView(c, "", next)))
	}
	key, err := s.sessionStore().signingKey(ctx)
	if err != nil {
		return err
	}
	s.loginCookie(c, auth.SealLoginState(key, st, time.Now()), int(auth.LoginStateTTL/time.Second))
	return c.Redirect(http.StatusSeeOther, u)
}

// oauthErrorCode is what the callback's error parameter may be to be
// shown: an error code such as access_denied or login_required.
var oauthErrorCode = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// oidcCallback ends a sign-in: the browser's sign-in cookie (cleared
// whatever the outcome) must hold the state the issuer sent back; the
// person gets a new session and a 303 to where they were going.
func (s *Server) oidcCallback(c echo.Context, h *handlers.Console) error {
	ctx := c.Request().Context()
	s.loginCookie(c, "", -1)
	refuse := func(status int, msg string) error {
		s.log.Warn("single sign-on refused", "request_id", requestID(c), "reason", msg, "remote", c.RealIP())
		return handlers.Render(c, status, views.LoginPage(h.LoginView(c, msg, "/")))
	}
	if e := c.QueryParam("error"); e != "" {
		// Anyone can link to the callback with an error of their own:
		// only an error code of the OAuth 2.0 form reaches the page and
		// the log, never free text.
		if !oauthErrorCode.MatchString(e) {
			e = "an error that is not an OAuth 2.0 error code"
		}
		return refuse(http.StatusUnauthorized, "The identity provider did not sign you in ("+e+").")
	}
	key, err := s.sessionStore().signingKey(ctx)
	if err != nil {
		return err
	}
	name, _ := s.loginCookieName()
	ck, err := c.Cookie(name)
	if err != nil {
		return refuse(http.StatusBadRequest, "This sign-in was not started in this browser, or took too long: sign in again.")
	}
	st, err := auth.OpenLoginState(key, ck.Value, time.Now())
	if err != nil {
		return refuse(http.StatusBadRequest, "Sign-in refused: "+err.Error())
	}
	who, err := s.cfg.Identity.OIDC.Finish(ctx, st, c.QueryParam("state"), c.QueryParam("code"))
	var nr *auth.NoRoleError
	var le *auth.LoginError
	switch {
	case errors.As(err, &nr):
		s.log.Warn("single sign-on: no role", "request_id", requestID(c), "user", nr.Name, "claim", nr.Claim, "groups", nr.Groups)
		// No session, but the ID token reached ipledger: it stays no
		// bearer credential.
		if err := s.signIns.RememberIDToken(ctx, nr.IDToken, nr.IDTokenExpires); err != nil {
			return err
		}
		return handlers.Render(c, http.StatusForbidden, views.NoRolePage(nr.Name, nr.Claim, nr.Groups))
	case errors.As(err, &le):
		return refuse(http.StatusUnauthorized, le.Error())
	case err != nil:
		return refuse(http.StatusServiceUnavailable, "Single sign-on is unavailable: "+err.Error())
	}
	if err := s.sessionStore().OpenPerson(c, who, "oidc"); err != nil {
		return err
	}
	s.log.Info("signed in", "request_id", requestID(c), "actor", who.Actor, "role", string(who.Role), "via", "oidc")
	return c.Redirect(http.StatusSeeOther, handlers.SafeNext(st.Next))
}

// renderProxyRefused answers a console request refused by proxyGuard with
// a 401 page.
func renderProxyRefused(c echo.Context, err error) bool {
	var e *proxyRefused
	if !errors.As(err, &e) {
		return false
	}
	_ = handlers.Render(c, http.StatusUnauthorized, views.ErrorPage(views.Page{}, http.StatusUnauthorized, "Not signed in", e.e.Message, false))
	return true
}

// renderNoRole answers a console request of a proxy person without a role
// with the no-role page.
func renderNoRole(c echo.Context, err error) bool {
	var e *noRole
	if !errors.As(err, &e) {
		return false
	}
	_ = handlers.Render(c, http.StatusForbidden, views.NoRolePage(e.nr.Name, e.nr.Claim, e.nr.Groups))
	return true
}
