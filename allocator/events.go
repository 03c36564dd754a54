package allocator

import (
	"context"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/kernel"
	"github.com/ipledger/ipledger/models"
)

// EventFilter selects audit events; empty fields match everything.
type EventFilter struct {
	Actor      string
	Action     string // exact, or a prefix ending in "." such as "allocation."
	ObjectType string
	ObjectID   string
	// Machine limits the log to the events the machine page's History
	// shows: the machine, its DPUs, its ExpectedMachine and its values.
	Machine string
	Since   time.Time
	Until   time.Time
	Limit   int
	Cursor  string
}

// EventPage is one page of events, newest first.
type EventPage struct {
	Items      []Event `json:"items"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// ListEvents returns audit events newest first, keyset-paginated by id.
func (a *Allocator) ListEvents(ctx context.Context, f EventFilter) (*EventPage, error) {
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
			return nil, Errf(CodeInvalid, "cursor", "cursor %q is not one this API returned", f.Cursor)
		}
		cursor = n
	}
	var scope *machineScope
	if f.Machine != "" {
		s, err := a.machineEventScope(ctx, f.Machine)
		if err != nil {
			return nil, err
		}
		scope = &s
	}
	var rows []models.AuditEvent
	err := a.read(ctx, func(db *gorm.DB) error {
		q := db.Model(&models.AuditEvent{})
		if scope != nil {
			q = q.Where(scope.where(db))
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
		page.Items = append(page.Items, kernel.EventOut(&r))
	}
	return page, nil
}
