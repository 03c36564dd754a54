package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// TestSSOCallbackErrorIsNotReflected: anyone can send a link to the
// callback with an error parameter of their own; the login page names an
// error code of the OAuth 2.0 form only, never free text an attacker
// wrote onto ipledger's own page.
func TestSSOCallbackErrorIsNotReflected(t *testing.T) {
	t.Parallel()
	s := newSSOSite(t, dbtest.Open(t, models.SQLite), true)
	b := newJarBrowser(s.consoleSite)
	for _, c := range []struct{ e, want, not string }{
		{"access_denied", "access_denied", ""},
		{"Your account is locked. Call +1-555-0100 now", "", "555-0100"},
	} {
		req, _ := http.NewRequest(http.MethodGet, s.srv.URL+auth.CallbackPath+"?"+url.Values{"error": {c.e}, "state": {"x"}}.Encode(), nil)
		res := b.do(req)
		body := readBody(t, res)
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%q: %d", c.e, res.StatusCode)
		}
		if c.want != "" && !strings.Contains(body, c.want) {
			t.Errorf("%q: the page does not name the error code", c.e)
		}
		if c.not != "" && strings.Contains(body, c.not) {
			t.Errorf("%q: the attacker's text is on the page", c.e)
		}
	}
}
