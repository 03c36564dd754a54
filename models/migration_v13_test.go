package models_test

import (
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// Migration 13 numbers the events that exist before it in id order, 1..N.
// The test builds a database at version 12, writes events the old way,
// and migrates to today's schema.
func TestMigrationNumbersExistingEvents(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := openAt(t, d, 12)
			numbersExistingEvents(t, db)
		})
	}
}

func numbersExistingEvents(t *testing.T, db *gorm.DB) {
	for i := 0; i < 5; i++ {
		must(t, db.Exec(`INSERT INTO audit_events (at, actor, action, object_type, object_id) VALUES (?, 'old', 'pool.create', 'pool', ?)`,
			t0, strings.Repeat("p", i+1)).Error)
	}
	must(t, db.Exec(`DELETE FROM audit_events WHERE object_id = 'pp'`).Error) // ids with a hole
	must(t, models.Migrate(db))
	var rows []struct {
		ID       int64
		Revision int64
	}
	must(t, db.Raw(`SELECT id, revision FROM audit_events ORDER BY id`).Scan(&rows).Error)
	if len(rows) != 4 {
		t.Fatalf("%d events", len(rows))
	}
	for i, r := range rows {
		if r.Revision != int64(i+1) {
			t.Fatalf("event %d has revision %d, want %d (id order)", r.ID, r.Revision, i+1)
		}
	}
	// Two events cannot share a revision (the feed's order rests on it).
	err := db.Exec(`UPDATE audit_events SET revision = 1 WHERE revision = 2`).Error
	if err == nil || !database.IsConstraintViolation(err) {
		t.Fatalf("a duplicate revision: %v", err)
	}
}

// The delivery queue's constraints hold without the allocator: one
// delivery per (webhook, revision), delivery ids unique, a pending
// delivery has a due time, an answer body is at most 4 KiB, and a
// webhook's URL is http(s).
func TestWebhookConstraintsHoldWithoutTheAllocator(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		must(t, db.Exec(`INSERT INTO audit_events (at, actor, action, object_type, object_id, revision) VALUES (?, 'a', 'x.y', 'x', '1', 1)`, t0).Error)
		var ev int64
		must(t, db.Raw(`SELECT id FROM audit_events`).Scan(&ev).Error)
		hook := `INSERT INTO webhooks (name, url, secret, actions, enabled, created_at, updated_at) VALUES (?, ?, 'sssssssssssssssss', '["*"]', true, ?, ?)`
		must(t, db.Exec(hook, "h", "http://r/", t0, t0).Error)
		var hid int64
		must(t, db.Raw(`SELECT id FROM webhooks`).Scan(&hid).Error)
		del := `INSERT INTO webhook_deliveries (webhook_id, delivery_id, event_id, revision, action, state, created_at, give_up_at, next_attempt_at, response_body) VALUES (?, ?, ?, 1, 'x.y', ?, ?, ?, ?, ?)`
		must(t, db.Exec(del, hid, "d1", ev, "pending", t0, t0, t0, "").Error)
		for name, err := range map[string]error{
			"second delivery of one event": db.Exec(del, hid, "d2", ev, "pending", t0, t0, t0, "").Error,
			"pending without due time":     db.Exec(strings.Replace(del, "1, 'x.y'", "2, 'x.y'", 1), hid, "d3", ev, "pending", t0, t0, nil, "").Error,
			"answer over 4 KiB":            db.Exec(strings.Replace(del, "1, 'x.y'", "3, 'x.y'", 1), hid, "d4", ev, "delivered", t0, t0, nil, strings.Repeat("a", 4097)).Error,
			"same delivery id":             db.Exec(strings.Replace(del, "1, 'x.y'", "4, 'x.y'", 1), hid, "d1", ev, "pending", t0, t0, t0, "").Error,
			"unknown state":                db.Exec(strings.Replace(del, "1, 'x.y'", "5, 'x.y'", 1), hid, "d5", ev, "lost", t0, t0, t0, "").Error,
			"ftp URL":                      db.Exec(hook, "g", "ftp://r/", t0, t0).Error,
			"same name":                    db.Exec(hook, "h", "http://r/", t0, t0).Error,
		} {
			if err == nil || !database.IsConstraintViolation(err) {
				t.Errorf("%s: %v, want a constraint violation", name, err)
			}
		}
		// Deleting the webhook deletes its queue.
		must(t, db.Exec(`DELETE FROM webhooks WHERE id = ?`, hid).Error)
		var n int64
		must(t, db.Raw(`SELECT COUNT(*) FROM webhook_deliveries`).Scan(&n).Error)
		if n != 0 {
			t.Fatalf("%d deliveries left", n)
		}
	})
}

// openAt opens a fresh database of dialect d migrated up to version only:
// the schema an older release left, for a migration test to fill.
func openAt(t *testing.T, d models.Dialect, version int) *gorm.DB {
	t.Helper()
	db, _, err := database.Open(dbtest.NewURL(t, d))
	must(t, err)
	if s, e := db.DB(); e == nil {
		t.Cleanup(func() { s.Close() })
	}
	must(t, models.MigrateTo(db, version))
	return db
}
