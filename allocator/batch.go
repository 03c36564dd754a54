package allocator

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
)

// Group commit of automatic allocations (issue 7, docs/decisions.md
// "Group commit of automatic allocations").
//
// The allocations of one pool are serialized by the pool's row lock: two
// writers must not pick the same "lowest free" value. Run one by one, each
// allocation holds that lock for a dozen database round trips and one
// commit, so one pool gives at most 1 / (lock hold time) allocations per
// second however many clients there are. Instead, the automatic Allocate
// calls of one pool that arrive in the same process while an earlier batch
// runs queue up, and one goroutine per pool runs the queue as the next
// batch: one transaction, one lock acquisition, one set-based gap search,
// one multi-row INSERT, one audit INSERT and one commit for all of them.
// The result is the one the requests would have got one after the other in
// arrival order (the same lowest-free values, the same idempotence by
// owner, an audit event per allocation with its own actor and request id).
// When a batch of several fails on a database error, its requests are run
// again one transaction each, so an error reaches only the caller it
// belongs to. Batches of different pools run side by side (per-pool
// locking), and several server processes still serialize on the row lock.

// maxAllocBatch caps the allocations of one transaction, so that a long
// queue does not make one transaction (and its lock hold) arbitrarily long.
const maxAllocBatch = 64

// testHookBatchFail, when set by a test, can fail a batch's transaction
// (given its number of requests) to exercise the one-by-one fallback.
var testHookBatchFail func(size int) error

// allocReq is one queued automatic Allocate call.
type allocReq struct {
	ctx   context.Context
	owner Owner

	// state is reqWaiting until the batch claims the request just before
	// writing its allocation (reqClaimed) or the caller leaves first
	// (reqAbandoned): exactly one of the two happens.
	state atomic.Int32

	done    chan struct{} // closed when out/created/err are set
	out     Allocation
	created bool
	err     error
}

const (
	reqWaiting int32 = iota
	reqClaimed
	reqAbandoned
)

// claim marks r as being written; false if its caller has left or its
// context is done (then it is abandoned here). Repeated claims (a retried
// transaction) succeed.
func (r *allocReq) claim() bool {
	if r.ctx.Err() != nil {
		r.state.CompareAndSwap(reqWaiting, reqAbandoned)
	}
	return r.state.CompareAndSwap(reqWaiting, reqClaimed) || r.state.Load() == reqClaimed
}

func (r *allocReq) finish(out Allocation, created bool, err error) {
	r.out, r.created, r.err = out, created, err
	close(r.done)
}

// allocQueue is the queue of one pool while its leader runs. One leader
// per pool and process: a second one, taking the requests queued while the
// first holds the lock and waiting for the lock inside PostgreSQL, made
// batches smaller and gave 20 % less throughput at 8 and 32 clients
// (docs/decisions.md).
type allocQueue struct {
	pending []*allocReq
	running bool
}

// allocateAuto queues an automatic allocation of pool for owner and waits
// for its batch. A caller gets 503 unavailable only when its allocation was
// not made: when ctx ends before the batch claims the request (just before
// writing it), the caller leaves at once and the batch leaves the request
// out; once claimed, the caller waits for the commit's answer, and when
// that answer is lost (a deadline or the database going away during
// COMMIT) the batch reads what was stored before answering (resolveBatch).
func (a *Allocator) allocateAuto(ctx context.Context, pool string, owner Owner) (Allocation, bool, error) {
	if ctx.Err() != nil {
		return Allocation{}, false, errAbandoned(ctx)
	}
	r := &allocReq{ctx: ctx, owner: owner, done: make(chan struct{})}
	a.qmu.Lock()
	q, ok := a.queues[pool]
	if !ok {
		q = &allocQueue{}
		a.queues[pool] = q
	}
	q.pending = append(q.pending, r)
	start := !q.running
	q.running = true
	a.qmu.Unlock()
	if start {
		go a.drainAllocations(pool, q)
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqWaiting, reqAbandoned) {
			return Allocation{}, false, errAbandoned(ctx)
		}
		<-r.done // claimed: being committed, the answer follows
	}
	return r.out, r.created, r.err
}

