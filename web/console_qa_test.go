package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
)

// TestConsoleEarlyErrorsKeepNavigation: errors raised before a console
// route's own middleware runs (an unknown path, a NUL or bad UTF-8 in the
// header search's query) are shown to a signed-in operator with the
// navigation and the search box, not as an anonymous "Sign in" page.
func TestConsoleEarlyErrorsKeepNavigation(t *testing.T) {
	site := newSQLiteSite(t)
	v := site.login(allocator.RoleViewer)
	for path, want := range map[string]int{
		"/no-such-page":   http.StatusNotFound,
		"/search?q=a%00b": http.StatusUnprocessableEntity,
		"/search?q=%ff":   http.StatusUnprocessableEntity,
	} {
		body := expect(t, v.get(path), want, `<nav aria-label="main">`, `id="global-q"`, "Sign out")
		if strings.Contains(body, `href="/login">Sign in`) {
			t.Fatalf("%s: a signed-in error page offers Sign in", path)
		}
	}
	// Anonymous callers still get the bare page with the sign-in link.
	expect(t, site.anonymous().get("/no-such-page"), http.StatusNotFound, `href="/login">Sign in`)
}
