package models_test

import (
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
)

// An audit event's actor role is NULL (a system actor) or one of the
// three roles; the database refuses any other without the allocator.
func TestAuditEventActorRoleConstraint(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ins := `INSERT INTO audit_events (at, actor, actor_role, action, object_type, object_id) VALUES (?, ?, ?, 'pool.create', 'pool', 'p')`
		must(t, db.Exec(ins, t0, "system:startup", nil).Error)
		for _, r := range []string{"viewer", "operator", "admin"} {
			must(t, db.Exec(ins, t0, "user:alice", r).Error)
		}
		for _, bad := range []string{"root", "", "Operator"} {
			if err := db.Exec(ins, t0, "user:mallory", bad).Error; err == nil || !database.IsConstraintViolation(err) {
				t.Fatalf("role %q: %v", bad, err)
			}
		}
		var n int64
		must(t, db.Raw(`SELECT COUNT(*) FROM audit_events WHERE actor_role IS NULL`).Scan(&n).Error)
		if n != 1 {
			t.Fatalf("%d events without a role, want 1", n)
		}
	})
}
