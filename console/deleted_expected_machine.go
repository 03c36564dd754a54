package console

import (
	"context"
	"encoding/json"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/fault"
)

// DeletedExpectedMachine is what the audit log knows of an ExpectedMachine
// that no longer exists: its last known state (the document its delete
// event recorded), when and by whom it was deleted, and its events.
type DeletedExpectedMachine struct {
	ID        string
	Name      string
	Last      allocator.ExpectedMachine
	DeletedAt time.Time
	DeletedBy string
	History   []audit.Event
}

// GetDeletedExpectedMachine reads the history of the ExpectedMachine id
// from the audit log (newest first, at most 100 events), so that a link to
// a deleted ExpectedMachine opens what is known of it, as a deleted
// machine's does. It is not_found when the log has no delete of that id
// (an id never stored, or one removed by a delete-all, which records no
// event per record).
func (c *Console) GetDeletedExpectedMachine(ctx context.Context, id string) (*DeletedExpectedMachine, error) {
	var out *DeletedExpectedMachine
	err := c.read(ctx, func(db *gorm.DB) error {
		page, err := audit.ListEvents(ctx, db, audit.EventFilter{ObjectType: "expected_machine", ObjectID: id, Limit: 100})
		if err != nil {
			return err
		}
		for _, e := range page.Items {
			if e.Action != "expected_machine.delete" {
				continue
			}
			d := &DeletedExpectedMachine{ID: id, DeletedAt: e.At.UTC(), DeletedBy: e.Actor, History: page.Items}
			if len(e.Before) > 0 {
				if err := json.Unmarshal(e.Before, &d.Last); err != nil {
					return err
				}
			}
			d.Name = allocator.ExpectedMachineName(d.Last.Metadata.Name, d.Last.BmcMacAddress)
			if d.Name == "" {
				d.Name = id
			}
			out = d
			return nil
		}
		return fault.Errf(fault.CodeNotFound, "", "ExpectedMachine %q does not exist and the audit log records no delete of it", id)
	})
	return out, err
}
