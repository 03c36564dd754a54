package allocator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ipledger/ipledger/models"
)

// Commit groups of guessed batches (PostgreSQL). Every pool has its own
// leader (groupcommit.go); with many pools each batch holds about one request,
// and each pays a whole transaction: BEGIN, settings, lock, the guarded
// INSERT with its four triggers, COMMIT and its WAL flush. The guessed
// batches of different pools of one process therefore share one
// transaction: a leader whose guess is ready sends its batch at once when
// fewer than maxSharedInFlight group transactions are in flight, else its
// batch waits, and the first waiting leader sends every waiting batch as
// the next group when one in flight has ended (the leaders take turns; no
// goroutine of its own). One pipeline:
//
//	BEGIN; settings; lock the pools in name order; one guarded
//	INSERT for all of them (guessedInsertSharedSQL; guessedInsertOneSQL for a
//	batch alone); COMMIT
//
// Locks are taken in name order by one statement, as every write takes
// them (docs/decisions.md "Locking"), so a group cannot deadlock with
// another group or any other writer. Each pool's guard and rows are its
// own, so a wrong guess leaves only that pool's batch to the
// two-pipeline path afterwards, as for a batch alone. An owner already
// holding a value rolls the whole transaction back: then every batch of
// the group runs its guess again alone, where it is handled as before.

// maxSharedOwners caps the new owners of one group transaction (the
// batches of up to maxGroupCommit of each pool).
const maxSharedOwners = 256

// SharedGroupCommits returns how many guessed batches of this allocator shared
// their transaction with other pools' (metrics).
func (a *Allocator) SharedGroupCommits() int64 { return a.sharedGroupCommits.Load() }

// guessCall is one pool's guessed batch in a group.
type guessCall struct {
	ctx  context.Context
	pool string
	p    *models.Pool
	now  time.Time
	col  string // reservationColumn(pool)
	// The window (groupGuess.window) and the guess's parameters.
	keys, vals    []string
	rFirst, rLast string
	maxS1         int
	// The new owners and their audit events (rows[k] is fresh[k]'s).
	rows                               []models.Allocation
	ots, ois, actors, rids, pres, sufs []string
	roles                              []string // the actors' roles, "" for none
	names                              []string // the events' names, "" for none

	// Answer: written says the guard held and rows now carry the stored
	// values; alone asks the caller to run the batch again on its own
	// (the group rolled back on a constraint); err is a database error
	// whose outcome is unknown or that rolled back the call's transaction.
	written, committed, alone bool
	err                       error
	// wake receives nil once the answer is set, or the group this call's
	// leader must send next.
	wake chan []*guessCall
}

// sharedTxs is a process's commit group of guessed batches.
type sharedTxs struct {
	mu       sync.Mutex
	inflight int // group transactions being sent
	waiting  []*guessCall
}

// maxSharedInFlight is how many group transactions of a process may be
// in flight at once. Their pools are distinct (a pool's batch is in one
// group at a time), so they never wait for each other's locks, and one
// group's commit flush overlaps the next group's work.
const maxSharedInFlight = 2

// runGuess sends c in a group transaction on pc, or waits for another
// leader to, and returns when c's answer is set.
func (a *Allocator) runGuess(pc *pgx.Conn, c *guessCall) {
	g := &a.shared
	g.mu.Lock()
	if g.inflight >= maxSharedInFlight {
		c.wake = make(chan []*guessCall, 1)
		g.waiting = append(g.waiting, c)
		g.mu.Unlock()
		next := <-c.wake
		if next == nil {
			return // answered by another leader
		}
		a.sendSharedTurn(pc, next)
		return
	}
	g.inflight++
	g.mu.Unlock()
	a.sendSharedTurn(pc, []*guessCall{c})
}

// sendSharedTurn sends group on pc, answers its calls, and passes the turn to
// the first call still waiting (which sends every waiting call it can
// take), or ends the turns.
func (a *Allocator) sendSharedTurn(pc *pgx.Conn, group []*guessCall) {
	a.sendShared(pc, group)
	g := &a.shared
	g.mu.Lock()
	var next []*guessCall
	if len(g.waiting) > 0 {
		owners := 0
		n := 0
		for n < len(g.waiting) && (n == 0 || owners+len(g.waiting[n].rows) <= maxSharedOwners) {
			owners += len(g.waiting[n].rows)
			n++
		}
		next = g.waiting[:n:n]
		g.waiting = append([]*guessCall(nil), g.waiting[n:]...)
	} else {
		g.inflight--
	}
	g.mu.Unlock()
	for _, c := range group {
		if c.wake != nil && c != group[0] {
			c.wake <- nil
		}
	}
	if next != nil {
		next[0].wake <- next
	}
}

