package allocator

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// autoOwner is one automatic allocation of a batch: the owner and the
// context whose actor and request id its audit event records.
type autoOwner struct {
	ctx   context.Context
	owner Owner
	// claim, when set, is called before a new value is written for this
	// request; false means its caller has left and it is skipped.
	claim func() bool
}

// classify sorts the requests of a batch: an owner that holds a value gets
// it (res filled in); of the others, those whose callers are still there
// need a value, one per owner, in arrival order (fresh, with the first
// request of each owner in firstOf).
func classify(reqs []autoOwner, held map[Owner]*models.Allocation, res []allocResult) (fresh []int, firstOf map[Owner]int) {
	firstOf = map[Owner]int{}
	for i, r := range reqs {
		if row, ok := held[r.owner]; ok {
			res[i] = allocResult{row: row}
			continue
		}
		if r.claim != nil && !r.claim() {
			res[i] = allocResult{err: errAbandoned(r.ctx)}
			continue
		}
		if _, ok := firstOf[r.owner]; ok {
			continue // filled in by fillDuplicates
		}
		firstOf[r.owner] = i
		fresh = append(fresh, i)
	}
	return fresh, firstOf
}

// fillDuplicates gives a later request of an owner what its first request
// got (the same value, created=false).
func fillDuplicates(reqs []autoOwner, res []allocResult, firstOf map[Owner]int) {
	for i, r := range reqs {
		if j, ok := firstOf[r.owner]; ok && j != i && res[i].row == nil && res[i].err == nil {
			res[i] = allocResult{row: res[j].row, err: res[j].err}
		}
	}
}

// allocResult is the outcome of one request of a batch: the row the owner
// holds and whether it was created now, or a per-request error (409
// pool_exhausted).
type allocResult struct {
	row     *models.Allocation
	created bool
	err     error
}

// allocateLowestFree gives each owner of reqs, in order, the lowest free
// value of p's auto_assign ranges, as if they had called Allocate one after
// the other: an owner that already holds a value (or appears twice) gets
// that value with created=false, and when the pool runs out the remaining
// owners get 409 pool_exhausted. It runs in a transaction holding p's lock,
// in a fixed number of statements whatever len(reqs) is (plus one per gap
// between held runs that the search crosses).
//
// noneHeld tells that the caller knows, under p's lock, that none of the
// owners holds a value of p (the owners' look-up is skipped).
func (t *tx) allocateLowestFree(p *models.Pool, reqs []autoOwner, noneHeld bool) ([]allocResult, error) {
	if err := t.purgeExpired(p); err != nil {
		return nil, err
	}
	held := map[Owner]*models.Allocation{}
	if !noneHeld {
		var err error
		if held, err = t.heldBy(p, reqs); err != nil {
			return nil, err
		}
	}
	res := make([]allocResult, len(reqs))
	fresh, firstOf := classify(reqs, held, res)
	picks, err := t.lowestFreeN(p, len(fresh))
	if err != nil {
		return nil, err
	}
	rows, prevs, events, err := newAllocations(p, reqs, fresh, picks, t.now)
	if err != nil {
		return nil, err
	}
	if len(rows) > 0 {
		if err := t.insertAllocations(p, rows, prevs, events); err != nil {
			return nil, err
		}
		for range rows {
			t.changed(p.Name, "allocate")
		}
	}
	fillResults(p, reqs, res, fresh, firstOf, rows)
	return res, nil
}

// newAllocations builds what a batch writes for its picks: the new rows
// (the k-th pick for the k-th fresh request), the held values before them
// that stop ending a run (not new themselves; a no-op where free), and one
// allocation.create audit event per row with its request's actor.
func newAllocations(p *models.Pool, reqs []autoOwner, fresh []int, picks []freePick, now time.Time) (
	rows []models.Allocation, prevs []string, events []models.AuditEvent, err error) {
	sp := spaceOf(p)
	rows = make([]models.Allocation, len(picks))
	events = make([]models.AuditEvent, len(picks))
	inserted := make(map[u128]bool, len(picks))
	for k, pk := range picks {
		r := reqs[fresh[k]]
		rows[k] = models.Allocation{PoolID: p.ID, ValueKey: pk.v.key(), Value: sp.format(pk.v), State: models.StateAllocated,
			OwnerType: strp(r.owner.Type), OwnerID: strp(r.owner.ID), RunEnd: pk.runEnd, AllocatedAt: now}
		inserted[pk.v] = true
		if events[k], err = allocationCreateEvent(r.ctx, now, p.Name, &rows[k]); err != nil {
			return nil, nil, nil, err
		}
	}
	prevs = []string{}
	for _, pk := range picks {
		if pv, ok := sp.prev(pk.v); ok && !inserted[pv] {
			prevs = append(prevs, pv.key())
		}
	}
	return rows, prevs, events, nil
}

