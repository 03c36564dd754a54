package allocator

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

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
// pipelines of groupCommitPipelines. The guess also assumes that no owner of the
// batch holds a value yet: an owner that does makes the INSERT violate the
// (pool_id, owner_type, owner_id) unique constraint, the transaction rolls
// back, and the batch runs the general way too. Nothing is ever written
// from a wrong guess; a wrong guess only costs one round trip.

// GroupCommitGuesses returns how many batches of this allocator committed on the
// leader's guess and how many guesses failed their guard (metrics).
func (a *Allocator) GroupCommitGuesses() (hits, misses int64) {
	return a.guessHits.Load(), a.guessMisses.Load()
}

// groupGuess is the leader's guess for its pool's next batch.
type groupGuess struct {
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
func (s *groupGuess) learn(p *models.Pool, picks []freePick, ranges []rangeGap) {
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
			*s = groupGuess{ok: true, p: *p, rFirst: first, rLast: rl, next: last.v, backoff: s.backoff, lastMiss: s.lastMiss, win: s.win}
			s.advance(sp)
			return
		}
	}
}

// advance moves next past the value it was (just given out); the guess ends
// where the range does.
func (s *groupGuess) advance(sp space) {
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
// batch: docs/decisions.md "A batch commits in one round trip on the
// leader's guess").
const (
	guessWindow    = 32
	maxGuessWindow = 256
	calmHits       = 256
)

func (s *groupGuess) width() int { return max(s.win, guessWindow) }

// widenAfterMiss is called with the lowest free value the general way
// found after a failed guess: if it lay beyond the window, the window
// doubles until it would have held it; a value further than
// maxGuessWindow leaves the window as it is.
func (s *groupGuess) widenAfterMiss(p *models.Pool, found u128) {
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
func (s *groupGuess) narrowAfterHit(moved int) {
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
func (s *groupGuess) window(n int) (keys, vals []string) {
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

// groupCommitGuessed runs a batch on the leader's guess (see above). done is
// false when the guess did not apply or did not hold and nothing was
// written: the caller then runs the batch the general way, in a new
// transaction on the same connection. An error is returned only when the
// outcome is not known to be "nothing written" (e.g. the connection broke
// during COMMIT), for the caller's usual handling.
func (a *Allocator) groupCommitGuessed(ctx context.Context, pc *pgx.Conn, guess *groupGuess, pool string, reqs []autoOwner, owners map[string]string, now time.Time) (res []allocResult, done bool, err error) {
	if !guess.ok || a.hold > 0 || guess.p.Name != pool || !a.path.guesses() {
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
	if err := nameOwnerEvents(events, rows, owners); err != nil {
		return nil, false, err
	}
	c := &guessCall{ctx: ctx, pool: pool, p: p, now: now, col: reservationColumn(pool), rows: rows,
		rFirst: guess.rFirst.key(), rLast: guess.rLast.key(), maxS1: guess.width() + 1}
	c.ots, c.ois = make([]string, n), make([]string, n)
	c.actors, c.rids, c.pres, c.sufs = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	c.roles, c.names = make([]string, n), make([]string, n)
	for k := range rows {
		c.ots[k], c.ois[k] = deref(rows[k].OwnerType), deref(rows[k].OwnerID)
		c.actors[k], c.rids[k] = events[k].Actor, events[k].RequestID
		c.roles[k], c.names[k] = deref(events[k].ActorRole), deref(events[k].NamesJSON)
		if c.pres[k], c.sufs[k], err = splitAroundValue(&events[k], &rows[k]); err != nil {
			return nil, false, err
		}
	}
	c.keys, c.vals = guess.window(n)
	keys := c.keys
	a.runGuess(pc, c)
	if c.alone {
		// The group rolled back on a constraint: this batch alone.
		c.alone, c.err = false, nil
		a.sendShared(pc, []*guessCall{c})
	}
	written, committed, err := c.written, c.committed, c.err
	guess.ok = false
	missed := func() {
		a.guessMisses.Add(1)
		guess.missed = true
		if time.Since(guess.lastMiss) > time.Second {
			guess.backoff = 0
		}
		guess.backoff = min(max(2*guess.backoff, 1), 16)
		guess.cooldown = guess.backoff
		guess.lastMiss = time.Now()
	}
	if err != nil {
		if isConstraint(err) && ctx.Err() == nil {
			// An owner already holds a value (or the guess collided with
			// a value stored meanwhile): the transaction rolled back.
			missed()
			a.guessRollbacks.Add(1)
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
	a.guessHits.Add(1)
	guess.backoff = 0
	if i := slices.Index(keys, rows[0].ValueKey); i > 0 {
		guess.narrowAfterHit(i - 1)
	}
	a.pgFastGroups.Add(1)
	guess.ok = true
	if guess.next, err = parseKey(rows[len(rows)-1].ValueKey); err != nil {
		return nil, false, err
	}
	guess.advance(sp)
	fillResults(p, reqs, res, fresh, firstOf, rows)
	a.committed()
	if a.onChange != nil {
		for range rows {
			a.onChange(p.Name, "allocate")
		}
	}
	return res, true, nil
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
