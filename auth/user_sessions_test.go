package auth

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

func TestPeopleSessions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		clk := testkit.NewClock(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
		p := &People{Service: New(db, Options{Now: clk.Now}), TTL: 2 * time.Hour}
		ctx := context.Background()
		alice := &Person{Actor: "user:alice", Name: "alice", Role: RoleAdmin}
		id, exp, err := p.Open(ctx, alice, "oidc")
		if err != nil {
			t.Fatal(err)
		}
		if !exp.Equal(clk.Now().Add(2 * time.Hour)) {
			t.Fatalf("expires %v", exp)
		}
		if _, _, err := p.Open(ctx, &Person{Actor: "user:x", Name: "x"}, "oidc"); err == nil {
			t.Fatal("a session without a role was opened")
		}
		s, err := p.Lookup(ctx, id)
		if err != nil || s.Name != "alice" || s.Role != RoleAdmin {
			t.Fatalf("lookup: %+v %v", s, err)
		}
		// The session ends TTL after sign-in however much it is used.
		clk.Advance(119 * time.Minute)
		if _, err := p.Lookup(ctx, id); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
		if _, err := p.Lookup(ctx, id); !testkit.IsCode(err, fault.CodeUnauthorized) {
			t.Fatalf("after the TTL: %v", err)
		}

		// An admin lists and ends sessions; the list shows no secret.
		id2, _, _ := p.Open(ctx, &Person{Actor: "user:bob", Name: "bob", Role: RoleViewer}, "oidc")
		list, err := p.List(ctx)
		if err != nil || len(list) != 1 || list[0].Actor != "user:bob" || list[0].Role != RoleViewer {
			t.Fatalf("list: %+v %v", list, err)
		}
		if list[0].Ref[1:] == id2[:16] || list[0].Ref[1:] == sessionHash(id2) {
			t.Fatal("the ref is the session id or its hash")
		}
		actx := audit.WithActor(ctx, "user:alice", "req-1")
		if _, err := p.End(actx, list[0].Ref); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Lookup(ctx, id2); !testkit.IsCode(err, fault.CodeUnauthorized) {
			t.Fatalf("an ended session still works: %v", err)
		}
		if _, err := p.End(actx, list[0].Ref); !testkit.IsCode(err, fault.CodeNotFound) {
			t.Fatalf("ending twice: %v", err)
		}
		var evs []models.AuditEvent
		db.Order("id").Find(&evs)
		var got []string
		for _, e := range evs {
			got = append(got, e.Actor+" "+e.Action+" "+e.ObjectID)
		}
		want := []string{"user:alice session.open user:alice", "user:bob session.open user:bob", "user:alice session.end user:bob"}
		if len(got) != len(want) {
			t.Fatalf("events %q, want %q", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("events %q, want %q", got, want)
			}
		}
		// The database refuses a session without a role or with a made-up one.
		for _, role := range []string{"", "root"} {
			err := db.Exec(`INSERT INTO user_sessions (id, username, role, source, created_at, last_seen_at, expires_at) VALUES (?, 'm', ?, 'oidc', 1, 1, 2)`,
				sessionHash(role+"x"), role).Error
			if !database.IsConstraintViolation(err) {
				t.Errorf("role %q: %v", role, err)
			}
		}
	})
}

