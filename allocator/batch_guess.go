package allocator

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ipledger/ipledger/models"
)

// The one-round-trip batch (PostgreSQL). After a batch, the pool's leader
// knows where the pool's lowest free values were: right after the last
// value it gave out. The next batch therefore guesses its values without
// reading first, and sends everything as one pipeline:
//
//	BEGIN; settings; lock the pool row; one INSERT … WITH that finds the
//	lowest free value near the guess and checks it; COMMIT
//
// The guess is a window: the guessed value and the guessWindow+n values
// after it, with their keys and texts, since other processes allocating
// from the pool move the lowest free value up between this leader's
// batches. The statement runs under the pool's lock, with a snapshot taken
// after the lock was granted (it is a statement of its own after the
// lock), so it sees every committed change by any process. It finds the
// range's lowest free value F as the gap search does (the range's first
// value, or the value after the run of held values starting there: run-end
// flags are exact), and writes only if the guard holds — that is, if F and
// the n-1 values after it are exactly what the general gap search
// (pickFree) would choose:
//
//   - every auto_assign range before the guessed one is full (as gapOf's
//     "none": its first value starts a run that reaches its last value);
//   - the guessed range still exists with the same bounds and auto_assign;
//   - F is in the window, and the n values from F are in the range;
//   - the lowest held value at or after F lies above them, so all n are
//     free (the last one's run-end flag is whether that held value comes
//     right after it);
//   - on the loopback pools, no ExpectedDpu declares one of them.
//
// When the guard fails, the statement writes nothing (every part is gated
// on it), the empty transaction commits, and the batch runs the two
// pipelines of allocBatchPgx. The guess also assumes that no owner of the
// batch holds a value yet: an owner that does makes the INSERT violate the
// (pool_id, owner_type, owner_id) unique constraint, the transaction rolls
// back, and the batch runs the general way too. Nothing is ever written
// from a wrong guess; a wrong guess only costs one round trip.

// guessHits and guessMisses count the batches committed by the guess
// and the guesses that failed (tests and docs/benchmarks.md).
var guessHits, guessMisses atomic.Int64

// BatchGuesses returns how many batches of this process committed on the
// leader's guess and how many guesses failed their guard (metrics).
func BatchGuesses() (hits, misses int64) { return guessHits.Load(), guessMisses.Load() }

// batchGuess is the leader's guess for its pool's next batch.
type batchGuess struct {
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
	rFirst            u128 // the auto_assign range holding next
	rLast             u128 // (inclusive)
	next              u128 // the lowest free value of the pool's auto_assign ranges, as last seen
	// wu, wk, wv: the last window's values, keys and texts (window).
	wu     []u128
	wk, wv []string
	// win is the window's width (guessWindow … maxGuessWindow, 0 for
	// guessWindow); missed says the last guess failed, calm counts the
	// hits in a row whose lowest free value was in the window's first
	// quarter (widenAfterMiss, narrowAfterHit).
	win    int
	missed bool
	calm   int
}

// learn records where the free values continue after a batch that picked
// picks (in ascending order) from ranges, the auto ranges as read under
// the lock. Without picks the guess stays as it was (the guard re-checks
// it anyway).
func (s *batchGuess) learn(p *models.Pool, picks []freePick, ranges []rangeGap) {
	if len(picks) == 0 {
		return
	}
	s.ok = false
	if s.missed {
		s.missed = false
		s.widenAfterMiss(p, picks[0].v)
	}
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
			*s = batchGuess{ok: true, p: *p, rFirst: first, rLast: rl, next: last.v, backoff: s.backoff, lastMiss: s.lastMiss, win: s.win}
			s.advance(sp)
			return
		}
	}
}

// advance moves next past the value it was (just given out); the guess ends
// where the range does.
func (s *batchGuess) advance(sp space) {
	nx, ok := sp.next(s.next)
	if !ok || nx.cmp(s.rLast) > 0 {
		s.ok = false
		return
	}
	s.next = nx
}

// guessWindow is how many values above the guess the pool's lowest free
// value may have moved since the leader's last batch for the guarded
// INSERT still to find it: other processes allocating from the same pool
// take values there between this leader's batches. It is the narrowest
// window; a leader whose guess failed because the value had moved further
// widens its window up to maxGuessWindow, and narrows it again after a
// long run of hits near the window's start (a wide window costs every
// batch: docs/decisions.md "A window for the guess").
const (
	guessWindow    = 32
	maxGuessWindow = 256
	calmHits       = 256
)

