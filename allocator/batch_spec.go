package allocator

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ipledger/ipledger/models"
)

// The one-round-trip batch (PostgreSQL). After a batch, the pool's leader
// knows where the pool's lowest free values are: right after the last
// value it gave out, up to the held value that closes that free run. The
// next batch therefore guesses its values without reading first, and sends
// everything as one pipeline:
//
//	BEGIN; settings; lock the pool row; one INSERT … WITH whose guard
//	re-checks the guess; COMMIT
//
// The guard is evaluated by the INSERT statement itself, under the pool's
// lock and with a snapshot taken after the lock was granted (it is a
// statement of its own after the lock), so it sees every committed change
// by any process. It holds only if the guess is exactly what the general
// gap search (pickFree) would choose:
//
//   - every auto_assign range before the guessed one is full (as gapOf's
//     "none": its first value starts a run that reaches its last value);
//   - the guessed range still exists with the same bounds and auto_assign;
//   - in it, the values from its first up to the one before the guess are
//     one run of held values (or the guess is its first value);
//   - the lowest held value at or after the guess is still the one that
//     closed the free run (or there is still none), so every guessed value
//     is free and the last one's run-end flag is right;
//   - on the loopback pools, no ExpectedDpu declares a guessed value.
//
// When the guard fails, the statement writes nothing (every part is gated
// on it), the empty transaction commits, and the batch runs the two
// pipelines of allocBatchPgx. The guess also assumes that no owner of the
// batch holds a value yet: an owner that does makes the INSERT violate the
// (pool_id, owner_type, owner_id) unique constraint, the transaction rolls
// back, and the batch runs the general way too. Nothing is ever written
// from a wrong guess; a wrong guess only costs one round trip.

// pgSpecBatches and pgSpecMisses count the batches committed by the guess
// and the guesses that failed (tests and docs/benchmarks.md).
var pgSpecBatches, pgSpecMisses atomic.Int64

// BatchGuesses returns how many batches of this process committed on the
// leader's guess and how many guesses failed their guard (metrics).
func BatchGuesses() (hits, misses int64) { return pgSpecBatches.Load(), pgSpecMisses.Load() }

// pgSpec is the leader's guess for its pool's next batch.
type pgSpec struct {
	ok bool
	// cooldown is the number of batches to run the general way before
	// guessing again, after a guess failed. backoff doubles up to 16 while
	// guesses keep failing within a second of each other (another process
	// allocating from the pool all the time, a declared value below the
	// free run that the guard cannot tell from a free one), and starts
	// again from 1 after a quiet second.
	cooldown, backoff int
	lastMiss          time.Time
	p                 models.Pool
	rFirst            u128  // the auto_assign range holding next
	rLast             u128  // (inclusive)
	next              u128  // the lowest free value of the pool's auto_assign ranges
	gapNext           *u128 // the lowest held value above next; nil: none
}

// learn records where the free values continue after a batch that picked
// picks (in ascending order) from ranges, the auto ranges as read under
// the lock. Without picks the guess stays as it was (the guard re-checks
// it anyway).
func (s *pgSpec) learn(p *models.Pool, picks []freePick, ranges []rangeGap) {
	if len(picks) == 0 {
		return
	}
	s.ok = false
	if s.cooldown > 0 {
		s.cooldown--
		return
	}
	sp := spaceOf(p)
	last := picks[len(picks)-1]
	for _, r := range ranges {
		first, err1 := parseKey(r.first)
		rl, err2 := parseKey(r.last)
		if err1 != nil || err2 != nil {
			return
		}
		if first.cmp(last.v) <= 0 && last.v.cmp(rl) <= 0 {
			*s = pgSpec{ok: true, p: *p, rFirst: first, rLast: rl, next: last.v, gapNext: last.gapNext, backoff: s.backoff, lastMiss: s.lastMiss}
			s.advance(sp)
			return
		}
	}
}

// advance moves next past the value it was (just given out); the guess ends
// where the range or the free run does.
func (s *pgSpec) advance(sp space) {
	nx, ok := sp.next(s.next)
	if !ok || nx.cmp(s.rLast) > 0 || (s.gapNext != nil && nx.cmp(*s.gapNext) >= 0) {
		s.ok = false
		return
	}
	s.next = nx
}

