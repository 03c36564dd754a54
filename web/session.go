package web

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/handlers"
)

// SessionCookie is the console's session cookie: HttpOnly, SameSite=Lax,
// valid for SessionTTL. With Config.SecureCookies (behind TLS) it is
// Secure and named SecureSessionCookie.
const SessionCookie = "ipledger_session"

// SecureSessionCookie is the session cookie's name behind TLS: the
// __Host- prefix makes browsers refuse it from any other host of the
// domain, so a sibling subdomain cannot plant a session of its own (its
// holder's, or an attacker's) in a person's browser.
const SecureSessionCookie = "__Host-" + SessionCookie

// SessionTTL is the default lifetime of a console session
// (IPLEDGER_SESSION_TTL). A token session slides: every use renews it (at
// most one database write per sessionRenewEvery), so a NOC wallboard that
// refreshes itself stays signed in. A person's session ends TTL after
// sign-in (docs/identity.md).
const SessionTTL = 12 * time.Hour

// sessionRenewEvery bounds how often a session's expiry is written.
const sessionRenewEvery = 5 * time.Minute

// CSRFHeader carries the CSRF token of htmx requests (hx-headers on
// <body>); forms carry it in the field csrf_token.
const CSRFHeader = "X-CSRF-Token"

// sessions implements SessionAuth and handlers.SessionStore with
// server-side sessions (table console_sessions, migration 9): the cookie is
// "v2.<random id>.<HMAC-SHA256 of the id>" under a key kept in the settings
// table (allocator.SessionKey), so every server process on one database
// accepts the same sessions; the database keeps only the id's hash. Every
// request looks the row up (with its token's current name and role): sign
// out deletes the row and deleting the token deletes its rows, so a copied
// cookie stops working at once. The CSRF token is an HMAC of the session
// id: bound to the session, nothing more to store.
type sessions struct {
	auth   *auth.Service
	secure bool
	log    *slog.Logger
	// ttl is a session's lifetime (IPLEDGER_SESSION_TTL).
	ttl time.Duration
	// people keeps the sessions of people signed in through single
	// sign-on (cookie "u1.<id>.<HMAC>"); oidc, when set, gives sign-out
	// the issuer's end_session_endpoint.
	people *auth.People
	oidc   *auth.OIDC

	mu  sync.Mutex
	key []byte
}

func newSessions(au *auth.Service, secure bool, log *slog.Logger, ttl time.Duration, oidc *auth.OIDC) *sessions {
	if ttl <= 0 {
		ttl = SessionTTL
	}
	return &sessions{auth: au, secure: secure, log: log, ttl: ttl, oidc: oidc,
		people: &auth.People{Service: au, TTL: ttl}}
}

// cookieName is the session cookie's name: SecureSessionCookie behind
// TLS, where a cookie of the plain name is never read.
func (s *sessions) cookieName() string {
	if s.secure {
		return SecureSessionCookie
	}
	return SessionCookie
}

func (s *sessions) signingKey(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	k, err := s.auth.SessionKey(ctx)
	if err != nil {
		return nil, err
	}
	s.key = k
	return k, nil
}

var b64 = base64.RawURLEncoding

// Cookie formats: "v2.<id>.<sig>" is a token session, "u1.<id>.<sig>" a
// person's; each signature has its own purpose, so one never passes for
// the other.
const (
	tokenCookie  = "v2"
	personCookie = "u1"
)

func cookiePurpose(kind string) string {
	if kind == personCookie {
		return "user-session"
	}
	return "session"
}

func (s *sessions) setCookie(c echo.Context, key []byte, id string, exp time.Time) {
	s.setKindCookie(c, key, tokenCookie, id, exp)
}