func (s *batchGuess) width() int { return max(s.win, guessWindow) }

// widenAfterMiss is called with the lowest free value the general way
// found after a failed guess: if it lay beyond the window, the window
// doubles until it would have held it; a value further than
// maxGuessWindow leaves the window as it is.
func (s *batchGuess) widenAfterMiss(p *models.Pool, found u128) {
	if s.p.ID != p.ID || found.cmp(s.next) <= 0 {
		return
	}
	// The window holds the value k above the guess for k ≤ width, that is
	// when the values from the guess to it, both counted, are ≤ width+1.
	span := spaceOf(p).count(s.next, found)
	if span.Cmp(big.NewInt(maxGuessWindow+1)) > 0 {
		// No window would have held it: the guess pointed into held
		// values (a batch refilled a hole below, a range was added), not
		// behind other processes' allocations.
		return
	}
	w := s.width()
	for w < maxGuessWindow && span.Cmp(big.NewInt(int64(w+1))) > 0 {
		w *= 2
	}
	s.win, s.calm = min(w, maxGuessWindow), 0
}

// narrowAfterHit is called with how far above the guess the lowest free
// value was on a hit: after calmHits hits in a row within the window's
// first quarter, the window halves (not below guessWindow).
func (s *batchGuess) narrowAfterHit(moved int) {
	if s.width() == guessWindow {
		return
	}
	if moved > s.width()/4 {
		s.calm = 0
		return
	}
	if s.calm++; s.calm >= calmHits {
		s.win, s.calm = s.width()/2, 0
	}
}

// window returns the candidate keys and values of the next batch of n:
// element 0 is the value before the guess ("" when there is none), then
// the guess and the guessWindow+n values after it, as far as the value
// space goes. The guarded INSERT takes its n values from them. Windows of
// consecutive batches overlap, so the formatted values are kept and only
// the new end of the window is formatted.
func (s *batchGuess) window(n int) (keys, vals []string) {
	sp := spaceOf(&s.p)
	want := s.width() + n + 2
	start, hasPrev := sp.prev(s.next)
	if !hasPrev {
		s.wu, s.wk, s.wv = nil, nil, nil
		keys, vals = []string{""}, []string{""}
		for v, ok := s.next, true; ok && len(keys) < want; v, ok = sp.next(v) {
			keys, vals = append(keys, v.key()), append(vals, sp.format(v))
		}
		return keys, vals
	}
	off := slices.Index(s.wu, start)
	if off < 0 {
		s.wu, s.wk, s.wv = s.wu[:0], s.wk[:0], s.wv[:0]
	} else {
		s.wu, s.wk, s.wv = s.wu[off:], s.wk[off:], s.wv[off:]
	}
	v, ok := start, true
	if len(s.wu) > 0 {
		v, ok = sp.next(s.wu[len(s.wu)-1])
	}
	for ; ok && len(s.wu) < want; v, ok = sp.next(v) {
		s.wu, s.wk, s.wv = append(s.wu, v), append(s.wk, v.key()), append(s.wv, sp.format(v))
	}
	k := min(want, len(s.wu))
	return s.wk[:k:k], s.wv[:k:k]
}

