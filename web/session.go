package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/handlers"
)

// SessionCookie is the console's session cookie: HttpOnly, SameSite=Lax,
// Secure when Config.SecureCookies, valid for SessionTTL.
const SessionCookie = "ipledger_session"

// SessionTTL is how long a console session lasts after sign-in.
const SessionTTL = 12 * time.Hour

// CSRFHeader carries the CSRF token of htmx requests (hx-headers on
// <body>); forms carry it in the field csrf_token.
const CSRFHeader = "X-CSRF-Token"

// sessions implements SessionAuth and handlers.SessionStore with a signed
// cookie: "v1|<token id>|<expiry unix>|<nonce>" and its HMAC-SHA256 under
// a key kept in the settings table (allocator.SessionKey), so every server
// process on one database accepts the same sessions. The cookie never holds
// the token itself; each request re-reads the token by id, so deleting the
// token (or changing its role) takes effect at once. The CSRF token is an
// HMAC of the session payload: bound to the session, nothing to store.
type sessions struct {
	a      *allocator.Allocator
	secure bool
	log    *slog.Logger

	mu  sync.Mutex
	key []byte
}

func newSessions(a *allocator.Allocator, secure bool, log *slog.Logger) *sessions {
	return &sessions{a: a, secure: secure, log: log}
}

func (s *sessions) signingKey(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	k, err := s.a.SessionKey(ctx)
	if err != nil {
		return nil, err
	}
	s.key = k
	return k, nil
}

func mac(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

// Open starts a session for tok: sets the signed cookie.
func (s *sessions) Open(c echo.Context, tok *allocator.Token) error {
	key, err := s.signingKey(c.Request().Context())
	if err != nil {
		return err
	}
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return err
	}
	exp := time.Now().Add(SessionTTL)
	payload := fmt.Sprintf("v1|%d|%d|%s", tok.ID, exp.Unix(), hex.EncodeToString(nonce[:]))
	val := b64.EncodeToString([]byte(payload)) + "." + b64.EncodeToString(mac(key, "session", payload))
	c.SetCookie(&http.Cookie{Name: SessionCookie, Value: val, Path: "/", Expires: exp, MaxAge: int(SessionTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure})
	return nil
}

// Close clears the session cookie. The cookie is stateless, so a copy
// stays valid until it expires or its token is deleted.
func (s *sessions) Close(c echo.Context) {
	c.SetCookie(&http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, Expires: time.Unix(0, 0),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure})
}

// payload verifies the cookie and returns its payload, token id, or "".
func (s *sessions) payload(c echo.Context) (string, int64) {
	ck, err := c.Cookie(SessionCookie)
	if err != nil || ck.Value == "" {
		return "", 0
	}
	enc, sig, ok := strings.Cut(ck.Value, ".")
	if !ok {
		return "", 0
	}
	raw, err1 := b64.DecodeString(enc)
	got, err2 := b64.DecodeString(sig)
	if err1 != nil || err2 != nil {
		return "", 0
	}
	key, err := s.signingKey(c.Request().Context())
	if err != nil {
		s.log.Error("console session key unavailable", "error", err)
		return "", 0
	}
	payload := string(raw)
	if !hmac.Equal(got, mac(key, "session", payload)) {
		return "", 0
	}
	f := strings.Split(payload, "|")
	if len(f) != 4 || f[0] != "v1" {
		return "", 0
	}
	id, err1 := strconv.ParseInt(f[1], 10, 64)
	exp, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || time.Now().Unix() >= exp {
		return "", 0
	}
	return payload, id
}

// Identify returns the identity of a valid session whose token still
// exists (with the token's current role), and puts the session's CSRF
// token on the context for the templates.
func (s *sessions) Identify(c echo.Context) *handlers.Identity {
	payload, id := s.payload(c)
	if payload == "" {
		return nil
	}
	tok, err := s.a.TokenByID(c.Request().Context(), id)
	if err != nil {
		if e, ok := allocator.AsError(err); !ok || e.Code != allocator.CodeUnauthorized {
			s.log.Error("console session: token look-up failed", "error", err)
		}
		return nil
	}
	key, _ := s.signingKey(c.Request().Context())
	handlers.SetCSRF(c, b64.EncodeToString(mac(key, "csrf", payload)))
	return &handlers.Identity{Name: "console:" + tok.Name, Role: tok.Role, Session: true}
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
		return allocator.Errf(allocator.CodeForbidden, "", "missing or wrong CSRF token: reload the page and try again")
	}
	return nil
}
