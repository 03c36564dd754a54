package audit

import (
	"context"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// The audit log's read (GET /api/v1/events, the console's audit log,
// dashboard and machine History), beside the writing of its events
// (audit.go).

// Log is the audit log of one database, for the callers that are handed
// it at assembly (the REST and console handlers).
type Log struct{ db *gorm.DB }

// NewLog is the audit log stored in db.
func NewLog(db *gorm.DB) *Log { return &Log{db: db} }

// List is ListEvents over the log's database.
func (l *Log) List(ctx context.Context, f EventFilter) (*EventPage, error) {
	return ListEvents(ctx, l.db, f)
}

// EventFilter selects audit events; empty fields match everything.
type EventFilter struct {
	Actor      string
	Action     string // exact, or a prefix ending in "." such as "allocation."
	ObjectType string
	ObjectID   string
	// Scope limits the log to the events of a set of objects (the machine
	// page's History: the machine, its DPUs, its ExpectedMachine and its
	// values; package console resolves it).
	Scope  *EventScope
	Since  time.Time
	Until  time.Time
	Limit  int
	Cursor string
}

// EventPage is one page of events, newest first.
type EventPage struct {
	Items      []Event `json:"items"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// ListEvents returns audit events newest first, keyset-paginated by id,
// read with db.
func ListEvents(ctx context.Context, db *gorm.DB, f EventFilter) (*EventPage, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.Limit > 1000 {
		f.Limit = 1000
	}
	var cursor int64
	if f.Cursor != "" {
		n, err := strconv.ParseInt(f.Cursor, 10, 64)
		if err != nil || n <= 0 {
			return nil, fault.Errf(fault.CodeInvalid, "cursor", "cursor %q is not one this API returned", f.Cursor)
		}
		cursor = n
	}
	scope := f.Scope
	var rows []models.AuditEvent
	err := txn.Read(ctx, db, func(db *gorm.DB) error {
		q := db.Model(&models.AuditEvent{})
		if scope != nil {
			q = q.Where(scope.Where(db))
		}
		if f.Actor != "" {
			q = q.Where("actor = ?", f.Actor)
		}
		if f.Action != "" {
			if f.Action[len(f.Action)-1] == '.' {
				q = q.Where("action LIKE ?", f.Action+"%")
			} else {
				q = q.Where("action = ?", f.Action)
			}
		}
		if f.ObjectType != "" {
			q = q.Where("object_type = ?", f.ObjectType)
		}
		if f.ObjectID != "" {
			q = q.Where("object_id = ?", f.ObjectID)
		}
		if !f.Since.IsZero() {
			q = q.Where("at >= ?", f.Since.UTC())
		}
		if !f.Until.IsZero() {
			q = q.Where("at < ?", f.Until.UTC())
		}
		if cursor > 0 {
			q = q.Where("id < ?", cursor)
		}
		return q.Order("id DESC").Limit(f.Limit + 1).Find(&rows).Error
	})
	if err != nil {
		return nil, err
	}
	page := &EventPage{Items: []Event{}}
	for i, r := range rows {
		if i == f.Limit {
			page.NextCursor = strconv.FormatInt(rows[i-1].ID, 10)
			break
		}
		page.Items = append(page.Items, EventOut(&r))
	}
	return page, nil
}

// EventScope is a set of objects whose audit events are read together:
// machines (by machine_id), an ExpectedMachine (by id) and values (as
// "pool/value").
type EventScope struct {
	Machines []string
	Expected string
	Values   []string
}

// Where is the scope as one grouped condition on audit_events (each
// branch an index probe of (object_type, object_id)); db is the session
// the condition is built for.
func (s EventScope) Where(db *gorm.DB) *gorm.DB {
	g := db.Session(&gorm.Session{NewDB: true}).Where("(object_type = 'machine' AND object_id IN ?)", s.Machines)
	if s.Expected != "" {
		g = g.Or("(object_type = 'expected_machine' AND object_id = ?)", s.Expected)
	}
	if len(s.Values) > 0 {
		g = g.Or("(object_type = 'allocation' AND object_id IN ?)", s.Values)
	}
	return g
}