// guessedInsertSQL is the guarded INSERT for a pool whose values ExpectedDpus
// may declare in column col ("" for none). Parameters: $1 pool id, $2
// allocated_at, $3/$4 the window's keys and values (batchGuess.window), $5/$6
// the new owners in request order, $7/$8/$9/$10 their audit events'
// actors, request ids, and after_json split around the value, $11 the
// events' object id prefix ("pool/"), $12/$13 the guessed range's first
// and last keys, $14 the largest index of the window (1-based) the value
// before the lowest free one may have.
//
// f finds the lowest free value F of the range as the gap search does: the
// range's first value if it is free, else the value after the end of the
// run of held values starting there (run-end flags are exact). s1 is the
// index of the value before F in the window; F and the n-1 values after it
// are the batch's, if the guard g holds.
func guessedInsertSQL(col string) string {
	firstFrom := func(from string) string {
		return `(SELECT value_key FROM allocations WHERE pool_id = $1 AND value_key >= ` + from + ` ORDER BY value_key LIMIT 1)`
	}
	runEndFrom := func(from string) string {
		return `(SELECT value_key FROM allocations WHERE pool_id = $1 AND run_end AND value_key >= ` + from + ` ORDER BY value_key LIMIT 1)`
	}
	declared := ""
	if col != "" {
		declared = `
  AND NOT EXISTS (SELECT 1 FROM expected_dpus WHERE ` + col + ` = ANY(($3::text[])[f.s1 + 1 : f.s1 + cardinality($5::text[])]))`
	}
	return `WITH f AS MATERIALIZED (SELECT CASE WHEN COALESCE(` + firstFrom("$12::text") + ` = $12::text, false)
    THEN array_position($3::text[], ` + runEndFrom("$12::text") + `)
    ELSE array_position($3::text[], $12::text) - 1 END AS s1),
g AS MATERIALIZED (SELECT f.s1, x.gap, (
  f.s1 BETWEEN 1 AND $14::int
  AND NOT EXISTS (SELECT 1 FROM pool_ranges r WHERE r.pool_id = $1 AND r.auto_assign AND r.first_key < $12::text
    AND NOT COALESCE(` + firstFrom("r.first_key") + ` = r.first_key AND ` + runEndFrom("r.first_key") + ` >= r.last_key, false))
  AND EXISTS (SELECT 1 FROM pool_ranges r WHERE r.pool_id = $1 AND r.auto_assign AND r.first_key = $12::text AND r.last_key = $13::text)
  AND ($3::text[])[f.s1 + cardinality($5::text[])] <= $13::text
  AND (x.gap IS NULL OR x.gap > ($3::text[])[f.s1 + cardinality($5::text[])])` + declared + `
  ) IS TRUE AS ok
  FROM f CROSS JOIN LATERAL (SELECT ` + firstFrom("($3::text[])[f.s1 + 1]") + ` AS gap) x),
ins AS (
  INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
  SELECT $1, ($3::text[])[g.s1 + u.i::int], ($4::text[])[g.s1 + u.i::int], 'allocated', u.ot, u.oi,
    u.i = cardinality($5::text[]) AND COALESCE(g.gap <> ($3::text[])[g.s1 + u.i::int + 1], true), $2
  FROM g, unnest($5::text[], $6::text[]) WITH ORDINALITY AS u(ot, oi, i)
  WHERE g.ok
  RETURNING id, value_key, value, run_end),
upd AS (UPDATE allocations a SET run_end = false FROM g
  WHERE g.ok AND a.pool_id = $1 AND a.value_key = ($3::text[])[g.s1] AND a.run_end),
aud AS (INSERT INTO audit_events (at, actor, action, object_type, object_id, request_id, after_json)
  SELECT $2, e.ac, 'allocation.create', 'allocation', $11::text || ($4::text[])[g.s1 + e.i::int], e.rid,
    e.pre || ($4::text[])[g.s1 + e.i::int] || e.suf
  FROM g, unnest($7::text[], $8::text[], $9::text[], $10::text[]) WITH ORDINALITY AS e(ac, rid, pre, suf, i)
  WHERE g.ok)
SELECT id, value_key, value, run_end FROM ins`
}

