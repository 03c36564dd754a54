package allocator

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// The PostgreSQL path of a batch of automatic allocations (groupcommit.go): the
// same work as allocateLowestFree, sent as two pipelines on one pgx
// connection so that the pool's row lock is held for about one network
// round trip, one commit and the Go computation in between:
//
//  1. BEGIN; lock the pool row; the owners' current allocations; the auto
//     ranges with the first gap of each (statements in a pipeline run one
//     after the other, and under READ COMMITTED each takes its snapshot
//     when it starts, so the reads see everything committed before the
//     lock was granted);
//  2. one INSERT of the new allocations, the run-end update of their
//     neighbours (each is a run end: the value after it was free; found
//     one by one with the seek the gap search uses) and the audit events (a data-modifying WITH, arrays bound
//     as parameters so the statement text, and its cached plan, is the
//     same for every batch size); COMMIT.
//
// Crossing further runs of held values, and checking declared values on
// the loopback pools, cost one more round trip each, as on the general
// path. Anything unusual (a database error, quarantines due to expire,
// another driver) makes runGroupCommit use the general gorm path instead,
// which has the same results.

// errGeneralPath means the batch must take the general path.
var errGeneralPath = errors.New("allocation batch needs the general path")

const (
	// pgGroupSettings makes the batch's statements (prepared once per
	// connection) reuse one plan instead of being planned again at each
	// execution — planning their array parameters cost more than running
	// them — and makes that plan the index plan whatever the statistics say:
	// a plan made while the table was small (no statistics yet) would
	// otherwise hash-join over every allocation of the pool for as long as
	// the connection lives. Local to the batch's transaction;
	// TestGroupCommitStatementsUseIndexes checks the plans on an empty and on a
	// large pool.
	pgGroupSettings = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
 set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true),
 set_config('enable_mergejoin', 'off', true)`
	pgLockPool = `SELECT id, name, type, delegate_prefix_len FROM pools WHERE name = $1 FOR UPDATE`
	pgPoolID   = `(SELECT id FROM pools WHERE name = $1)`
	// pgHeld looks each owner up on its own (a lateral subquery kept apart
	// by OFFSET 0, so the planner cannot turn it into a join filtering the
	// pool's allocations): an index seek on the owner per owner, whatever
	// the statistics say.
	pgHeld = `SELECT a.id, a.value_key, a.value, a.owner_type, a.owner_id, a.allocated_at
 FROM unnest($2::text[], $3::text[]) AS o(t, i)
 CROSS JOIN LATERAL (SELECT id, value_key, value, owner_type, owner_id, allocated_at FROM allocations
   WHERE pool_id = ` + pgPoolID + ` AND owner_type = o.t AND owner_id = o.i OFFSET 0) AS a`
	pgExpiring = `SELECT EXISTS (SELECT 1 FROM allocations WHERE pool_id = ` + pgPoolID + `
 AND state = 'quarantined' AND quarantined_at <= $2)`
	pgInsert = `WITH ins AS (
  INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
  SELECT $1, u.k, u.v, 'allocated', u.ot, u.oi, u.re, $2
  FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::bool[]) AS u(k, v, ot, oi, re)
  RETURNING id, value_key),
upd AS (UPDATE allocations SET run_end = false WHERE id IN (SELECT x.id FROM unnest($8::text[]) AS pv(k)
  CROSS JOIN LATERAL (SELECT id, value_key FROM allocations WHERE pool_id = $1 AND value_key >= pv.k
    ORDER BY value_key LIMIT 1) AS x WHERE x.value_key = pv.k)),
aud AS (INSERT INTO audit_events (at, actor, actor_role, action, object_type, object_id, request_id, after_json, names_json)
  SELECT $2, e.ac, NULLIF(e.ar, ''), ` + allocationCreateSQL + `, e.oid, e.rid, e.aj, NULLIF(e.nm, '')
  FROM unnest($9::text[], $13::text[], $10::text[], $11::text[], $12::text[], $14::text[]) AS e(ac, ar, oid, rid, aj, nm))
