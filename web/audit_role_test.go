package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

func wantRole(t *testing.T, ev []models.AuditEvent, actor, role string) {
	t.Helper()
	if len(ev) == 0 {
		t.Fatalf("no event of %s", actor)
	}
	for _, e := range ev {
		if e.Actor != actor || e.ActorRole == nil || *e.ActorRole != role {
			t.Fatalf("event %s by %s has role %v, want %s by %s", e.Action, e.Actor, e.ActorRole, role, actor)
		}
	}
}

// TestAuditEventRoleOfToken: an API call stores the role of the token
// that made it, through the automatic allocation's batch path too.
func TestAuditEventRoleOfToken(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		p := newPoolAPI(t, db)
		p.want(201, "POST", "/api/v1/pools", p.admin, `{"name":"vlan","type":"integer","ranges":[{"first":"100","last":"199","auto_assign":true}]}`)
		for _, m := range []string{"m1", "m2"} {
			p.want(201, "POST", "/api/v1/pools/vlan/allocations", p.operator, `{"owner_type":"machine","owner_id":"`+m+`"}`)
		}
		wantRole(t, events(t, db, "pool.create"), "token:bootstrap-admin", "admin")
		wantRole(t, events(t, db, "allocation.create"), "token:op", "operator")
	})
}

// TestAuditEventRoleOfPeople: a person signed in through single sign-on
// or the trusted proxy acts with the role their groups gave them.
func TestAuditEventRoleOfPeople(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		s := newSSOSite(t, db, true)
		b := newJarBrowser(s.consoleSite)
		s.finish(b, s.signIn(b, "", "alice", "alice-pw"))
		res := b.post("/pools", url.Values{"name": {"sso-vlans"}, "type": {"integer"}, "first": {"100"}, "last": {"199"}, "auto_assign": {"on"}}, true)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("create pool: %d", res.StatusCode)
		}
		wantRole(t, events(t, db, "pool.create"), "user:alice", "admin")
		wantRole(t, events(t, db, "session.open"), "user:alice", "admin")
		// The console's audit log shows the role beside the actor.
		expect(t, b.get("/events?action=pool.create"), http.StatusOK, "user:alice", "(admin)")
	})
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		p := newProxySite(t, db)
		rec := p.do("192.0.2.10:1", "POST", "/api/v1/pools", `{"name":"pv","type":"integer","ranges":[{"first":"1","last":"9","auto_assign":true}]}`,
			"X-Forwarded-User", "dave", "X-Forwarded-Groups", "ipam-admins")
		if rec.Code != http.StatusCreated {
			t.Fatalf("create pool: %d %s", rec.Code, rec.Body)
		}
		rec = p.do("192.0.2.10:1", "POST", "/api/v1/pools/pv/allocations", `{"owner_type":"machine","owner_id":"m1"}`,
			"X-Forwarded-User", "carol", "X-Forwarded-Groups", "staff,ipam-operators")
		if rec.Code != http.StatusCreated {
			t.Fatalf("operator allocates: %d %s", rec.Code, rec.Body)
		}
		wantRole(t, events(t, db, "pool.create"), "user:dave", "admin")
		wantRole(t, events(t, db, "allocation.create"), "user:carol", "operator")
	})
}
