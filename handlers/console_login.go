package handlers

import (
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/views"
)

// SessionStore opens and closes console sessions (the signed cookie lives
// in package web).
type SessionStore interface {
	// Open starts a session for the token (sets the cookie).
	Open(c echo.Context, tok *auth.Token) error
	// Close ends the session on the server and clears the cookie; it
	// returns where the browser goes next (the login page, or the
	// identity provider's sign-out).
	Close(c echo.Context) (string, error)
}

// LoginOptions is what the login page offers besides the token form.
type LoginOptions struct {
	// SSOName labels the single sign-on button ("": no single sign-on).
	SSOName string
	// SSOUnavailable says why single sign-on cannot be used now ("" when
	// it can).
	SSOUnavailable func(c echo.Context) string
	// NoTokenForm turns the token form off (IPLEDGER_TOKEN_LOGIN=false).
	NoTokenForm bool
}

// LoginView is the login page with an error and where to go after.
func (h *Console) LoginView(c echo.Context, errMsg, next string) views.Login {
	l := views.Login{Err: errMsg, Next: next, SSOName: h.SignIn.SSOName, NoTokenForm: h.SignIn.NoTokenForm}
	if l.SSOName != "" && h.SignIn.SSOUnavailable != nil {
		l.SSOUnavailable = h.SignIn.SSOUnavailable(c)
	}
	return l
}

// SafeNext is the rule of a post-login redirect (safeNext).
func SafeNext(next string) string { return safeNext(next) }

// safeNext keeps a post-login redirect on this site: a plain local path
// ("/pools/lo-ip?state=quarantined"), or "/" for anything else — a scheme,
// a host, "//host", a backslash (browsers read "/\\host" as "//host"), any
// control character or space (browsers drop tabs and newlines from URLs,
// so "/\t/evil.example" would become "//evil.example"), or /login itself.
func safeNext(next string) string {
	if next == "" || len(next) > 2048 || next[0] != '/' {
		return "/"
	}
	for _, r := range next {
		if r < 0x21 || r == 0x7f || r == '\\' || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		strings.HasPrefix(next, "//") || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") ||
		u.Path == "/login" || strings.HasPrefix(u.Path, "/login/") {
		return "/"
	}
	return next
}

// LoginForm: GET /login.
func (h *Console) LoginForm(c echo.Context) error {
	if CallerOf(c) != nil {
		// Signed in already (in another tab, say): go where the link
		// meant to go, with the same rule as after signing in.
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	return render(c, http.StatusOK, views.LoginPage(h.LoginView(c, "", safeNext(c.QueryParam("next")))))
}

// Login: POST /login with the form field token → session cookie and 303 to
// next; an unknown token re-renders the form with 401.
func (h *Console) Login(c echo.Context, store SessionStore) error {
	next := safeNext(c.FormValue("next"))
	if h.SignIn.NoTokenForm {
		return render(c, http.StatusForbidden, views.LoginPage(h.LoginView(c, "Signing in with an API token is turned off on this site.", next)))
	}
	tok, err := h.Auth.Authenticate(Ctx(c), strings.TrimSpace(c.FormValue("token")))
	if err != nil {
		if e, ok := fault.AsError(err); ok && e.Code == fault.CodeUnauthorized {
			return render(c, http.StatusUnauthorized, views.LoginPage(h.LoginView(c, "This token is not known to ipledger.", next)))
		}
		return err
	}
	if err := store.Open(c, tok); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, next)
}

// Logout: POST /logout (CSRF checked) → session row deleted, cookie
// cleared, 303 to /login (HX-Redirect for htmx); for a person the trusted
// proxy signed in, a page that moves on to the proxy's sign-out
// (ProxySignOutPage says why not a 303). A caller nothing here can
// sign out (a proxy without a sign-out URL, a client certificate) gets
// the sign-out page saying why, and nothing changes.
func (h *Console) Logout(c echo.Context, store SessionStore) error {
	if id := CallerOf(c); id != nil && id.SignOutNote != "" {
		return render(c, http.StatusOK, views.LogoutPage(h.page(c, "Sign out", "")))
	}
	to, err := store.Close(c)
	if err != nil {
		return err
	}
	if id := CallerOf(c); id != nil && id.Ambient && id.LogoutURL != "" && !IsHTMX(c) {
		return render(c, http.StatusOK, views.ProxySignOutPage(to))
	}
	if IsHTMX(c) {
		c.Response().Header().Set("HX-Redirect", to)
		return c.NoContent(http.StatusOK)
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// LogoutPage: GET /logout — a page with the Sign out button (sign-out
// itself is POST /logout with the CSRF token, so a link or an image cannot
// sign anyone out).
func (h *Console) LogoutPage(c echo.Context) error {
	return render(c, http.StatusOK, views.LogoutPage(h.page(c, "Sign out", "")))
}