// guess returns the n values the next batch would get, with their run-end
// flags as pickFree computes them, or false when they do not all fit in
// the known free run.
func (s *pgSpec) guess(n int) ([]freePick, bool) {
	if !s.ok || n <= 0 {
		return nil, false
	}
	sp := spaceOf(&s.p)
	picks := make([]freePick, 0, n)
	v := s.next
	for {
		if v.cmp(s.rLast) > 0 || (s.gapNext != nil && v.cmp(*s.gapNext) >= 0) {
			return nil, false
		}
		picks = append(picks, freePick{v: v, gapNext: s.gapNext})
		if len(picks) == n {
			break
		}
		var ok bool
		if v, ok = sp.next(v); !ok {
			return nil, false
		}
	}
	nx, ok := sp.next(v)
	picks[n-1].runEnd = !ok || s.gapNext == nil || *s.gapNext != nx
	return picks, true
}

// pgSpecInsert is the guarded INSERT for a pool whose values ExpectedDpus
// may declare in column col ("" for none). Parameters as pgInsert, plus
// $13/$14 the guessed range's first and last keys, $15 the first guessed
// key, $16 the key before it (” when it is the range's first), $17 the
// key of the held value closing the free run (NULL: none).
func pgSpecInsert(col string) string {
	firstFrom := func(from string) string {
		return `(SELECT value_key FROM allocations WHERE pool_id = $1 AND value_key >= ` + from + ` ORDER BY value_key LIMIT 1)`
	}
	runEndFrom := func(from string) string {
		return `(SELECT value_key FROM allocations WHERE pool_id = $1 AND run_end AND value_key >= ` + from + ` ORDER BY value_key LIMIT 1)`
	}
	declared := ""
	if col != "" {
		declared = `
  AND NOT EXISTS (SELECT 1 FROM expected_dpus WHERE ` + col + ` = ANY($3::text[]))`
	}
	return `WITH g AS MATERIALIZED (SELECT (
  NOT EXISTS (SELECT 1 FROM pool_ranges r WHERE r.pool_id = $1 AND r.auto_assign AND r.first_key < $13::text
    AND NOT COALESCE(` + firstFrom("r.first_key") + ` = r.first_key AND ` + runEndFrom("r.first_key") + ` >= r.last_key, false))
  AND EXISTS (SELECT 1 FROM pool_ranges r WHERE r.pool_id = $1 AND r.auto_assign AND r.first_key = $13::text AND r.last_key = $14::text)
  AND ` + firstFrom("$15::text") + ` IS NOT DISTINCT FROM $17::text
  AND ($15::text = $13::text OR COALESCE(` + firstFrom("$13::text") + ` = $13::text AND ` + runEndFrom("$13::text") + ` = $16::text, false))` + declared + `
  ) AS ok),
ins AS (
  INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
  SELECT $1, u.k, u.v, 'allocated', u.ot, u.oi, u.re, $2
  FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::bool[]) AS u(k, v, ot, oi, re)
  WHERE (SELECT ok FROM g)
  RETURNING id, value_key),
upd AS (UPDATE allocations SET run_end = false WHERE (SELECT ok FROM g) AND id IN (SELECT x.id FROM unnest($8::text[]) AS pv(k)
  CROSS JOIN LATERAL (SELECT id, value_key FROM allocations WHERE pool_id = $1 AND value_key >= pv.k
    ORDER BY value_key LIMIT 1) AS x WHERE x.value_key = pv.k)),
aud AS (INSERT INTO audit_events (at, actor, action, object_type, object_id, request_id, after_json)
  SELECT $2, e.ac, 'allocation.create', 'allocation', e.oid, e.rid, e.aj
  FROM unnest($9::text[], $10::text[], $11::text[], $12::text[]) AS e(ac, oid, rid, aj)
  WHERE (SELECT ok FROM g))
SELECT id, value_key FROM ins`
}