func (s *sessions) setKindCookie(c echo.Context, key []byte, kind, id string, exp time.Time) {
	val := kind + "." + id + "." + b64.EncodeToString(handlers.Sign(key, cookiePurpose(kind), id))
	c.SetCookie(&http.Cookie{Name: s.cookieName(), Value: val, Path: "/", Expires: exp, MaxAge: int(time.Until(exp).Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure})
}

// Open starts a session for tok: a console_sessions row and its cookie.
func (s *sessions) Open(c echo.Context, tok *auth.Token) error {
	key, err := s.signingKey(c.Request().Context())
	if err != nil {
		return err
	}
	s.endCurrent(c)
	id, exp, err := s.auth.CreateSession(c.Request().Context(), tok.ID, s.ttl)
	if err != nil {
		return err
	}
	s.setCookie(c, key, id, exp)
	return nil
}

// OpenPerson starts a session for a person signed in through source: a
// user_sessions row and its cookie. A session this browser had before is
// ended first, and the new one always has a fresh random id, so a
// session id planted before sign-in is never signed in.
func (s *sessions) OpenPerson(c echo.Context, who *auth.Person, source string) error {
	key, err := s.signingKey(c.Request().Context())
	if err != nil {
		return err
	}
	s.endCurrent(c)
	id, exp, err := s.people.Open(c.Request().Context(), who, source)
	if err != nil {
		return err
	}
	s.setKindCookie(c, key, personCookie, id, exp)
	return nil
}

// endCurrent ends the session of the request's cookie, if any.
func (s *sessions) endCurrent(c echo.Context) {
	kind, id := s.sessionID(c)
	var err error
	switch kind {
	case tokenCookie:
		err = s.auth.DeleteSession(c.Request().Context(), id)
	case personCookie:
		_, err = s.people.Close(c.Request().Context(), id)
	}
	if err != nil {
		s.log.Warn("ending the previous console session failed", "error", err.Error())
	}
}

// Close ends the session on the server (deletes its row) and clears the
// cookie: a copy of the old cookie is refused from now on. It returns
// where the browser goes next: the login page, or for a person signed in
// through single sign-on the issuer's end_session_endpoint when it has
// one.
func (s *sessions) Close(c echo.Context) (string, error) {
	if who := handlers.CallerOf(c); who != nil && who.Ambient && who.LogoutURL != "" {
		// A person the trusted proxy signed in: the proxy holds the
		// sign-in, so its sign-out ends it; the audit log says who left.
		if err := s.people.SignedOutAtProxy(c.Request().Context(), who.Name, who.Role); err != nil {
			return "", err
		}
		return who.LogoutURL, nil
	}
	kind, id := s.sessionID(c)
	c.SetCookie(&http.Cookie{Name: s.cookieName(), Value: "", Path: "/", MaxAge: -1, Expires: time.Unix(0, 0),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure})
	switch kind {
	case tokenCookie:
		return "/login", s.auth.DeleteSession(c.Request().Context(), id)
	case personCookie:
		hint, err := s.people.Close(c.Request().Context(), id)
		if err != nil {
			return "", err
		}
		if s.oidc != nil {
			if u := s.oidc.EndSessionURL(hint); u != "" {
				return u, nil
			}
		}
	}
	return "/login", nil
}

// sessionID verifies the cookie's signature and returns its kind
// (tokenCookie, personCookie) and session id, or "" (no cookie, old
// format, forged).
func (s *sessions) sessionID(c echo.Context) (kind, id string) {
	ck, err := c.Cookie(s.cookieName())
	if err != nil || ck.Value == "" {
		return "", ""
	}
	f := strings.Split(ck.Value, ".")
	if len(f) != 3 || (f[0] != tokenCookie && f[0] != personCookie) || f[1] == "" {
		return "", ""
	}
	got, err := b64.DecodeString(f[2])
	if err != nil {
		return "", ""
	}
	key, err := s.signingKey(c.Request().Context())
	if err != nil {
		s.log.Error("console session key unavailable", "error", err)
		return "", ""
	}
	if !handlers.Verify(key, cookiePurpose(f[0]), f[1], got) {
		return "", ""
	}
	return f[0], f[1]
}

// sessionUnavailableKey holds, on the request, the 503 of a session
// look-up that could not reach the database: the console answers it
// (retry shortly) instead of sending a signed-in operator to the login
// page.
const sessionUnavailableKey = "ipledger.session_unavailable"

// lookupFailed logs a session look-up that failed for another reason
// than an unknown or ended session, and keeps an unavailable database's
// error on the request for consoleAuth.
func (s *sessions) lookupFailed(c echo.Context, err error) {
	e, ok := fault.AsError(err)
	if ok && e.Code == fault.CodeUnauthorized {
		return
	}
	if ok && e.Code == fault.CodeUnavailable {
		c.Set(sessionUnavailableKey, err)
		return
	}
	s.log.Error("console session: look-up failed", "error", err)
}

// Identify returns the identity of a live session (with its token's
// current role), renews the session's expiry when it is used, and puts the
// session's CSRF token on the context for the templates.
func (s *sessions) Identify(c echo.Context) *handlers.Caller {
	kind, id := s.sessionID(c)
	if id == "" {
		return nil
	}
	ctx := c.Request().Context()
	if kind == personCookie {
		p, err := s.people.Lookup(ctx, id)
		if err != nil {
			s.lookupFailed(c, err)
			return nil
		}
		key, _ := s.signingKey(ctx)
		handlers.SetCSRF(c, b64.EncodeToString(handlers.Sign(key, "csrf", id)))
		handlers.SetSessionRef(c, auth.PersonRef(id))
		return &handlers.Caller{Name: "user:" + p.Name, Role: p.Role, Session: true}
	}
	sess, err := s.auth.Session(ctx, id, s.ttl, sessionRenewEvery)
	if err != nil {
		s.lookupFailed(c, err)
		return nil
	}
	key, _ := s.signingKey(ctx)
	if sess.Renewed {
		s.setCookie(c, key, id, sess.Expires)
	}
	handlers.SetCSRF(c, b64.EncodeToString(handlers.Sign(key, "csrf", id)))
	handlers.SetSessionRef(c, auth.TokenSessionRef(id))
	return &handlers.Caller{Name: "console:" + sess.Token.Name, Role: sess.Token.Role, Session: true}
}

// CheckCSRF accepts the X-CSRF-Token header or the csrf_token form field
// when it matches the session's token; anything else is 403.
func (s *sessions) CheckCSRF(c echo.Context) error {
	want := handlers.CSRFOf(c)
	got := c.Request().Header.Get(CSRFHeader)
	if got == "" {
		got = c.FormValue("csrf_token")
	}
	if want == "" || got == "" || subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1 {
		return fault.Errf(fault.CodeForbidden, "", "missing or wrong CSRF token: reload the page and try again")
	}
	return nil
}
