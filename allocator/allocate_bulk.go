package allocator

import (
	"context"
	"fmt"
	"strings"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// Bulk allocation (POST /api/v1/pools/{name}/allocations:batch, docs/api.md).
//
// A list of owners gets its values in one transaction under the pool's
// lock, all or nothing: the answer is what the requests would have got one
// after the other in list order (automatic ones the lowest free values of
// the auto_assign ranges, requested ones the requested-value rules, an
// owner that holds a value gets it back), or the first refusal and no
// change. The work is set-based: a fixed number of statements whatever
// the size of the list (the owners' holdings, the requested values' rows
// and declarations, the gap search, one multi-row INSERT of allocations
// and audit events), so that 10,000 owners cost about what 64 cost.

// MaxBulkAllocations is the most allocations one bulk request may carry.
const MaxBulkAllocations = 10000

// BulkItem is one allocation of a bulk request: an owner and, optionally,
// the value it asks for.
type BulkItem struct {
	Owner Owner
	Value string
}

// bulkField is the JSON path of item i's member.
func bulkField(i int, member string) string { return fmt.Sprintf("allocations[%d].%s", i, member) }

// AllocateBulk allocates a value of pool for each item, in one
// transaction, all or nothing, and returns the allocations in item order
// with whether each was created now. Refusals name the item's field
// (allocations[i].owner_id, allocations[i].value): malformed owners and
// values, an owner listed twice or a value requested twice (the later
// occurrence is named) are 422 invalid; a refusal that one-by-one
// allocation would give (409 conflict, not_available, pool_exhausted) is
// the one of the first item, in list order, that meets it.
func (a *Allocator) AllocateBulk(ctx context.Context, pool string, items []BulkItem) ([]Allocation, []bool, error) {
	if len(items) == 0 {
		return nil, nil, fault.Errf(fault.CodeInvalid, "allocations", "allocations must list at least one allocation")
	}
	if len(items) > MaxBulkAllocations {
		return nil, nil, fault.Errf(fault.CodeInvalid, "allocations", "allocations lists %d allocations; at most %d fit in one request", len(items), MaxBulkAllocations)
	}
	seen := make(map[Owner]int, len(items))
	for i, it := range items {
		if err := it.Owner.Validate(); err != nil {
			e, _ := fault.AsError(err)
			return nil, nil, fault.Errf(e.Code, bulkField(i, e.Field), "%s", e.Message)
		}
		if j, dup := seen[it.Owner]; dup {
			return nil, nil, fault.Errf(fault.CodeInvalid, bulkField(i, "owner_id"), "owner %s is already listed at allocations[%d]; an owner holds one value per pool", it.Owner, j)
		}
		seen[it.Owner] = i
	}
	var (
		out     []Allocation
		created []bool
	)
	err := a.write(ctx, func(t *tx) error {
		p, err := t.lockPool(pool)
		if err != nil {
			return err
		}
		rows, news, err := t.allocateBulk(p, items)
		if err != nil {
			return err
		}
		out, created = make([]Allocation, len(rows)), news
		for i, r := range rows {
			out[i] = allocationOut(p.Name, r)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, created, nil
}

// allocateBulk is AllocateBulk inside a transaction holding p's lock.
func (t *tx) allocateBulk(p *models.Pool, items []BulkItem) ([]*models.Allocation, []bool, error) {
	sp := spaceOf(p)
	// 422 first: every requested value well-formed and asked once.
	wants := make([]*u128, len(items))
	byValue := map[u128]int{}
	for i, it := range items {
		if strings.TrimSpace(it.Value) == "" {
			continue
		}
		v, err := sp.parse(it.Value)
		if err != nil {
			return nil, nil, fault.Errf(fault.CodeInvalid, bulkField(i, "value"), "%v", err)
		}
		if j, dup := byValue[v]; dup {
			return nil, nil, fault.Errf(fault.CodeInvalid, bulkField(i, "value"), "%s is already requested by allocations[%d]", sp.format(v), j)
		}
		byValue[v] = i
		wants[i] = &v
	}
	if t.a.dialect == models.Postgres {
		// Index plans whatever the statistics say, for this transaction
		// only (as the allocation batches do, groupcommit_pg.go).
		if err := t.Exec(pgBulkSettings).Error; err != nil {
			return nil, nil, err
		}
	}
	if err := t.purgeExpired(p); err != nil {
		return nil, nil, err
	}
	owners := make([]autoOwner, len(items))
	for i, it := range items {
		owners[i] = autoOwner{owner: it.Owner}
	}
	held, err := t.heldChunked(p, owners)
	if err != nil {
		return nil, nil, err
	}
	out := make([]*models.Allocation, len(items))
	created := make([]bool, len(items))
	fail := newFirstFailure()
	var requested, auto []int
	for i, it := range items {
		if h, ok := held[it.Owner]; ok {
			if wants[i] != nil && wants[i].key() != h.ValueKey {
				fail.add(i, fault.Errf(fault.CodeConflict, bulkField(i, "value"), "owner %s already holds %s in pool %q, not %s",
					it.Owner, h.Value, p.Name, sp.format(*wants[i])))
			}
			out[i] = h
			continue
		}
		if wants[i] != nil {
			requested = append(requested, i)
		} else {
			auto = append(auto, i)
		}
	}
	reclaims, err := t.checkRequestedBulk(p, items, wants, requested, fail)
	if err != nil {
		return nil, nil, err
	}
	picks, err := t.lowestFreeN(p, len(auto))
	if err != nil {
		return nil, nil, err
	}
	if len(picks) < len(auto) {
		i := auto[len(picks)]
		fail.add(i, fault.Errf(fault.CodePoolExhausted, bulkField(i, "value"), "pool %q has no free value in its auto_assign ranges for allocations[%d] (%d automatic allocations asked, %d free)",
			p.Name, i, len(auto), len(picks)))
	}
	if err := fail.err(); err != nil {
		return nil, nil, err
	}
	// Write: new rows for the automatic picks and the free requested
	// values, then the quarantines that return to their former owner.
	vals := make([]u128, 0, len(auto)+len(requested))
	idx := make([]int, 0, cap(vals))
	for k, i := range auto {
		vals, idx = append(vals, picks[k].v), append(idx, i)
	}
	for _, i := range requested {
		if reclaims[i] == nil {
			vals, idx = append(vals, *wants[i]), append(idx, i)
		}
	}
	rows, err := t.insertBulkRows(p, items, vals, idx)
	if err != nil {
		return nil, nil, err
	}
	for k, i := range idx {
		out[i], created[i] = &rows[k], true
	}
	for _, i := range requested {
		if q := reclaims[i]; q != nil {
			row, err := t.reclaimRow(p, q, items[i].Owner)
			if err != nil {
				return nil, nil, err
			}
			out[i], created[i] = row, true
		}
	}
	return out, created, nil
}

// firstFailure keeps the refusal of the lowest item index.
type firstFailure struct {
	at  int
	e   *fault.Error
	set bool
}

func newFirstFailure() *firstFailure { return &firstFailure{} }

func (f *firstFailure) add(i int, e *fault.Error) {
	if !f.set || i < f.at {
		f.at, f.e, f.set = i, e, true
	}
}

func (f *firstFailure) err() error {
	if !f.set {
		return nil
	}
	return f.e
}

// checkRequestedBulk applies the requested-value rules (checkRequestable)
// to the items at requested, reading the pool's ranges, the values' rows
// and, on the loopback pools, their declarations once for all of them. It
// returns the quarantine rows that go back to their former owner (by item
// index) and records refusals in fail.
func (t *tx) checkRequestedBulk(p *models.Pool, items []BulkItem, wants []*u128, requested []int, fail *firstFailure) (map[int]*models.Allocation, error) {
	if len(requested) == 0 {
		return nil, nil
	}
	sp := spaceOf(p)
	var ranges []models.PoolRange
	if err := t.Where("pool_id = ?", p.ID).Order("first_key").Find(&ranges).Error; err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(requested))
	for _, i := range requested {
		keys = append(keys, wants[i].key())
	}
	rows := map[string]*models.Allocation{}
	for start := 0; start < len(keys); start += sqlChunk {
		var found []models.Allocation
		if err := t.Where("pool_id = ? AND value_key IN ?", p.ID, keys[start:min(start+sqlChunk, len(keys))]).Find(&found).Error; err != nil {
			return nil, err
		}
		for k := range found {
			rows[found[k].ValueKey] = &found[k]
		}
	}
	declared := map[string]string{}
	if col := reservationColumn(p.Name); col != "" {
		for start := 0; start < len(keys); start += sqlChunk {
			var found []struct {
				SerialNumber string
				Vkey         string
			}
			if err := t.Raw(`SELECT serial_number, `+col+` AS vkey FROM expected_dpus WHERE `+col+` IN ?`, keys[start:min(start+sqlChunk, len(keys))]).
				Scan(&found).Error; err != nil {
				return nil, err
			}
			for _, d := range found {
				declared[d.Vkey] = d.SerialNumber
			}
		}
	}
	reclaims := map[int]*models.Allocation{}
	for _, i := range requested {
		v, owner, field := *wants[i], items[i].Owner, bulkField(i, "value")
		val, k := sp.format(v), v.key()
		r := rangeHolding(ranges, k)
		switch {
		case r == nil:
			fail.add(i, fault.Errf(fault.CodeNotAvailable, field, "%s is not in pool %q", val, p.Name))
		case r.AutoAssign:
			fail.add(i, fault.Errf(fault.CodeNotAvailable, field, "%s is in an auto-assign range (%s..%s) of pool %q; only values of auto_assign=false ranges can be requested",
				val, r.FirstValue, r.LastValue, p.Name))
		case rows[k] != nil && rows[k].State == models.StateQuarantined:
			row := rows[k]
			if deref(row.FormerOwnerType) == owner.Type && deref(row.FormerOwnerID) == owner.ID {
				reclaims[i] = row
			} else {
				fail.add(i, fault.Errf(fault.CodeNotAvailable, field, "%s is quarantined (former owner %s)", val, ownerText(t.DB, row.FormerOwnerType, row.FormerOwnerID)))
			}
		case rows[k] != nil:
			fail.add(i, fault.Errf(fault.CodeNotAvailable, field, "%s is allocated to %s", val, ownerText(t.DB, rows[k].OwnerType, rows[k].OwnerID)))
		default:
			if serial, ok := declared[k]; ok && !(owner.Type == OwnerTypeMachine && owner.ID == DPUMachineID(serial)) {
				fail.add(i, fault.Errf(fault.CodeNotAvailable, field, "%s is declared for DPU %s", val, serial))
			}
		}
	}
	return reclaims, nil
}

// rangeHolding is the range of ranges (sorted by first_key) holding key.
func rangeHolding(ranges []models.PoolRange, key string) *models.PoolRange {
	for i := range ranges {
		if ranges[i].FirstKey <= key && key <= ranges[i].LastKey {
			return &ranges[i]
		}
	}
	return nil
}

// pgBulkSettings are pgGroupSettings without the plan cache mode (a bulk
// request's statements are not prepared).
const pgBulkSettings = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true),
 set_config('enable_mergejoin', 'off', true)`

// sqlChunk bounds the keys of one IN list (SQLite's limit on the
// parameters of a statement is far above it; PostgreSQL's is 65,535).
const sqlChunk = 5000

// heldChunked is heldBy for lists of any length. On PostgreSQL it is one
// statement that looks each owner up on its own over the owner index
// (pgHeld, the owners bound as two arrays): a plain IN list of thousands
// of owners was planned as a scan of the pool's allocations once the
// table had statistics, 1.9 s for 10,000 owners over 30,000 rows.
func (t *tx) heldChunked(p *models.Pool, reqs []autoOwner) (map[Owner]*models.Allocation, error) {
	out := map[Owner]*models.Allocation{}
	if t.a.dialect == models.Postgres {
		types, ids := make([]string, len(reqs)), make([]string, len(reqs))
		for i, r := range reqs {
			types[i], ids[i] = r.owner.Type, r.owner.ID
		}
		rows, err := t.Statement.ConnPool.QueryContext(t.ctx, pgHeld, p.Name, types, ids)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			h := &models.Allocation{PoolID: p.ID, State: models.StateAllocated}
			var ot, oi string
			if err := rows.Scan(&h.ID, &h.ValueKey, &h.Value, &ot, &oi, &h.AllocatedAt); err != nil {
				return nil, err
			}
			h.OwnerType, h.OwnerID = &ot, &oi
			out[Owner{Type: ot, ID: oi}] = h
		}
		return out, rows.Err()
	}
	for start := 0; start < len(reqs); start += sqlChunk {
		m, err := t.heldBy(p, reqs[start:min(start+sqlChunk, len(reqs))])
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			out[k] = v
		}
	}
	return out, nil
}

// insertBulkRows stores vals[k] as a new allocation of items[idx[k]]'s
// owner, with exact run-end flags (a new value ends a run unless the next
// value is new too or already a row) and the held values just before the
// new ones no longer ending a run, and one allocation.create audit event
// per row: one multi-row statement on PostgreSQL, a few chunked ones on
// SQLite.
func (t *tx) insertBulkRows(p *models.Pool, items []BulkItem, vals []u128, idx []int) ([]models.Allocation, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	sp := spaceOf(p)
	isNew := make(map[u128]bool, len(vals))
	for _, v := range vals {
		isNew[v] = true
	}
	var nexts []string
	for _, v := range vals {
		if n, ok := sp.next(v); ok && !isNew[n] {
			nexts = append(nexts, n.key())
		}
	}
	heldNext := map[string]bool{}
	for start := 0; start < len(nexts); start += sqlChunk {
		var found []string
		if err := t.Raw(`SELECT value_key FROM allocations WHERE pool_id = ? AND value_key IN ?`, p.ID, nexts[start:min(start+sqlChunk, len(nexts))]).
			Scan(&found).Error; err != nil {
			return nil, err
		}
		for _, k := range found {
			heldNext[k] = true
		}
	}
	rows := make([]models.Allocation, len(vals))
	events := make([]models.AuditEvent, len(vals))
	prevs := []string{}
	for k, v := range vals {
		owner := items[idx[k]].Owner
		runEnd := true
		if n, ok := sp.next(v); ok {
			runEnd = !isNew[n] && !heldNext[n.key()]
		}
		rows[k] = models.Allocation{PoolID: p.ID, ValueKey: v.key(), Value: sp.format(v), State: models.StateAllocated,
			OwnerType: strp(owner.Type), OwnerID: strp(owner.ID), RunEnd: runEnd, AllocatedAt: t.now}
		ev, err := allocationCreateEvent(t.ctx, t.now, p.Name, &rows[k])
		if err != nil {
			return nil, err
		}
		events[k] = ev
		if pv, ok := sp.prev(v); ok && !isNew[pv] {
			prevs = append(prevs, pv.key())
		}
	}
	if err := t.insertRowsBulk(p, rows, prevs, events); err != nil {
		return nil, err
	}
	for range rows {
		t.changed(p.Name, "allocate")
	}
	return rows, nil
}

// insertRowsBulk is insertAllocations for any number of rows: on
// PostgreSQL one statement whose rows travel as arrays (no limit on their
// number, one plan for every size); on SQLite chunked multi-row INSERTs.
// Its events are stored by the same statement, after the ones recorded
// before and named by one look-up (audit_names.go).
func (t *tx) insertRowsBulk(p *models.Pool, rows []models.Allocation, prevs []string, events []models.AuditEvent) error {
	if err := t.flushEvents(); err != nil {
		return err
	}
	if err := nameEvents(t.DB, events, nil); err != nil {
		return err
	}
	if t.a.dialect != models.Postgres {
		if err := t.CreateInBatches(&rows, 500).Error; err != nil {
			return err
		}
		for start := 0; start < len(prevs); start += sqlChunk {
			if err := t.Exec(`UPDATE allocations SET run_end = ? WHERE pool_id = ? AND run_end AND value_key IN ?`, false, p.ID,
				prevs[start:min(start+sqlChunk, len(prevs))]).Error; err != nil {
				return err
			}
		}
		return t.CreateInBatches(&events, 500).Error
	}
	// The transaction's own connection, bypassing gorm's placeholder
	// expansion: pgx binds each Go slice as one array parameter.
	res, err := t.Statement.ConnPool.QueryContext(t.ctx, pgInsert, pgInsertArgs(p, t.now, rows, prevs, events)...)
	if err != nil {
		return err
	}
	return scanAssignIDs(p, rows, res)
}