// allocBatchGuess runs a batch on the leader's guess (see above). done is
// false when the guess did not apply or did not hold and nothing was
// written: the caller then runs the batch the general way, in a new
// transaction on the same connection. An error is returned only when the
// outcome is not known to be "nothing written" (e.g. the connection broke
// during COMMIT), for the caller's usual handling.
func (a *Allocator) allocBatchGuess(ctx context.Context, pc *pgx.Conn, spec *pgSpec, pool string, reqs []autoOwner, now time.Time) (res []allocResult, done bool, err error) {
	if !spec.ok || a.hold > 0 || spec.p.Name != pool {
		return nil, false, nil
	}
	res = make([]allocResult, len(reqs))
	fresh, firstOf := classify(reqs, nil, res)
	if len(fresh) == 0 {
		return nil, false, nil // nothing to write (callers left): keep the guess
	}
	picks, ok := spec.guess(len(fresh))
	if !ok {
		spec.ok = false
		return nil, false, nil
	}
	p := &spec.p
	rows, prevs, events, err := newAllocations(p, reqs, fresh, picks, now)
	if err != nil {
		return nil, false, err
	}
	sp := spaceOf(p)
	before := ""
	if spec.next != spec.rFirst {
		pv, _ := sp.prev(spec.next)
		before = pv.key()
	}
	var closing *string
	if spec.gapNext != nil {
		k := spec.gapNext.key()
		closing = &k
	}
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(pgBatchSettings)
	b.Queue(pgLockPool, pool)
	b.Queue(pgSpecInsert(reservationColumn(pool)), append(pgInsertArgs(p, now, rows, prevs, events),
		spec.rFirst.key(), spec.rLast.key(), spec.next.key(), before, closing)...)
	b.Queue("commit")
	br := pc.SendBatch(ctx, b)
	written, committed, err := readGuessPipeline(br, p, rows)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	spec.ok = false
	missed := func() {
		pgSpecMisses.Add(1)
		if time.Since(spec.lastMiss) > time.Second {
			spec.backoff = 0
		}
		spec.backoff = min(max(2*spec.backoff, 1), 16)
		spec.cooldown = spec.backoff
		spec.lastMiss = time.Now()
	}
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.SQLState()[:2] == "23" && ctx.Err() == nil {
			// An owner already holds a value (or the guess collided with
			// a value stored meanwhile): the transaction rolled back.
			missed()
			return nil, false, rollbackIfOpen(ctx, pc)
		}
		return nil, false, err
	}
	if !committed {
		return nil, false, fmt.Errorf("pool %q: the batch's transaction did not end with COMMIT", pool)
	}
	if !written {
		missed()
		return nil, false, nil
	}
	pgSpecBatches.Add(1)
	spec.backoff = 0
	pgFastBatches.Add(1)
	spec.ok = true
	spec.next = picks[len(picks)-1].v
	spec.advance(sp)
	batchResults(p, reqs, res, fresh, firstOf, rows)
	if a.onChange != nil {
		for range rows {
			a.onChange(p.Name, "allocate")
		}
	}
	return res, true, nil
}

// readGuessPipeline reads the guessed batch's pipeline: whether the guarded
// INSERT wrote the rows (their ids are filled in) and whether the
// transaction committed. (If the pool was deleted, or deleted and created
// again, since the guess was made, its ranges are gone and the guard
// fails: nothing is written.)
func readGuessPipeline(br pgx.BatchResults, pool *models.Pool, rows []models.Allocation) (written, committed bool, err error) {
	for range 2 { // BEGIN, settings
		if _, err := br.Exec(); err != nil {
			return false, false, err
		}
	}
	var p models.Pool
	if err := br.QueryRow().Scan(&p.ID, &p.Name, &p.Type, &p.DelegatePrefixLen); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, false, err
	}
	ids, err := readInsertedIDs(br)
	if err != nil {
		return false, false, err
	}
	tag, err := br.Exec()
	if err != nil {
		return false, false, err
	}
	committed = tag.String() == "COMMIT"
	if len(ids) == 0 {
		return false, committed, nil
	}
	return true, committed, assignIDs(pool, rows, ids)
}

// rollbackIfOpen ends a failed transaction on pc so that the connection can
// run the next one.
func rollbackIfOpen(ctx context.Context, pc *pgx.Conn) error {
	if pc.PgConn().TxStatus() == 'I' {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := pc.Exec(rctx, "rollback")
	return err
}