// fillResults fills in res once rows are stored: created for the fresh
// requests that got a row, pool_exhausted for the fresh ones beyond, and
// the first request's answer for an owner's later requests.
func fillResults(p *models.Pool, reqs []autoOwner, res []allocResult, fresh []int, firstOf map[Owner]int, rows []models.Allocation) {
	for k := range rows {
		res[fresh[k]] = allocResult{row: &rows[k], created: true}
	}
	for _, i := range fresh[len(rows):] {
		res[i] = allocResult{err: fault.Errf(fault.CodePoolExhausted, "", "pool %q has no free value in its auto_assign ranges", p.Name)}
	}
	fillDuplicates(reqs, res, firstOf)
}

// insertAllocations stores new rows of p, clears the run-end flag of the
// held values in prevs and records events, which the transaction stores
// with its others (audit_names.go: named, in order). On PostgreSQL it is
// one statement (one round trip while the pool is locked); on SQLite,
// which is in-process, two.
func (t *tx) insertAllocations(p *models.Pool, rows []models.Allocation, prevs []string, events []models.AuditEvent) error {
	t.record(events...)
	if t.a.dialect != models.Postgres {
		if err := t.Create(&rows).Error; err != nil {
			return err
		}
		if len(prevs) > 0 {
			return t.Exec(`UPDATE allocations SET run_end = ? WHERE pool_id = ? AND run_end AND value_key IN ?`, false, p.ID, prevs).Error
		}
		return nil
	}
	var b strings.Builder
	args := make([]any, 0, 8*len(rows)+2)
	b.WriteString(`WITH ins AS (INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at) VALUES `)
	for i := range rows {
		r := &rows[i]
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, r.PoolID, r.ValueKey, r.Value, r.State, deref(r.OwnerType), deref(r.OwnerID), r.RunEnd, r.AllocatedAt)
	}
	b.WriteString(` RETURNING id, value_key)`)
	if len(prevs) > 0 {
		b.WriteString(`, upd AS (UPDATE allocations SET run_end = false WHERE pool_id = ? AND run_end AND value_key IN ?)`)
		args = append(args, p.ID, prevs)
	}
	b.WriteString(` SELECT id, value_key FROM ins`)
	res, err := t.Raw(b.String(), args...).Rows()
	if err != nil {
		return err
	}
	return scanAssignIDs(p, rows, res)
}

// heldBy returns the allocations of p held by the owners of reqs, in one
// query over the (pool_id, owner_type, owner_id) unique index.
func (t *tx) heldBy(p *models.Pool, reqs []autoOwner) (map[Owner]*models.Allocation, error) {
	return heldIn(t.DB, p, reqs)
}

// heldIn is heldBy on any handle.
func heldIn(db *gorm.DB, p *models.Pool, reqs []autoOwner) (map[Owner]*models.Allocation, error) {
	byType := map[string][]string{}
	var types []string
	for _, r := range reqs {
		if _, ok := byType[r.owner.Type]; !ok {
			types = append(types, r.owner.Type)
		}
		byType[r.owner.Type] = append(byType[r.owner.Type], r.owner.ID)
	}
	conds := make([]string, len(types))
	args := []any{p.ID}
	for i, typ := range types {
		conds[i] = "(owner_type = ? AND owner_id IN ?)"
		args = append(args, typ, byType[typ])
	}
	var rows []models.Allocation
	if err := db.Where("pool_id = ? AND ("+strings.Join(conds, " OR ")+")", args...).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[Owner]*models.Allocation, len(rows))
	for i := range rows {
		out[Owner{Type: deref(rows[i].OwnerType), ID: deref(rows[i].OwnerID)}] = &rows[i]
	}
	return out, nil
}

// scanAssignIDs reads the (id, value_key) rows an INSERT … RETURNING gave
// back and sets each inserted row's id (assignIDs).
func scanAssignIDs(p *models.Pool, rows []models.Allocation, res *sql.Rows) error {
	defer res.Close()
	ids := make(map[string]int64, len(rows))
	for res.Next() {
		var id int64
		var key string
		if err := res.Scan(&id, &key); err != nil {
			return err
		}
		ids[key] = id
	}
	if err := res.Err(); err != nil {
		return err
	}
	return assignIDs(p, rows, ids)
}
