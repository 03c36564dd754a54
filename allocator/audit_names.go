package allocator

import (
	"context"
	"database/sql"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/models"
)

// The audit events of a write and the names they keep (docs/console.md
// "Audit log names", docs/decisions.md "Audit events keep the names they
// had").
//
// A write records its events in the transaction (tx.audit, tx.record) and
// stores them together before it commits (flushEvents): each event is
// given the names of the machines it mentions — its object when that is a
// machine, the machines its documents name as owners or hosts
// (audit.MachineRefs) — by one look-up for all of them, by the rule every
// page names machines by (names.go), and then all are inserted in their
// order by one statement (a few on SQLite, whose statements carry at most
// 128 parameters). An ExpectedMachine's event is named from the record it
// carries when it is recorded, with no look-up.
//
// The names are read at the end of the write, so they are the ones the
// write leaves: a machine it updates by the name the update gave it, a
// machine it deletes by the name it had before the delete, which
// deleted_machines keeps (keepNames). A report batch stores the events of
// each report it runs one by one before it starts the next
// (report_batch.go), so that they are named as that report left things,
// exactly as one transaction per report names them.
//
// A statement that writes audit events itself (a bulk allocation, the
// plain reports' pipeline) stores the recorded ones first, so that the
// events of a transaction keep the order of its changes, and names its
// own by one look-up too. The PostgreSQL pipelines of the group commit
// name their machine owners just before their transaction (ownerNames).

// audit records one change in the same transaction. before/after are
// marshalled to JSON; callers pass values with secrets already removed.
func (t *tx) audit(action, objectType, objectID string, before, after any) error {
	ev, err := audit.NewRow(t.ctx, t.now, action, objectType, objectID, before, after)
	if err != nil {
		return err
	}
	if objectType == "expected_machine" {
		if ev.NamesJSON, err = emEventNames(objectID, before, after); err != nil {
			return err
		}
	}
	t.record(ev)
	return nil
}

// record adds events to the transaction's, to be named and stored by
// flushEvents.
func (t *tx) record(evs ...models.AuditEvent) {
	t.events = append(t.events, evs...)
}

// flushEvents names and stores the events recorded so far, in their
// order: one look-up of names, one INSERT (SQLite: one per 128
// parameters).
func (t *tx) flushEvents() error {
	if len(t.events) == 0 {
		return nil
	}
	evs := t.events
	t.events = nil
	if err := nameEvents(t.DB, evs, nil); err != nil {
		return err
	}
	return t.insertEvents(evs)
}

// dropEvents forgets the events recorded since the last flushEvents (a
// savepoint rolled back their changes).
func (t *tx) dropEvents() { t.events = nil }

// nameEvents sets the names of each event that has none yet: the name of
// each machine it mentions, read with db by one look-up for all of them
// (machineNamesKnown, with known taken as stored). An event whose
// machines are all unknown (an owner_type machine naming no machine) keeps
// none.
func nameEvents(db *gorm.DB, events []models.AuditEvent, known []models.Machine) error {
	refs := make([][]string, len(events))
	var ids []string
	for i := range events {
		e := &events[i]
		if e.NamesJSON != nil {
			continue
		}
		var r []string
		if e.ObjectType == "machine" {
			r = append(r, e.ObjectID)
		}
		r = append(r, audit.MachineRefs(docBytes(e.BeforeJSON), docBytes(e.AfterJSON))...)
		refs[i] = r
		ids = append(ids, r...)
	}
	if len(ids) == 0 {
		return nil
	}
	names, _, err := machineNamesKnown(db, ids, known)
	if err != nil {
		return err
	}
	for i, r := range refs {
		if len(r) == 0 {
			continue
		}
		m := make(map[string]string, len(r))
		for _, id := range r {
			if n := names[id]; n != "" {
				m[id] = n
			}
		}
		if events[i].NamesJSON, err = audit.EncodeNames(m); err != nil {
			return err
		}
	}
	return nil
}

func docBytes(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}

// emEventNames are the names of an ExpectedMachine's event: the record's
// name (ExpectedMachineName) as its document after the change carries
// it, or before it for a delete; none for an event of every record ("*").
func emEventNames(id string, before, after any) (*string, error) {
	doc := after
	if doc == nil {
		doc = before
	}
	var em *ExpectedMachine
	switch d := doc.(type) {
	case emAudit:
		em = &d.ExpectedMachine
	case *emAudit:
		em = &d.ExpectedMachine
	case ExpectedMachine:
		em = &d
	case *ExpectedMachine:
		em = d
	}
	if em == nil || id == "*" {
		return nil, nil
	}
	return audit.EncodeNames(map[string]string{id: ExpectedMachineName(em.Metadata.Name, em.BmcMacAddress)})
}

// insertEvents stores audit events in their order. actor_role and
// names_json are left out when no event has one (their NULL default),
// so that the statement also fits a schema older than those columns,
// which tests that build a database up to an earlier migration write
// through today's code.
func (t *tx) insertEvents(events []models.AuditEvent) error {
	role, names := false, false
	for i := range events {
		role = role || events[i].ActorRole != nil
		names = names || events[i].NamesJSON != nil
	}
	cols := []string{"at", "actor", "action", "object_type", "object_id", "request_id", "before_json", "after_json"}
	if role {
		cols = append(cols, "actor_role")
	}
	if names {
		cols = append(cols, "names_json")
	}
	return t.insertRows("audit_events", cols, len(events), func(i int, dst []any) []any {
		e := &events[i]
		dst = append(dst, e.At, e.Actor, e.Action, e.ObjectType, e.ObjectID, e.RequestID, e.BeforeJSON, e.AfterJSON)
		if role {
			dst = append(dst, e.ActorRole)
		}
		if names {
			dst = append(dst, e.NamesJSON)
		}
		return dst
	})
}

// ownerNames are the names of the machines among the owners of reqs (nil
// when no owner is a machine) for the PostgreSQL pipelines of a group
// commit (groupcommit_pg.go), which send them with their events. They are
// read on the leader's connection just before the batch's transaction:
// inside it they would lengthen the pool's lock, which those paths exist
// to shorten, and an owner's name rarely changes in between.
func (a *Allocator) ownerNames(ctx context.Context, conn *sql.Conn, reqs []autoOwner) (map[string]string, error) {
	var ids []string
	for _, r := range reqs {
		if r.owner.Type == OwnerTypeMachine {
			ids = append(ids, r.owner.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// A session of its own (a Context clones the statement), on conn.
	db := a.db.Session(&gorm.Session{NewDB: true, Context: ctx})
	db.Statement.ConnPool = conn
	names, _, err := MachineNamesOf(db, ids)
	return names, err
}

// nameOwnerEvents gives the allocation.create event of each of rows the name
// of its owner from names (ownerNames), as nameEvents would: the event
// names its owner alone.
func nameOwnerEvents(events []models.AuditEvent, rows []models.Allocation, names map[string]string) error {
	for k := range rows {
		id := deref(rows[k].OwnerID)
		if deref(rows[k].OwnerType) != OwnerTypeMachine || names[id] == "" {
			continue
		}
		var err error
		if events[k].NamesJSON, err = audit.EncodeNames(map[string]string{id: names[id]}); err != nil {
			return err
		}
	}
	return nil
}