// allocBatchGuess runs a batch on the leader's guess (see above). done is
// false when the guess did not apply or did not hold and nothing was
// written: the caller then runs the batch the general way, in a new
// transaction on the same connection. An error is returned only when the
// outcome is not known to be "nothing written" (e.g. the connection broke
// during COMMIT), for the caller's usual handling.
func (a *Allocator) allocBatchGuess(ctx context.Context, pc *pgx.Conn, guess *batchGuess, pool string, reqs []autoOwner, now time.Time) (res []allocResult, done bool, err error) {
	if !guess.ok || a.hold > 0 || guess.p.Name != pool {
		return nil, false, nil
	}
	res = make([]allocResult, len(reqs))
	fresh, firstOf := classify(reqs, nil, res)
	if len(fresh) == 0 {
		return nil, false, nil // nothing to write (callers left): keep the guess
	}
	p := &guess.p
	sp := spaceOf(p)
	n := len(fresh)
	// The rows and audit events are built for the guess itself; the
	// statement may shift them up the window, so each event's after_json
	// is sent split around its value.
	picks := make([]freePick, n)
	v := guess.next
	for k := range picks {
		picks[k].v = v
		var ok bool
		if v, ok = sp.next(v); !ok && k < n-1 {
			guess.ok = false
			return nil, false, nil // the value space ends within the batch
		}
	}
	rows, _, events, err := newAllocations(p, reqs, fresh, picks, now)
	if err != nil {
		return nil, false, err
	}
	ots, ois := make([]string, n), make([]string, n)
	actors, rids, pres, sufs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for k := range rows {
		ots[k], ois[k] = deref(rows[k].OwnerType), deref(rows[k].OwnerID)
		actors[k], rids[k] = events[k].Actor, events[k].RequestID
		aj := deref(events[k].AfterJSON)
		mark := `"value":"` + rows[k].Value + `"`
		i := strings.Index(aj, mark)
		if i < 0 {
			return nil, false, fmt.Errorf("audit event of %s: no value in %s", rows[k].Value, aj)
		}
		pres[k], sufs[k] = aj[:i+len(`"value":"`)], aj[i+len(mark)-1:]
	}
	keys, vals := guess.window(n)
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(pgBatchSettings)
	b.Queue(pgLockPool, pool)
	b.Queue(guessedInsertSQL(reservationColumn(pool)), p.ID, now, keys, vals, ots, ois, actors, rids, pres, sufs,
		p.Name+"/", guess.rFirst.key(), guess.rLast.key(), guess.width()+1)
	b.Queue("commit")
	br := pc.SendBatch(ctx, b)
	written, committed, err := readGuessPipeline(br, p, rows)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	guess.ok = false
	missed := func() {
		guessMisses.Add(1)
		guess.missed = true
		if time.Since(guess.lastMiss) > time.Second {
			guess.backoff = 0
		}
		guess.backoff = min(max(2*guess.backoff, 1), 16)
		guess.cooldown = guess.backoff
		guess.lastMiss = time.Now()
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
	guessHits.Add(1)
	guess.backoff = 0
	if i := slices.Index(keys, rows[0].ValueKey); i > 0 {
		guess.narrowAfterHit(i - 1)
	}
	pgFastBatches.Add(1)
	guess.ok = true
	if guess.next, err = parseKey(rows[len(rows)-1].ValueKey); err != nil {
		return nil, false, err
	}
	guess.advance(sp)
	batchResults(p, reqs, res, fresh, firstOf, rows)
	a.feedCommitted()
	if a.onChange != nil {
		for range rows {
			a.onChange(p.Name, "allocate")
		}
	}
	return res, true, nil
}

// readGuessPipeline reads the guessed batch's pipeline: whether the guarded
// INSERT wrote the rows — then rows are given the values, run-end flags and
// ids it stored (the k-th lowest value is the k-th row's) — and whether the
// transaction committed. (If the pool was deleted, or deleted and created again, since
// the guess was made, its ranges are gone and the guard fails: nothing is
// written.)
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
	out, err := br.Query()
	if err != nil {
		return false, false, err
	}
	var stored []models.Allocation
	for out.Next() {
		var r models.Allocation
		if err := out.Scan(&r.ID, &r.ValueKey, &r.Value, &r.RunEnd); err != nil {
			out.Close()
			return false, false, err
		}
		stored = append(stored, r)
	}
	out.Close()
	if err := out.Err(); err != nil {
		return false, false, err
	}
	tag, err := br.Exec()
	if err != nil {
		return false, false, err
	}
	committed = tag.String() == "COMMIT"
	if len(stored) == 0 {
		return false, committed, nil
	}
	if len(stored) != len(rows) {
		return false, committed, fmt.Errorf("pool %q: the guarded INSERT stored %d rows for %d requests", pool.Name, len(stored), len(rows))
	}
	slices.SortFunc(stored, func(x, y models.Allocation) int { return strings.Compare(x.ValueKey, y.ValueKey) })
	for k := range rows {
		rows[k].ID, rows[k].ValueKey, rows[k].Value, rows[k].RunEnd = stored[k].ID, stored[k].ValueKey, stored[k].Value, stored[k].RunEnd
	}
	return true, committed, nil
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