// sendShared runs the group's transaction on pc and sets each call's
// answer. A group of one runs under its own batch's context, as a batch
// alone always did; a larger one is not cut short by any one batch's
// callers leaving (they have all been claimed and wait for the commit).
func (a *Allocator) sendShared(pc *pgx.Conn, group []*guessCall) {
	ctx := group[0].ctx
	if len(group) > 1 {
		a.sharedGroupCommits.Add(int64(len(group)))
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), claimedTimeout)
		defer cancel()
	}
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(pgGroupSettings)
	if len(group) == 1 {
		b.Queue(pgLockPool, group[0].pool)
	} else {
		names := make([]string, len(group))
		for i, c := range group {
			names[i] = c.pool
		}
		b.Queue(pgLockPools, names)
	}
	one := len(group) == 1 && !a.sharedSQLAlone
	if one {
		c := group[0]
		b.Queue(guessedInsertOneSQL(c.col, a.testGuardDrop), c.p.ID, c.now, c.keys, c.vals, c.ots, c.ois, c.actors, c.rids, c.pres, c.sufs,
			c.p.Name+"/", c.rFirst, c.rLast, c.maxS1, c.roles, c.names)
	} else {
		sql := guessedInsertSharedSQL
		if a.testGuardDrop != "" {
			sql = guessedInsertShared(a.testGuardDrop)
		}
		b.Queue(sql, sharedArgs(group)...)
	}
	b.Queue("commit")
	br := pc.SendBatch(ctx, b)
	var err error
	if one {
		c := group[0]
		c.written, c.committed, err = readGuessPipeline(br, c.p, c.rows)
	} else {
		err = readSharedPipeline(br, group)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		return
	}
	if isConstraint(err) && ctx.Err() == nil && len(group) > 1 {
		// Rolled back as a whole: let every batch find out alone.
		err = rollbackIfOpen(ctx, pc)
		for _, c := range group {
			c.written, c.committed, c.alone, c.err = false, false, err == nil, err
		}
		return
	}
	for _, c := range group {
		c.written, c.err = false, err
	}
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

// pgLockPools locks the pools of a group in name order, as every write
// does (docs/decisions.md "Locking"; byte order, as Go sorts names).
const pgLockPools = `SELECT id FROM pools WHERE name = ANY($1::text[]) ORDER BY name COLLATE "C" FOR UPDATE`

// sharedArgs are the parameters of guessedInsertSharedSQL for group.
func sharedArgs(group []*guessCall) []any {
	np := len(group)
	pids, ats := make([]int64, np), make([]time.Time, np)
	wo, wl, m, n := make([]int32, np), make([]int32, np), make([]int32, np), make([]int32, np)
	rf, rl, prefix, col := make([]string, np), make([]string, np), make([]string, np), make([]string, np)
	var keys, vals, ots, ois, actors, rids, pres, sufs, roles, names []string
	var js, is []int32
	for j, c := range group {
		pids[j], ats[j] = c.p.ID, c.now
		wo[j], wl[j] = int32(len(keys)), int32(len(c.keys))
		rf[j], rl[j], m[j], n[j] = c.rFirst, c.rLast, int32(c.maxS1), int32(len(c.rows))
		prefix[j], col[j] = c.p.Name+"/", c.col
		keys, vals = append(keys, c.keys...), append(vals, c.vals...)
		for k := range c.rows {
			js, is = append(js, int32(j+1)), append(is, int32(k+1))
		}
		ots, ois = append(ots, c.ots...), append(ois, c.ois...)
		actors, rids = append(actors, c.actors...), append(rids, c.rids...)
		roles, names = append(roles, c.roles...), append(names, c.names...)
		pres, sufs = append(pres, c.pres...), append(sufs, c.sufs...)
	}
	return []any{pids, ats, keys, vals, wo, wl, rf, rl, m, n, prefix, col, js, is, ots, ois, actors, rids, pres, sufs, roles, names}
}

// readSharedPipeline reads a group's pipeline: which pools' guarded rows
// were written — their rows are given the values, run-end flags and ids
// stored (the k-th lowest value of a pool is its k-th row's) — and
// whether the transaction committed. (A pool deleted, or deleted and
// created again, since its guess was made has lost its ranges and its
// guard fails: nothing is written for it.)
func readSharedPipeline(br pgx.BatchResults, group []*guessCall) error {
	for range 2 { // BEGIN, settings
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	locked, err := br.Query()
	if err != nil {
		return err
	}
	locked.Close()
	if err := locked.Err(); err != nil {
		return err
	}
	out, err := br.Query()
	if err != nil {
		return err
	}
	stored := map[int64][]models.Allocation{}
	for out.Next() {
		var r models.Allocation
		if err := out.Scan(&r.PoolID, &r.ID, &r.ValueKey, &r.Value, &r.RunEnd); err != nil {
			out.Close()
			return err
		}
		stored[r.PoolID] = append(stored[r.PoolID], r)
	}
	out.Close()
	if err := out.Err(); err != nil {
		return err
	}
	tag, err := br.Exec()
	if err != nil {
		return err
	}
	committed := tag.String() == "COMMIT"
	for _, c := range group {
		c.committed, c.written = committed, false
		s := stored[c.p.ID]
		if len(s) == 0 {
			continue
		}
		if len(s) != len(c.rows) {
			c.err = fmt.Errorf("pool %q: the guarded INSERT stored %d rows for %d requests", c.p.Name, len(s), len(c.rows))
			continue
		}
		slices.SortFunc(s, func(x, y models.Allocation) int { return strings.Compare(x.ValueKey, y.ValueKey) })
		for k := range c.rows {
			c.rows[k].ID, c.rows[k].ValueKey, c.rows[k].Value, c.rows[k].RunEnd = s[k].ID, s[k].ValueKey, s[k].Value, s[k].RunEnd
		}
		c.written = committed
	}
	return nil
}

// isConstraint says err is an integrity violation (SQLSTATE class 23).
func isConstraint(err error) bool {
	var pe interface{ SQLState() string }
	return errors.As(err, &pe) && strings.HasPrefix(pe.SQLState(), "23")
}
