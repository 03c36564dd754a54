package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/web"
)

// TestSessionCookieHostPrefixBehindTLS: behind TLS the session cookie is
// __Host-ipledger_session, and a cookie of the plain name — which any
// sibling subdomain may set for the whole domain — is never read, so no
// other host can plant a session in a person's browser.
func TestSessionCookieHostPrefixBehindTLS(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, models.SQLite)
	a := allocator.New(db, allocator.Options{})
	au := auth.New(db, auth.Options{})
	tok, err := au.CreateToken(context.Background(), "alice", auth.RoleOperator, "")
	if err != nil {
		t.Fatal(err)
	}
	h := web.New(web.Config{Allocator: a, Auth: au, SecureCookies: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler()
	req := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var sess *http.Cookie
	for _, c := range rec.Result().Cookies() {
		if strings.HasSuffix(c.Name, web.SessionCookie) {
			sess = c
		}
	}
	if rec.Code != http.StatusSeeOther || sess == nil {
		t.Fatalf("login: %d, cookies %q", rec.Code, rec.Header().Values("Set-Cookie"))
	}
	if sess.Name != "__Host-ipledger_session" || !sess.Secure || sess.Path != "/" || sess.Domain != "" {
		t.Fatalf("session cookie %+v: want __Host-ipledger_session, Secure, Path=/, no Domain", sess)
	}
	get := func(name string) int {
		req := httptest.NewRequest("GET", "/pools", nil)
		req.AddCookie(&http.Cookie{Name: name, Value: sess.Value})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := get(sess.Name); code != http.StatusOK {
		t.Fatalf("with the __Host- cookie: %d", code)
	}
	if code := get(web.SessionCookie); code == http.StatusOK {
		t.Fatalf("a plain-named session cookie (settable by a sibling subdomain) was read: %d", code)
	}
}
