package models_test

import (
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/models/dbtest"
)

// Migration 13 numbers the events that exist before it in id order, 1..N.
// The test undoes migrations 13 and later (later ones are applied in
// order only) on a fresh database, writes events the old way, and migrates
// again.
func TestMigrationNumbersExistingEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		undoFleetCounts(t, db)
		for _, s := range []string{
			`DROP TABLE webhook_deliveries`, `DROP TABLE webhooks`,
			`DROP INDEX audit_events_unsequenced`, `DROP INDEX audit_events_revision`,
			`ALTER TABLE audit_events DROP COLUMN revision`,
			`DROP INDEX machines_chassis`, `DROP INDEX expected_machines_chassis`,
			`DROP INDEX expected_machines_name`, `DROP INDEX audit_events_action`,
			`DROP INDEX expected_machines_bmc_mac_lower`,
			`DROP TABLE deleted_machines`,
			`DROP TABLE user_sessions`, `ALTER TABLE console_sessions DROP COLUMN last_seen_at`,
			`ALTER TABLE audit_events DROP COLUMN actor_role`,
			`DELETE FROM schema_migrations WHERE version IN (13, 15, 16, 17, 20, 21, 23)`,
		} {
			must(t, db.Exec(s).Error)
		}
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
		if err == nil || !models.IsConstraintViolation(err) {
			t.Fatalf("a duplicate revision: %v", err)
		}
	})
}

// The delivery queue's constraints hold without the allocator: one
// delivery per (webhook, revision), delivery ids unique, a pending
// delivery has a due time, an answer body is at most 4 KiB, and a
// webhook's URL is http(s).
func TestWebhookConstraintsHoldWithoutTheAllocator(t *testing.T) {
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
			if err == nil || !models.IsConstraintViolation(err) {
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

// undoFleetCounts undoes migration 23.
func undoFleetCounts(t *testing.T, db *gorm.DB) {
	t.Helper()
	var stmts []string
	if models.DialectOf(db) == models.Postgres {
		stmts = []string{
			`DROP TRIGGER machines_derive ON machines`, `DROP TRIGGER machines_count ON machines`,
			`DROP TRIGGER network_configs_rebind ON network_configs`, `DROP TRIGGER expected_dpus_rebind ON expected_dpus`,
			`DROP TRIGGER expected_machines_rename ON expected_machines`,
			`DROP FUNCTION ipledger_machine_derive`, `DROP FUNCTION ipledger_machine_count`, `DROP FUNCTION ipledger_network_config_rebind`,
			`DROP FUNCTION ipledger_expected_dpu_rebind`, `DROP FUNCTION ipledger_expected_machine_rename`,
		}
	} else {
		for _, tr := range []string{"machines_count_insert", "machines_derive_update", "machines_count_update", "machines_count_delete",
			"network_configs_rebind_insert", "network_configs_rebind_update", "network_configs_rebind_delete",
			"expected_dpus_rebind_insert", "expected_dpus_rebind_update", "expected_dpus_rebind_delete",
			"expected_machines_rename_insert", "expected_machines_rename_update", "expected_machines_rename_delete"} {
			stmts = append(stmts, `DROP TRIGGER `+tr)
		}
	}
	stmts = append(stmts, `DROP INDEX machines_binding_v4`, `DROP INDEX machines_binding_v6`, `DROP INDEX machines_hostless`,
		`DROP INDEX machines_sort_name`, `DROP TABLE fleet_counts`, `ALTER TABLE machines DROP COLUMN sort_name`,
		`ALTER TABLE machines DROP COLUMN binding_v4`, `ALTER TABLE machines DROP COLUMN binding_v6`)
	for _, s := range stmts {
		must(t, db.Exec(s).Error)
	}
}