// errAbandoned is the 503 of a request that left before it was allocated.
func errAbandoned(ctx context.Context) error {
	return Errf(CodeUnavailable, "", "request cancelled or timed out (%v) before its allocation was made; nothing was allocated, retry", context.Cause(ctx))
}

// drainAllocations runs pool's queue batch after batch until it is empty.
func (a *Allocator) drainAllocations(pool string, q *allocQueue) {
	lc := &leaderConn{}
	defer lc.drop()
	a.qmu.Lock()
	lc.spec = a.specs[pool]
	a.qmu.Unlock()
	for {
		a.qmu.Lock()
		n := len(q.pending)
		if n == 0 {
			q.running = false
			delete(a.queues, pool)
			// The next leader of this pool starts from this one's guess
			// (batch_spec.go): a pool allocated from now and then, or one
			// of many pools, still commits in one round trip.
			a.specs[pool] = lc.spec
			a.qmu.Unlock()
			return
		}
		n = min(n, maxAllocBatch)
		batch := q.pending[:n:n]
		q.pending = append([]*allocReq(nil), q.pending[n:]...)
		a.qmu.Unlock()
		a.runAllocBatchOn(lc, pool, batch)
	}
}

// runAllocBatch allocates for every request of batch in one transaction,
// falling back to one transaction per request when that fails.
func (a *Allocator) runAllocBatch(pool string, batch []*allocReq) {
	lc := &leaderConn{}
	defer lc.drop()
	a.runAllocBatchOn(lc, pool, batch)
}

