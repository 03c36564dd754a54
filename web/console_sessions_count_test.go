package web_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
)

// TestConsoleSessionsRowCount: the admin's sessions page says how many
// sessions are open ("2 open sessions"), as every other list says how
// many rows it shows, and the count follows the sessions.
func TestConsoleSessionsRowCount(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		admin := site.login(auth.RoleAdmin)
		count := func() string {
			t.Helper()
			page := expect(t, admin.get("/sessions"), http.StatusOK)
			m := regexp.MustCompile(`(?s)data-row-count>(.*?)</div>`).FindStringSubmatch(page)
			if m == nil {
				t.Fatalf("the sessions page has no row count:\n%s", clip(page))
			}
			return strings.Join(strings.Fields(m[1]), " ")
		}
		if got := count(); got != "1 open session" {
			t.Errorf("one session: the page says %q", got)
		}
		site.login(auth.RoleOperator)
		site.login(auth.RoleViewer)
		if got := count(); got != "3 open sessions" {
			t.Errorf("three sessions: the page says %q", got)
		}
	})
}