// TestPeopleSessionIDToken: a session keeps the ID token of its sign-in
// sealed under a key derived from the session id, which the database
// does not hold: the stored value is not the token and opens only with
// that id; sign-out gives the token back; the sessions list and the
// audit log never show it; the database refuses a plaintext token.
func TestPeopleSessionIDToken(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		p := &People{Service: New(db, Options{}), TTL: time.Hour}
		ctx := context.Background()
		const raw = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1LWFsaWNlIn0.c2lnbmF0dXJlLW9mLXRoZS1pc3N1ZXI"
		aliceID, _, err := p.Open(ctx, &Person{Actor: "user:alice", Name: "alice", Role: RoleAdmin, IDToken: raw}, "oidc")
		if err != nil {
			t.Fatal(err)
		}
		bobID, _, err := p.Open(ctx, &Person{Actor: "user:bob", Name: "bob", Role: RoleViewer}, "oidc")
		if err != nil {
			t.Fatal(err)
		}
		var stored []struct{ IDToken *string }
		if err := db.Raw(`SELECT id_token FROM user_sessions ORDER BY username`).Scan(&stored).Error; err != nil {
			t.Fatal(err)
		}
		if len(stored) != 2 || stored[0].IDToken == nil || stored[1].IDToken != nil {
			t.Fatalf("stored id_token values: %+v", stored)
		}
		sealed := *stored[0].IDToken
		if !strings.HasPrefix(sealed, "v1.") || strings.Contains(sealed, raw) || strings.Contains(sealed, raw[len(raw)-20:]) {
			t.Fatalf("the stored token is not sealed: %.40s…", sealed)
		}
		// Moved to bob's row, alice's sealed token does not open.
		if err := db.Exec(`UPDATE user_sessions SET id_token = ? WHERE username = 'bob'`, sealed).Error; err != nil {
			t.Fatal(err)
		}
		if hint, err := p.Close(ctx, bobID); err != nil || hint != "" {
			t.Fatalf("bob's sign-out with alice's sealed token: %q %v", hint.Reveal(), err)
		}
		list, _ := p.List(ctx)
		var events []string
		db.Raw(`SELECT COALESCE(before_json, '') || COALESCE(after_json, '') FROM audit_events`).Scan(&events)
		for _, text := range append(events, fmt.Sprintf("%+v %v", list, &Person{IDToken: raw})) {
			if strings.Contains(text, raw) || strings.Contains(text, sealed) {
				t.Fatalf("the ID token shows: %s", text)
			}
		}
		hint, err := p.Close(ctx, aliceID)
		if err != nil || hint.Reveal() != raw {
			t.Fatalf("alice's sign-out gives back %q, %v", hint.Reveal(), err)
		}
		if hint, err := p.Close(ctx, aliceID); err != nil || hint != "" {
			t.Fatalf("a second sign-out: %q %v", hint.Reveal(), err)
		}
		// The database refuses a plaintext token, and one over the bound.
		for _, bad := range []string{raw, "v1." + strings.Repeat("A", 16384)} {
			err := db.Exec(`INSERT INTO user_sessions (id, username, role, source, created_at, last_seen_at, expires_at, id_token) VALUES (?, 'm', 'admin', 'oidc', 1, 1, 2, ?)`,
				sessionHash(bad[:8]), bad).Error
			if !database.IsConstraintViolation(err) {
				t.Errorf("id_token %.12s… (%d bytes): %v", bad, len(bad), err)
			}
		}
	})
}

// TestSignInWithLowerRoleEndsOtherSessions: when a sign-in gives a person
// a lower role than an open session of theirs holds (they left a group),
// every other session of theirs ends with it, audited with the reason;
// another person's sessions are untouched. A sign-in with the same or a
// higher role ends nothing.
func TestSignInWithLowerRoleEndsOtherSessions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		clk := testkit.NewClock(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
		p := &People{Service: New(db, Options{Now: clk.Now}), TTL: 2 * time.Hour}
		ctx := context.Background()
		open := func(name string, role Role) string {
			t.Helper()
			id, _, err := p.Open(ctx, &Person{Actor: "user:" + name, Name: name, Role: role}, "oidc")
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Minute)
			return id
		}
		live := func(id string) bool {
			_, err := p.Lookup(ctx, id)
			return err == nil
		}
		laptop, desktop := open("alice", RoleAdmin), open("alice", RoleAdmin)
		bob := open("bob", RoleAdmin)
		if !live(laptop) || !live(desktop) {
			t.Fatal("a second sign-in with the same role ended the first")
		}
		// alice has left the admins' group: her next sign-in is an
		// operator's.
		phone := open("alice", RoleOperator)
		if live(laptop) || live(desktop) || !live(phone) || !live(bob) {
			t.Fatalf("after alice's operator sign-in: laptop %v desktop %v phone %v bob %v; want only phone and bob",
				live(laptop), live(desktop), live(phone), live(bob))
		}
		var ended []models.AuditEvent
		db.Where("action = ?", "session.end").Order("id").Find(&ended)
		if len(ended) != 2 {
			t.Fatalf("%d session.end events, want 2", len(ended))
		}
		for i, role := range []string{"admin", "admin"} {
			e := ended[i]
			if e.Actor != "user:alice" || e.ObjectID != "user:alice" || e.BeforeJSON == nil ||
				!strings.Contains(*e.BeforeJSON, `"role":"`+role+`"`) || !strings.Contains(*e.BeforeJSON, "a later sign-in gave the role operator") {
				t.Errorf("session.end %d: %s %s %v", i, e.Actor, e.ObjectID, deref(e.BeforeJSON))
			}
		}
		// The same role again, then a higher one: nothing ends.
		tablet := open("alice", RoleOperator)
		admin := open("alice", RoleAdmin)
		if !live(phone) || !live(tablet) || !live(admin) {
			t.Fatalf("a sign-in without a lower role ended a session: phone %v tablet %v admin %v", live(phone), live(tablet), live(admin))
		}
		// An expired admin session does not count.
		clk.Advance(3 * time.Hour)
		fresh := open("alice", RoleViewer)
		if !live(fresh) {
			t.Fatal("the new session does not work")
		}
		var n int64
		db.Raw(`SELECT COUNT(*) FROM audit_events WHERE action = 'session.end'`).Scan(&n)
		if n != 2 {
			t.Fatalf("%d session.end events, want still 2: expired sessions are swept, not ended", n)
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