// runAllocBatchOn is runAllocBatch on the leader's connection (PostgreSQL).
func (a *Allocator) runAllocBatchOn(lc *leaderConn, pool string, batch []*allocReq) {
	live := make([]*allocReq, 0, len(batch))
	for _, r := range batch {
		if r.ctx.Err() != nil || r.state.Load() == reqAbandoned {
			r.finish(Allocation{}, false, errAbandoned(r.ctx))
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	defer func() {
		if v := recover(); v != nil {
			a.log.Error("panic in allocation batch", "pool", pool, "panic", v)
			for _, r := range live {
				select {
				case <-r.done:
				default:
					r.finish(Allocation{}, false, fmt.Errorf("internal error allocating from pool %q", pool))
				}
			}
		}
	}()
	ctx, cancel := batchContext(live)
	defer cancel()
	// When every caller has left, stop (e.g. waiting for the lock).
	var remaining atomic.Int32
	remaining.Store(int32(len(live)))
	for _, r := range live {
		stop := context.AfterFunc(r.ctx, func() {
			if remaining.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	start := time.Now()
	now := a.now() // allocated_at of every value of this batch
	owners := make([]autoOwner, len(live))
	for i, r := range live {
		owners[i] = autoOwner{ctx: r.ctx, owner: r.owner, claim: r.claim}
	}
	var (
		results []allocResult
		err     error = errGeneralPath
	)
	if a.dialect == models.Postgres {
		results, err = a.allocBatchPG(ctx, lc, pool, owners, now)
		if _, final := AsError(err); err != nil && !final && !errors.Is(err, errGeneralPath) {
			a.log.Debug("allocation batch: fast path failed, using the general path", "pool", pool, "error", err)
		}
	}
	if _, final := AsError(err); err != nil && !final {
		err = a.write(ctx, func(t *tx) error {
			t.now = now
			if testHookBatchFail != nil {
				if err := testHookBatchFail(len(live)); err != nil {
					return err
				}
			}
			p, err := t.lockPool(pool)
			if err != nil {
				return err
			}
			results, err = t.allocateAutoBatch(p, owners)
			return err
		})
	}
	if a.onBatch != nil {
		a.onBatch(pool, len(live), time.Since(start))
	}
	if err == nil {
		for i, r := range live {
			res := results[i]
			if res.err != nil {
				r.finish(Allocation{}, false, res.err)
				continue
			}
			r.finish(allocationOut(pool, res.row), res.created, nil)
		}
		return
	}
	if e, ok := AsError(err); ctx.Err() != nil || models.IsUnavailable(err) || (ok && e.Code == CodeUnavailable) {
		// Cut short by a deadline, or the database went away: the commit
		// may have happened all the same (a deadline passing while COMMIT
		// is in flight cannot stop it). Look before answering.
		a.resolveBatch(pool, live, now)
		return
	}
	if e, ok := AsError(err); len(live) == 1 || (ok && e.Code == CodeNotFound) {
		for _, r := range live {
			r.finish(Allocation{}, false, err)
		}
		return
	}
	a.log.Warn("allocation batch failed; running its requests one transaction each", "pool", pool, "size", len(live), "error", err)
	for _, r := range live {
		a.allocateClaimed(pool, r)
	}
}

// resolveBatch answers the requests of a batch whose outcome is unknown
// (cut short by its deadline, or the database unreachable) from what the
// database holds now, read on a fresh connection once the pool's lock is
// free (so after the lost COMMIT has finished either way): an owner holding a value
// allocated at the batch's time got it from this batch (201 for its first
// request, 200 for the others); an owner holding an older value gets it
// (200); a request whose owner holds nothing was not allocated: 503 if its
// caller has left, else it runs again on its own (allocateClaimed). If the database
// cannot be read either, nobody can know yet: 503 telling the caller to
// retry (allocation is idempotent by owner).
func (a *Allocator) resolveBatch(pool string, live []*allocReq, batchNow time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), 10*time.Second)
	defer cancel()
	var held map[Owner]*models.Allocation
	// Under the pool's lock: a COMMIT still in flight holds it, so the
	// read sees that transaction's outcome, whichever it was.
	err := a.write(ctx, func(t *tx) error {
		p, err := t.lockPool(pool)
		if err != nil {
			return err
		}
		owners := make([]autoOwner, len(live))
		for i, r := range live {
			owners[i] = autoOwner{owner: r.owner}
		}
		held, err = t.heldBy(p, owners)
		return err
	})
	if err != nil {
		for _, r := range live {
			r.finish(Allocation{}, false, Errf(CodeUnavailable, "",
				"the database did not confirm the allocation and cannot be read now; retry (allocation is idempotent by owner)"))
		}
		return
	}
	answered := map[Owner]bool{}
	for _, r := range live {
		if row, ok := held[r.owner]; ok {
			created := row.AllocatedAt.Equal(batchNow) && !answered[r.owner] && r.state.Load() == reqClaimed
			answered[r.owner] = true
			r.finish(allocationOut(pool, row), created, nil)
			continue
		}
		a.allocateClaimed(pool, r)
	}
}

// batchContext is the context of a batch's transaction: the values of its
// first request, not cancelled by any one caller leaving, and bounded by
// the latest deadline among the requests (none if one has none). A caller
// with an earlier deadline leaves on its own before its request is claimed
// (and is left out); once claimed it waits for the commit, which follows
// within milliseconds.
func batchContext(reqs []*allocReq) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(reqs[0].ctx)
	var latest time.Time
	for _, r := range reqs {
		d, ok := r.ctx.Deadline()
		if !ok {
			return context.WithCancel(base)
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(base, latest)
}

// allocateClaimed runs a request alone after its batch failed, if its
// caller is still there; claimed, the caller waits for this answer, so it
// runs under a context of its own (bounded) rather than the caller's
// deadline, whose passing during COMMIT would leave the outcome unknown.
func (a *Allocator) allocateClaimed(pool string, r *allocReq) {
	if !r.claim() {
		r.finish(Allocation{}, false, errAbandoned(r.ctx))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), claimedTimeout)
	defer cancel()
	out, created, err := a.allocateOne(ctx, pool, r.owner, "")
	r.finish(out, created, err)
}

// claimedTimeout bounds the one-by-one run of a claimed request.
const claimedTimeout = 30 * time.Second

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

// allocateAutoBatch gives each owner of reqs, in order, the lowest free
// value of p's auto_assign ranges, as if they had called Allocate one after
// the other: an owner that already holds a value (or appears twice) gets
// that value with created=false, and when the pool runs out the remaining
// owners get 409 pool_exhausted. It runs in a transaction holding p's lock,
// in a fixed number of statements whatever len(reqs) is (plus one per gap
// between held runs that the search crosses).
func (t *tx) allocateAutoBatch(p *models.Pool, reqs []autoOwner) ([]allocResult, error) {
	if err := t.purgeExpired(p); err != nil {
		return nil, err
	}
	held, err := t.heldBy(p, reqs)
	if err != nil {
		return nil, err
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
	batchResults(p, reqs, res, fresh, firstOf, rows)
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
		if events[k], err = auditEvent(r.ctx, now, "allocation.create", "allocation", p.Name+"/"+rows[k].Value, nil, allocationOut(p.Name, &rows[k])); err != nil {
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

// batchResults fills in res once rows are stored: created for the fresh
// requests that got a row, pool_exhausted for the fresh ones beyond, and
// the first request's answer for an owner's later requests.
func batchResults(p *models.Pool, reqs []autoOwner, res []allocResult, fresh []int, firstOf map[Owner]int, rows []models.Allocation) {
	for k := range rows {
		res[fresh[k]] = allocResult{row: &rows[k], created: true}
	}
	for _, i := range fresh[len(rows):] {
		res[i] = allocResult{err: Errf(CodePoolExhausted, "", "pool %q has no free value in its auto_assign ranges", p.Name)}
	}
	fillDuplicates(reqs, res, firstOf)
}

// insertAllocations stores new rows of p, clears the run-end flag of the
// held values in prevs and records events. On PostgreSQL it is one
// statement (one round trip while the pool is locked); on SQLite, which is
// in-process, three.
func (t *tx) insertAllocations(p *models.Pool, rows []models.Allocation, prevs []string, events []models.AuditEvent) error {
	if t.a.dialect != models.Postgres {
		if err := t.Create(&rows).Error; err != nil {
			return err
		}
		if len(prevs) > 0 {
			if err := t.Exec(`UPDATE allocations SET run_end = ? WHERE pool_id = ? AND run_end AND value_key IN ?`, false, p.ID, prevs).Error; err != nil {
				return err
			}
		}
		return t.Create(&events).Error
	}
	var b strings.Builder
	args := make([]any, 0, 8*len(rows)+8*len(events)+2)
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
	b.WriteString(`, aud AS (INSERT INTO audit_events (at, actor, action, object_type, object_id, request_id, before_json, after_json) VALUES `)
	for i := range events {
		e := &events[i]
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, e.At, e.Actor, e.Action, e.ObjectType, e.ObjectID, e.RequestID, e.BeforeJSON, e.AfterJSON)
	}
	b.WriteString(`) SELECT id, value_key FROM ins`)
	res, err := t.Raw(b.String(), args...).Rows()
	if err != nil {
		return err
	}
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

// freePick is a value chosen for a new allocation and whether it ends a
// run of held values once the batch's rows are in.
type freePick struct {
	v       u128
	runEnd  bool
	gapNext *u128 // the held value that closed v's free run when it was read; nil: none
}

// gapColumns are three index seeks that describe the free values from a
// value @from of pool @pool on: the lowest held (or quarantined) value at
// or above @from ("next"), the lowest run end at or above @from ("run
// end"), and the lowest held value above that run end ("after"). When
// @from is held, the free values after its run are run end + 1 .. after -
// 1; otherwise they are @from .. next - 1. Each seek uses the unique index
// (pool_id, value_key) or the partial index allocations_run_end, so the
// cost does not grow with the number of allocations.
func gapColumns(pool, from string) string {
	runEnd := `(SELECT value_key FROM allocations WHERE pool_id = ` + pool + ` AND run_end AND value_key >= ` + from + ` ORDER BY value_key LIMIT 1)`
	return `(SELECT value_key FROM allocations WHERE pool_id = ` + pool + ` AND value_key >= ` + from + ` ORDER BY value_key LIMIT 1), ` +
		runEnd + `, (SELECT a2.value_key FROM allocations a2 WHERE a2.pool_id = ` + pool + ` AND a2.value_key > ` + runEnd + ` ORDER BY a2.value_key LIMIT 1)`
}

// autoRangesQuery lists p's auto_assign ranges in order, each with the
// gap columns from its first value: the first free values of every range
// in one round trip.
var autoRangesQuery = `SELECT r.first_key, r.last_key, ` + gapColumns("r.pool_id", "r.first_key") +
	` FROM pool_ranges r WHERE r.pool_id = @pool AND r.auto_assign = @auto ORDER BY r.first_key`

// gapQuery is the gap columns from one value.
var gapQuery = `SELECT ` + gapColumns("@pool", "@from")

// gap is where the free values from a value start and what closes them.
type gap struct {
	start u128  // first free value (valid unless none)
	next  *u128 // the held value right after the free run; nil: none up to the end of the space
	none  bool  // no free value from there to last
}

// gapOf interprets the gap columns read from c for a range ending at last.
func gapOf(sp space, c, last u128, cols [3]sql.NullString) (gap, error) {
	var v [3]*u128
	for i, s := range cols {
		if s.Valid && s.String != "" {
			k, err := parseKey(s.String)
			if err != nil {
				return gap{}, err
			}
			v[i] = &k
		}
	}
	next, runEnd, after := v[0], v[1], v[2]
	if next == nil || *next != c {
		return gap{start: c, next: next}, nil
	}
	if runEnd == nil {
		return gap{}, fmt.Errorf("value %s is taken but no run end follows it", sp.format(c))
	}
	if runEnd.cmp(last) >= 0 {
		return gap{none: true}, nil
	}
	start, _ := sp.next(*runEnd)
	return gap{start: start, next: after}, nil
}

// lowestFreeN finds the n lowest values of p's auto_assign ranges that are
// not held, quarantined or declared for an ExpectedDpu (fewer when the
// ranges run out), in ascending order, with each value's run-end flag
// computed for when they are all inserted. It reads every range's first
// gap in one query (autoRangesQuery) and crosses further runs of held
// values with one query each (gapQuery), plus one ExpectedDpu look-up per
// chunk of candidates on loopback pools, whatever the number of
// allocations.
func (t *tx) lowestFreeN(p *models.Pool, n int) ([]freePick, error) {
	if n <= 0 {
		return nil, nil
	}
	rows, err := t.Raw(autoRangesQuery, map[string]any{"pool": p.ID, "auto": true}).Rows()
	if err != nil {
		return nil, err
	}
	var ranges []rangeGap
	for rows.Next() {
		var r rangeGap
		if err := rows.Scan(&r.first, &r.last, &r.cols[0], &r.cols[1], &r.cols[2]); err != nil {
			rows.Close()
			return nil, err
		}
		ranges = append(ranges, r)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return pickFree(p, n, ranges, gormGaps{t: t, p: p})
}

// rangeGap is one auto_assign range as autoRangesQuery returns it: its
// bounds and the gap columns from its first value.
type rangeGap struct {
	first, last string
	cols        [3]sql.NullString
}

// gapReader is what pickFree asks the database beyond the first gap of
// each range: the gap columns from a value, and which candidate keys an
// ExpectedDpu declares.
type gapReader interface {
	gapFrom(c u128) ([3]sql.NullString, error)
	declaredAmong(vals []u128) (map[string]bool, error)
}

type gormGaps struct {
	t *tx
	p *models.Pool
}

func (g gormGaps) gapFrom(c u128) (cols [3]sql.NullString, err error) {
	err = g.t.Raw(gapQuery, map[string]any{"pool": g.p.ID, "from": c.key()}).Row().Scan(&cols[0], &cols[1], &cols[2])
	return cols, err
}

func (g gormGaps) declaredAmong(vals []u128) (map[string]bool, error) {
	col := reservationColumn(g.p.Name)
	if col == "" {
		return nil, nil
	}
	var found []string
	if err := g.t.Raw(`SELECT `+col+` FROM expected_dpus WHERE `+col+` IN ?`, keysOf(vals)).Scan(&found).Error; err != nil {
		return nil, err
	}
	return setOf(found), nil
}

func keysOf(vals []u128) []string {
	keys := make([]string, len(vals))
	for i, v := range vals {
		keys[i] = v.key()
	}
	return keys
}

func setOf(keys []string) map[string]bool {
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out
}

// pickFree is lowestFreeN's walk over the ranges read by autoRangesQuery.
func pickFree(p *models.Pool, n int, ranges []rangeGap, db gapReader) ([]freePick, error) {
	sp := spaceOf(p)
	type pick struct {
		v       u128
		gapNext *u128 // the held value that closes v's free run, if any
	}
	var out []pick
	for _, r := range ranges {
		c, err := parseKey(r.first)
		if err != nil {
			return nil, err
		}
		last, err := parseKey(r.last)
		if err != nil {
			return nil, err
		}
		cols := r.cols
		for guard := 0; len(out) < n && guard < 100000; guard++ {
			g, err := gapOf(sp, c, last, cols)
			if err != nil {
				return nil, fmt.Errorf("pool %q: %w", p.Name, err)
			}
			if g.none {
				break
			}
			// Every value from g.start to gapEnd is free; skip the declared ones.
			gapEnd := last
			if g.next != nil && g.next.cmp(last) <= 0 {
				gapEnd, _ = sp.prev(*g.next)
			}
			c = g.start
			for len(out) < n {
				cands := []u128{c}
				for len(cands) < n-len(out) && cands[len(cands)-1].cmp(gapEnd) < 0 {
					v, _ := sp.next(cands[len(cands)-1])
					cands = append(cands, v)
				}
				declared, err := db.declaredAmong(cands)
				if err != nil {
					return nil, err
				}
				for _, v := range cands {
					if !declared[v.key()] {
						out = append(out, pick{v: v, gapNext: g.next})
					}
				}
				end := cands[len(cands)-1]
				if end.cmp(gapEnd) >= 0 {
					break
				}
				c, _ = sp.next(end)
			}
			if len(out) >= n || gapEnd.cmp(last) >= 0 {
				break
			}
			// More are needed: go on after the held value closing this gap.
			c = *g.next
			if cols, err = db.gapFrom(c); err != nil {
				return nil, err
			}
		}
		if len(out) >= n {
			break
		}
	}
	if len(out) > n {
		out = out[:n]
	}
	chosen := make(map[u128]bool, len(out))
	for _, pk := range out {
		chosen[pk.v] = true
	}
	picks := make([]freePick, len(out))
	for i, pk := range out {
		nx, ok := sp.next(pk.v)
		// The value after a new one is held once the batch is in if it is
		// new too, or the held value that closed pk's free run.
		picks[i] = freePick{v: pk.v, runEnd: !ok || !(chosen[nx] || (pk.gapNext != nil && *pk.gapNext == nx)), gapNext: pk.gapNext}
	}
	return picks, nil
}
