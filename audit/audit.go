package audit

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
	"gorm.io/gorm"
)

// NewRow builds the audit row of one change made for ctx's actor.
// before/after are marshalled to JSON; callers pass values with secrets
// already removed.
func NewRow(ctx context.Context, at time.Time, action, objectType, objectID string, before, after any) (models.AuditEvent, error) {
	act := ActorFrom(ctx)
	ev := models.AuditEvent{At: at, Actor: act.Name, ActorRole: act.RolePtr(), Action: action, ObjectType: objectType,
		ObjectID: objectID, RequestID: act.RequestID}
	if before != nil {
		b, err := json.Marshal(before)
		if err != nil {
			return ev, err
		}
		s := string(b)
		ev.BeforeJSON = &s
	}
	if after != nil {
		b, err := json.Marshal(after)
		if err != nil {
			return ev, err
		}
		s := string(b)
		ev.AfterJSON = &s
	}
	return ev, nil
}

// Record writes the audit event of one change in the transaction t, for
// t's actor at t's time.
func Record(t *txn.Tx, action, objectType, objectID string, before, after any) error {
	ev, err := NewRow(t.Ctx, t.Now, action, objectType, objectID, before, after)
	if err != nil {
		return err
	}
	return Insert(t.DB, &ev)
}

// Insert writes one audit row. An event without a role (a system actor)
// leaves actor_role out of the INSERT, and one without names names_json:
// the columns' NULL default is the same value, and the statement then
// also fits a schema older than the columns, which the tests that build a
// database up to an earlier migration write through today's code.
func Insert(db *gorm.DB, ev *models.AuditEvent) error {
	var omit []string
	if ev.ActorRole == nil {
		omit = append(omit, "ActorRole")
	}
	if ev.NamesJSON == nil {
		omit = append(omit, "NamesJSON")
	}
	if len(omit) > 0 {
		db = db.Omit(omit...)
	}
	return db.Create(ev).Error
}