SELECT id, value_key FROM ins`
)

var (
	pgAutoRanges = `SELECT r.first_key, r.last_key, ` + gapColumns("r.pool_id", "r.first_key") +
		` FROM pool_ranges r WHERE r.pool_id = ` + pgPoolID + ` AND r.auto_assign ORDER BY r.first_key`
	pgGap = `SELECT ` + gapColumns("$1", "$2")
)

// leaderConn is the database connection a pool's leader keeps from one
// batch to the next while its queue is busy, so that it does not wait for
// a connection behind the requests' own reads (token look-ups) before
// every batch. It is returned to the pool when the queue empties.
type leaderConn struct {
	conn *sql.Conn
	// guess is the guess for the pool's next batch (groupcommit_guess.go); it
	// lives as long as the leader runs.
	guess groupGuess
}

func (lc *leaderConn) get(ctx context.Context, a *Allocator) (*sql.Conn, error) {
	if lc.conn != nil {
		return lc.conn, nil
	}
	c, err := a.poolConn(ctx)
	if err != nil {
		return nil, err
	}
	lc.conn = c
	return c, nil
}

// poolConn takes one connection out of the database/sql pool for the
// caller's exclusive use (Close gives it back).
func (a *Allocator) poolConn(ctx context.Context) (*sql.Conn, error) {
	sqlDB, err := a.db.DB()
	if err != nil {
		return nil, err
	}
	return sqlDB.Conn(ctx)
}

// drop forgets a connection that broke (database/sql closes it).
func (lc *leaderConn) drop() {
	lc.guess.ok = false
	if lc.conn != nil {
		lc.conn.Close()
		lc.conn = nil
	}
}

// groupCommitPG runs a batch on PostgreSQL through pgx. It returns
// errGeneralPath (or a database error) when the general path must run the
// batch instead; *Error values (404, 503) are final for every request.
func (a *Allocator) groupCommitPG(ctx context.Context, lc *leaderConn, pool string, reqs []autoOwner, now time.Time) ([]allocResult, error) {
	conn, err := lc.get(ctx, a)
	if err != nil {
		return nil, txn.MapCtxError(ctx, err)
	}
	var res []allocResult
	owners, err := a.ownerNames(ctx, conn, reqs)
	if err == nil {
		err = conn.Raw(func(dc any) error {
			sc, ok := dc.(*stdlib.Conn)
			if !ok {
				return errGeneralPath
			}
			pc := sc.Conn()
			var err error
			res, err = a.groupCommitPipelines(ctx, pc, &lc.guess, pool, reqs, owners, now)
			if err != nil && pc.PgConn().TxStatus() != 'I' {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if _, rerr := pc.Exec(rctx, "rollback"); rerr != nil {
					// Let database/sql drop this connection.
					return errors.Join(err, driver.ErrBadConn)
				}
			}
			return err
		})
	}
	if err != nil {
		// Start the next batch on a fresh connection: this one may be
		// broken (a closed pgx connection is discarded by database/sql
		// when it comes back to the pool).
		lc.drop()
		if _, ok := fault.AsError(err); ok {
			return nil, err
		}
		if database.IsUnavailable(err) || ctx.Err() != nil {
			return nil, txn.MapCtxError(ctx, err)
		}
		return nil, err
	}
	return res, nil
}

func (a *Allocator) groupCommitPipelines(ctx context.Context, pc *pgx.Conn, guess *groupGuess, pool string, reqs []autoOwner, owners map[string]string, now time.Time) ([]allocResult, error) {
	if a.testHookGroupCommitFail != nil {
		if err := a.testHookGroupCommitFail(len(reqs)); err != nil {
			return nil, err
		}
	}
	if res, done, err := a.groupCommitGuessed(ctx, pc, guess, pool, reqs, owners, now); done || err != nil {
		return res, err
	}
	types := make([]string, len(reqs))
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		types[i], ids[i] = r.owner.Type, r.owner.ID
	}
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(pgGroupSettings)
	b.Queue(pgLockPool, pool)
	b.Queue(pgHeld, pool, types, ids)
	b.Queue(pgAutoRanges, pool)
	if a.hold > 0 {
		b.Queue(pgExpiring, pool, now.Add(-a.hold))
	}
	br := pc.SendBatch(ctx, b)
	p, held, ranges, expiring, err := readFirstPipeline(br, a.hold > 0)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fault.Errf(fault.CodeNotFound, "", "pool %q does not exist", pool)
	}
	if expiring {
		return nil, errGeneralPath // the general path frees them first
	}
	for i := range held {
		held[i].PoolID = p.ID
	}

	res := make([]allocResult, len(reqs))
	heldBy := make(map[Owner]*models.Allocation, len(held))
	for i := range held {
		heldBy[Owner{Type: deref(held[i].OwnerType), ID: deref(held[i].OwnerID)}] = &held[i]
	}
	fresh, firstOf := classify(reqs, heldBy, res)
	picks, err := pickFree(p, len(fresh), ranges, pgxGaps{ctx: ctx, pc: pc, p: p})
	if err != nil {
		return nil, err
	}

	rows, prevs, events, err := newAllocations(p, reqs, fresh, picks, now)
	if err != nil {
		return nil, err
	}
	if err := nameOwnerEvents(events, rows, owners); err != nil {
		return nil, err
	}
	n := len(rows)
	b = &pgx.Batch{}
	if n > 0 {
		b.Queue(pgInsert, pgInsertArgs(p, now, rows, prevs, events)...)
	}
	b.Queue("commit")
	br = pc.SendBatch(ctx, b)
	err = func() error {
		if n > 0 {
			ids, err := readInsertedIDs(br)
			if err != nil {
				return err
			}
			if err := assignIDs(p, rows, ids); err != nil {
				return err
			}
		}
		tag, err := br.Exec()
		if err != nil {
			return err
		}
		if tag.String() != "COMMIT" {
			return fmt.Errorf("pool %q: the batch's transaction ended with %q, not COMMIT", p.Name, tag.String())
		}
		return nil
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}

	a.pgFastGroups.Add(1)
	guess.learn(p, picks, ranges)
	fillResults(p, reqs, res, fresh, firstOf, rows)
	a.committed()
	if a.onChange != nil {
		for range rows {
			a.onChange(p.Name, "allocate")
		}
	}
	return res, nil
}

// pgInsertArgs are the parameters $1–$14 of pgInsert: the pool, the
// batch's time, the new rows and their audit events as parallel arrays
// (the actors' roles and the events' names last, "" for none), and the
// neighbours whose run-end flag clears.
func pgInsertArgs(p *models.Pool, now time.Time, rows []models.Allocation, prevs []string, events []models.AuditEvent) []any {
	n := len(rows)
	keys, vals, ots, ois := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	runEnds := make([]bool, n)
	actors, objects, requests, afters := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	roles, names := make([]string, n), make([]string, n)
	for k := range rows {
		r, ev := &rows[k], &events[k]
		keys[k], vals[k], ots[k], ois[k], runEnds[k] = r.ValueKey, r.Value, deref(r.OwnerType), deref(r.OwnerID), r.RunEnd
		actors[k], objects[k], requests[k], afters[k] = ev.Actor, ev.ObjectID, ev.RequestID, deref(ev.AfterJSON)
		roles[k], names[k] = deref(ev.ActorRole), deref(ev.NamesJSON)
	}
	return []any{p.ID, now, keys, vals, ots, ois, runEnds, prevs, actors, objects, requests, afters, roles, names}
}

// readInsertedIDs reads the (id, value_key) rows an INSERT … RETURNING
// answered.
func readInsertedIDs(br pgx.BatchResults) (map[string]int64, error) {
	out, err := br.Query()
	if err != nil {
		return nil, err
	}
	ids := map[string]int64{}
	for out.Next() {
		var id int64
		var key string
		if err := out.Scan(&id, &key); err != nil {
			out.Close()
			return nil, err
		}
		ids[key] = id
	}
	out.Close()
	return ids, out.Err()
}

// assignIDs fills in the ids the database gave the new rows, by value key.
func assignIDs(p *models.Pool, rows []models.Allocation, ids map[string]int64) error {
	for k := range rows {
		id, ok := ids[rows[k].ValueKey]
		if !ok {
			return fmt.Errorf("pool %q: the insert of %s returned no id", p.Name, rows[k].Value)
		}
		rows[k].ID = id
	}
	return nil
}

// readFirstPipeline reads the results of the first pipeline: the locked
// pool (nil if there is none), the owners' allocations, the auto ranges
// with their first gaps, and whether quarantines are due to expire.
func readFirstPipeline(br pgx.BatchResults, withExpiring bool) (*models.Pool, []models.Allocation, []rangeGap, bool, error) {
	for range 2 { // BEGIN, settings
		if _, err := br.Exec(); err != nil {
			return nil, nil, nil, false, err
		}
	}
	var p models.Pool
	found := true
	if err := br.QueryRow().Scan(&p.ID, &p.Name, &p.Type, &p.DelegatePrefixLen); errors.Is(err, pgx.ErrNoRows) {
		found = false
	} else if err != nil {
		return nil, nil, nil, false, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, nil, false, err
	}
	var held []models.Allocation
	for rows.Next() {
		var h models.Allocation
		var ot, oi string
		if err := rows.Scan(&h.ID, &h.ValueKey, &h.Value, &ot, &oi, &h.AllocatedAt); err != nil {
			rows.Close()
			return nil, nil, nil, false, err
		}
		h.State, h.OwnerType, h.OwnerID, h.RunEnd = models.StateAllocated, &ot, &oi, false
		held = append(held, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, nil, false, err
	}
	rows, err = br.Query()
	if err != nil {
		return nil, nil, nil, false, err
	}
	var ranges []rangeGap
	for rows.Next() {
		var r rangeGap
		if err := rows.Scan(&r.first, &r.last, &r.cols[0], &r.cols[1], &r.cols[2]); err != nil {
			rows.Close()
			return nil, nil, nil, false, err
		}
		ranges = append(ranges, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, nil, false, err
	}
	expiring := false
	if withExpiring {
		if err := br.QueryRow().Scan(&expiring); err != nil {
			return nil, nil, nil, false, err
		}
	}
	if !found {
		return nil, nil, nil, false, nil
	}
	return &p, held, ranges, expiring, nil
}

// pgxGaps reads further gaps and declared values on the batch's pgx
// connection, inside its transaction.
type pgxGaps struct {
	ctx context.Context
	pc  *pgx.Conn
	p   *models.Pool
}

func (g pgxGaps) gapFrom(c u128) (cols [3]sql.NullString, err error) {
	err = g.pc.QueryRow(g.ctx, pgGap, g.p.ID, c.key()).Scan(&cols[0], &cols[1], &cols[2])
	return cols, err
}

func (g pgxGaps) declaredAmong(vals []u128) (map[string]bool, error) {
	col := reservationColumn(g.p.Name)
	if col == "" {
		return nil, nil
	}
	rows, err := g.pc.Query(g.ctx, `SELECT `+col+` FROM expected_dpus WHERE `+col+` = ANY($1::text[])`, keysOf(vals))
	if err != nil {
		return nil, err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	return setOf(found), nil
}
