package handlers

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/console"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/views"
	"github.com/ipledger/ipledger/webhook"
)

// Console serves the operator console's pages and fragments (docs/console.md).
// One small file per page or action (console_*.go); each handler parses the
// form, calls the allocator operation the REST API calls, and renders: a
// full page, or the fragment an htmx request (HX-Request) swaps in.
// Validation errors come back as 422 with the allocator's message next to
// its field; without JavaScript every form posts and redirects (303).
type Console struct {
	A *allocator.Allocator
	// Reads are the console's read models over A (search, the fleet,
	// the machine page, pending edits, quarantine and host lists).
	Reads *console.Console
	// Auth keeps tokens and sessions (sign-in, the key that seals
	// console state).
	Auth *auth.Service
	// Feed is the change feed; Hooks the webhooks and their deliveries.
	Feed  *feed.Feed
	Hooks *webhook.Service
	// AuditLog is the audit log.
	AuditLog *audit.Log
	// SecureCookies marks the flash cookie Secure (behind TLS).
	SecureCookies bool
	// SignIn is what the login page offers.
	SignIn LoginOptions
	// Sessions lists and ends console sessions (the sessions page).
	Sessions SessionAdmin
}

const csrfKey = "ipledger.csrf"

// SetCSRF stores the session's CSRF token for the templates.
func SetCSRF(c echo.Context, tok string) { c.Set(csrfKey, tok) }

// CSRFOf returns the session's CSRF token ("" without a session).
func CSRFOf(c echo.Context) string {
	s, _ := c.Get(csrfKey).(string)
	return s
}

// IsHTMX reports an htmx request (fragment wanted).
func IsHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

const flashCookie = "ipledger_flash"

// page builds the frame data of a full page, consuming the flash message.
func (h *Console) page(c echo.Context, title, nav string) views.Page {
	p := views.Page{Title: title, Nav: nav, CSRF: CSRFOf(c)}
	if id := CallerOf(c); id != nil {
		p.User, p.Role, p.SignOutNote = id.Name, id.Role, id.SignOutNote
	}
	if ck, err := c.Cookie(flashCookie); err == nil && ck.Value != "" {
		if raw, ok := h.unseal(c, "flash", ck.Value); ok {
			kind, rest, ok := strings.Cut(string(raw), "|")
			msg, links, _ := strings.Cut(rest, "\x00")
			if ok && (kind == "ok" || kind == "warn" || kind == "bad" || kind == "info") {
				p.Flash, p.FlashKind = msg, kind
				if links != "" {
					_ = json.Unmarshal([]byte(links), &p.FlashLinks)
				}
			}
		}
		c.SetCookie(&http.Cookie{Name: flashCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
			SameSite: http.SameSiteLaxMode, Secure: h.SecureCookies})
	}
	return p
}

// redirect answers a successful form post: 303 to target with a one-time
// flash message (a cookie signed by seal, so it cannot be forged) (post-redirect-get), or for htmx an HX-Redirect so the
// browser loads the same page.
func (h *Console) redirect(c echo.Context, target, kind, msg string, links ...views.Link) error {
	if msg != "" {
		payload := kind + "|" + msg
		if len(links) > 0 {
			b, _ := json.Marshal(links)
			payload += "\x00" + string(b)
		}
		val, err := h.seal(c, "flash", []byte(payload))
		if err != nil {
			return err
		}
		c.SetCookie(&http.Cookie{Name: flashCookie, Value: val, Path: "/",
			MaxAge: 60, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: h.SecureCookies, Expires: time.Now().Add(time.Minute)})
	}
	if IsHTMX(c) {
		c.Response().Header().Set("HX-Redirect", target)
		return c.NoContent(http.StatusOK)
	}
	return c.Redirect(http.StatusSeeOther, target)
}

// Render is render for package web's pages (sign-in, refusals).
func Render(c echo.Context, status int, comp templ.Component) error { return render(c, status, comp) }

// render writes a component into a buffer first, so a late error still
// becomes a clean error page instead of half a page.
func render(c echo.Context, status int, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(c.Request().Context(), &buf); err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.HTMLBlob(status, buf.Bytes())
}

// formStatus is the status of a form re-rendered with errors: the
// allocator error's status (422 invalid, 409 conflict…), 422 otherwise.
func formStatus(err error) int {
	if e, ok := fault.AsError(err); ok {
		return e.Code.Status()
	}
	return http.StatusUnprocessableEntity
}

// isFormError reports an error that belongs next to a form field (the
// input was refused) rather than on an error page: invalid, conflict and
// the other 409s, stale_version, bad_request.
func isFormError(err error) bool {
	e, ok := fault.AsError(err)
	if !ok {
		return false
	}
	switch e.Code {
	case fault.CodeInvalid, fault.CodeConflict, fault.CodeNotAvailable, fault.CodePoolExhausted,
		fault.CodeNotOwner, fault.CodeStaleVersion, fault.CodeBadRequest:
		return true
	}
	return false
}

// ConsoleError renders err for a console path: a full HTML error page, or
// for htmx a message retargeted to #toast.
func ConsoleError(err error, c echo.Context) {
	e, status := ToAPIError(err)
	if status == http.StatusUnauthorized {
		if IsHTMX(c) {
			c.Response().Header().Set("HX-Redirect", "/login")
			_ = c.NoContent(http.StatusUnauthorized)
			return
		}
		_ = c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
		return
	}
	msg := e.Message
	if IsHTMX(c) {
		c.Response().Header().Set("HX-Retarget", "#toast")
		c.Response().Header().Set("HX-Reswap", "innerHTML")
		_ = render(c, status, views.Toast("bad", msg))
		return
	}
	title := http.StatusText(status)
	switch e.Code {
	case fault.CodeForbidden:
		title = "Not allowed"
	case fault.CodeNotFound:
		title = "Not found"
	}
	var p views.Page
	if id := CallerOf(c); id != nil {
		p = views.Page{Title: title, User: id.Name, Role: id.Role, CSRF: CSRFOf(c)}
	}
	_ = render(c, status, views.ErrorPage(p, status, title, msg, CallerOf(c) != nil))
}

// formValue is a trimmed form field.
func formValue(c echo.Context, name string) string { return strings.TrimSpace(c.FormValue(name)) }

// checked reads a checkbox.
func checked(c echo.Context, name string) bool {
	v := c.FormValue(name)
	return v == "true" || v == "on" || v == "1"
}

// sealed signs small console state that travels through the browser (the
// flash message, a no-JS import result) with the session key
// (auth.Service.SessionKey), so a crafted cookie or link cannot put words in
// the console's mouth: "<base64url payload>.<base64url HMAC-SHA256>".
func (h *Console) seal(c echo.Context, purpose string, payload []byte) (string, error) {
	key, err := h.Auth.SessionKey(Ctx(c))
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(Sign(key, purpose, string(payload))), nil
}

// unseal verifies a value made by seal for the same purpose.
func (h *Console) unseal(c echo.Context, purpose, v string) ([]byte, bool) {
	enc, sig, ok := strings.Cut(v, ".")
	if !ok {
		return nil, false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(enc)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	key, err := h.Auth.SessionKey(Ctx(c))
	if err != nil {
		return nil, false
	}
	return payload, Verify(key, purpose, string(payload), got)
}
