package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
)

// TestConsoleEventsObjectTypeFilter: the audit log's object-type filter
// offers every object type audit events are written with
// (audit.ObjectTypes, held to the writes by its own test), webhook and
// session events included, and filtering on webhook lists a webhook's
// creation.
func TestConsoleEventsObjectTypeFilter(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		b := site.login(auth.RoleAdmin)
		expect(t, b.post("/webhooks", url.Values{"name": {"ctl"}, "url": {"http://127.0.0.1:1/hook"}, "secret": {"filter-secret-0123456789"},
			"actions": {"allocation.*"}, "enabled": {"true"}}, true), http.StatusSeeOther)
		body := expect(t, b.get("/events?object_type=webhook"), http.StatusOK, "webhook.create")
		sel := regexp.MustCompile(`(?s)<select id="f-otype" name="object_type">(.*?)</select>`).FindStringSubmatch(body)
		if sel == nil {
			t.Fatalf("no object-type filter on the audit log:\n%s", clip(body))
		}
		var offered []string
		for _, m := range regexp.MustCompile(`<option value="([^"]*)"( selected)?`).FindAllStringSubmatch(sel[1], -1) {
			offered = append(offered, m[1])
			if (m[2] != "") != (m[1] == "webhook") {
				t.Errorf("option %q selected=%v with object_type=webhook", m[1], m[2] != "")
			}
		}
		if want := append([]string{""}, audit.ObjectTypes...); !slices.Equal(offered, want) {
			t.Errorf("the object-type filter offers %q, want %q", offered, want)
		}
		for _, typ := range []string{"webhook", "session"} {
			if !slices.Contains(offered, typ) {
				t.Errorf("the object-type filter lacks %q", typ)
			}
		}
	})
}
