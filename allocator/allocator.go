// Package allocator is ipledger's domain: resource pools, ranges, address
// math, allocate/release, quarantine, reservations, ingestion, lifecycle and
// reconciliation. It is the only writer of pool state: every door (console,
// REST, CLI, startup) calls it, and every write runs in one database
// transaction holding the row lock of each pool it touches (never one
// global lock). Errors that callers should show are *Error values with the
// codes of docs/api.md.
//
// Three kinds of work are done many at a time, each under its own name:
//
//   - the group commit (groupcommit*.go; groupCommit…, group…): the
//     automatic Allocate calls of one pool that arrive together are queued
//     and written by one transaction; on PostgreSQL by pgx pipelines, on a
//     guess of the free values behind a guarded INSERT, and in a
//     transaction shared with other pools' group commits
//     (groupcommit_shared.go);
//   - the bulk request (allocate_bulk.go, expected_machine_bulk*.go;
//     …Bulk…): one API request carrying many allocations or
//     ExpectedMachines, written in one transaction;
//   - the report batch (report_batch.go, report_plain*.go; report…): the
//     site-explorer reports queued together and ingested in one
//     transaction, the plain ones set-based.
//
// "Batch" alone means a report batch; the general path
// (allocate.go, allocate_auto.go) is the reference the others are tested
// against.
package allocator

import (
	"context"
	"database/sql"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// Options configure an Allocator.
type Options struct {
	// QuarantineHold is how long a quarantined value is held before it is
	// free again by itself; 0 holds it until an admin releases it
	// (README.md --quarantine-hold).
	QuarantineHold time.Duration
	// Now is the clock (tests); defaults to time.Now in UTC.
	Now func() time.Time
	// Logger receives operational messages; defaults to slog.Default().
	Logger *slog.Logger
	// OnChange, when set, is called after each committed allocation
	// change ("allocate", "release", "quarantine", "unquarantine") per pool,
	// e.g. to count it in metrics.
	OnChange func(pool, action string)
	// OnGroupCommit, when set, is called after each batch of automatic
	// allocations (group commit, groupcommit.go) with its pool, number of
	// requests and time from the start of its transaction to its end.
	//
	// Both hooks are fixed at construction: batch goroutines call them
	// without a lock, so they are never set on a running allocator.
	OnGroupCommit func(pool string, size int, took time.Duration)
	// OnCommit, when set, is called after every committed write (the
	// change feed numbers the write's audit events at once instead of at
	// its next poll).
	OnCommit func()
	// ForcePath makes every automatic allocation take one path (tests and
	// benchmarks: path.go); empty lets the allocator choose. New panics
	// on an unknown path.
	ForcePath Path
}

// Allocator is the one path for every write to pool state.
type Allocator struct {
	db            *gorm.DB
	dialect       models.Dialect
	hold          time.Duration
	now           func() time.Time
	log           *slog.Logger
	onChange      func(pool, action string)
	onGroupCommit func(pool string, size int, took time.Duration)
	onCommit      func()
	// path is Options.ForcePath.
	path Path

	// qmu guards queues: the automatic allocations waiting per pool for
	// their batch (group commit, groupcommit.go).
	qmu sync.Mutex
	// shared is the transaction that guessed group commits of several
	// pools share (groupcommit_shared.go).
	shared sharedTxs
	// sharedSQLAlone makes a group of one use the statement of larger
	// groups (tests).
	sharedSQLAlone bool
	// testGuardDrop, set by tests only, leaves the guard clause of that
	// name out of the guessed INSERT (guardClauses).
	testGuardDrop string
	// testOnRetry, set by tests only, is called each time a write runs
	// again after losing a race (a deadlock among them).
	testOnRetry func()
	queues      map[string]*allocQueue
	// guesses keeps each pool's guess for its next batch between leaders
	// (groupcommit_guess.go), also under qmu.
	guesses map[string]groupGuess
	// reports is the queue of site-explorer reports waiting for their
	// batch (group commit, report_batch.go), also under qmu.
	reports reportQueue
	// reportOrder, set by tests only, is told the order in which each
	// report batch ran its reports: the set-based path's (the first
	// plain), then the others.
	reportOrder func(order []*report, plain int)

	// Counters of the fast paths (metrics, tests): batches committed on
	// the guess and guesses that missed (groupcommit_guess.go), guessed batches
	// sent in a group of two or more (groupcommit_shared.go), batches the
	// PostgreSQL path committed (groupcommit_pg.go).
	guessHits, guessMisses, sharedGroupCommits, pgFastGroups atomic.Int64
	// guessRollbacks counts the misses that rolled back on a constraint
	// (an owner already holding a value) rather than failing the guard.
	guessRollbacks atomic.Int64
	// testHookGroupCommitFail and testHookReportBatchFail, set by tests before
	// the allocator is used, can fail an allocation batch's or a report
	// batch's transaction, given the number of its requests.
	testHookGroupCommitFail func(size int) error
	testHookReportBatchFail func(size int) error
}

// New returns an Allocator over a migrated database.
func New(db *gorm.DB, opts Options) *Allocator {
	a := &Allocator{db: db, dialect: models.DialectOf(db), hold: opts.QuarantineHold, now: opts.Now, log: opts.Logger, onChange: opts.OnChange,
		onGroupCommit: opts.OnGroupCommit, onCommit: opts.OnCommit, path: opts.ForcePath,
		sharedSQLAlone: opts.ForcePath == PathGroupShared,
		queues:         map[string]*allocQueue{}, guesses: map[string]groupGuess{}}
	if err := opts.ForcePath.valid(); err != nil {
		panic(err)
	}
	// Stored times are compared as text on SQLite: keep them all in UTC
	// whatever zone the caller's clock uses, and in microseconds, as
	// PostgreSQL stores them, so that the answer to a write shows the same
	// time as every later read.
	clock := a.now
	if clock == nil {
		clock = time.Now
	}
	a.now = func() time.Time { return clock().UTC().Truncate(time.Microsecond) }
	if a.log == nil {
		a.log = slog.Default()
	}
	return a
}

// DB exposes the handle for read-only use by other packages (health checks).
func (a *Allocator) DB() *gorm.DB { return a.db }

// Dialect tells which database is behind the allocator.
func (a *Allocator) Dialect() models.Dialect { return a.dialect }

// QuarantineHold returns the configured hold (0: until released).
func (a *Allocator) QuarantineHold() time.Duration { return a.hold }

// tx is one write transaction of the allocator with its context and the
// changes to report after commit.
type tx struct {
	// attempt counts the retries of this write (0 on the first run).
	attempt int
	*gorm.DB
	// conn is the transaction's own connection when the write asked for
	// one (writeOnConn, PostgreSQL): bulk writes send their rows with COPY
	// on it.
	conn    *sql.Conn
	a       *Allocator
	ctx     context.Context
	now     time.Time
	locked  map[string]*models.Pool
	changes []change
	// events are the audit events recorded and not stored yet
	// (audit_names.go): flushEvents names and stores them, at the latest
	// when fn returns.
	events []models.AuditEvent
	// familyLocked marks the address families whose advisory lock this
	// transaction holds (pool_overlap.go).
	familyLocked map[string]bool
	// everyProblem makes validateRecords look for collisions with stored
	// state (409) even when a record is malformed (422), leaving the
	// malformed parts out, so that a form or an import can list every
	// problem at once. A write stops at the first.
	everyProblem bool
}

type change struct{ pool, action string }

// write runs fn in one transaction, retrying a few times when the database
// reports a lost race (deadlock, serialization failure, SQLite busy), and
// maps database errors: constraint violations become 409 conflict, lost
// connections 503 unavailable.
func (a *Allocator) write(ctx context.Context, fn func(t *tx) error) error {
	return a.writeWith(ctx, false, fn)
}

// writeOnConn is write on a connection of its own, which the transaction
// can use directly (tx.conn; COPY on PostgreSQL). On SQLite it is write.
func (a *Allocator) writeOnConn(ctx context.Context, fn func(t *tx) error) error {
	return a.writeWith(ctx, a.dialect == models.Postgres, fn)
}

func (a *Allocator) writeWith(ctx context.Context, ownConn bool, fn func(t *tx) error) error {
	var last *tx
	err := txn.Write(ctx, a.db, txn.WriteOptions{Now: a.now(), OwnConn: ownConn}, func(k *txn.Tx) error {
		if k.Attempt > 0 && a.testOnRetry != nil {
			a.testOnRetry()
		}
		last = &tx{a: a, ctx: k.Ctx, now: k.Now, attempt: k.Attempt, DB: k.DB, conn: k.Conn, locked: map[string]*models.Pool{}}
		if err := fn(last); err != nil {
			return err
		}
		return last.flushEvents()
	})
	if err != nil {
		return err
	}
	a.committed()
	if a.onChange != nil {
		for _, c := range last.changes {
			a.onChange(c.pool, c.action)
		}
	}
	return nil
}

// committed runs the commit hook after a committed write.
func (a *Allocator) committed() {
	if a.onCommit != nil {
		a.onCommit()
	}
}

// read runs fn with a read-only handle, mapping database errors.
func (a *Allocator) read(ctx context.Context, fn func(db *gorm.DB) error) error {
	return txn.Read(ctx, a.db, fn)
}

// lockPools takes the row lock of each named pool, in name order so that
// two writers touching the same pools never deadlock, and returns them.
// Unknown names are absent from the result. On SQLite the transaction
// already holds the database's single write lock (BEGIN IMMEDIATE).
func (t *tx) lockPools(names ...string) (map[string]*models.Pool, error) {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	out := map[string]*models.Pool{}
	var missing []string
	for _, n := range slices.Compact(sorted) {
		if p, ok := t.locked[n]; ok {
			out[n] = p
			continue
		}
		missing = append(missing, n)
	}
	if len(missing) == 0 {
		return out, nil
	}
	// One statement for all of them: PostgreSQL locks the rows in the
	// order the ORDER BY returns them, name order.
	var rows []models.Pool
	q := t.DB
	if t.a.dialect == models.Postgres {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	if err := q.Where("name IN ?", missing).Order("name").Find(&rows).Error; err != nil {
		return nil, err
	}
	for i := range rows {
		p := &rows[i]
		t.locked[p.Name] = p
		out[p.Name] = p
	}
	return out, nil
}

// lockPool locks one pool or answers 404.
func (t *tx) lockPool(name string) (*models.Pool, error) {
	m, err := t.lockPools(name)
	if err != nil {
		return nil, err
	}
	p, ok := m[name]
	if !ok {
		return nil, fault.Errf(fault.CodeNotFound, "", "pool %q does not exist", name)
	}
	return p, nil
}

func (t *tx) changed(pool, action string) { t.changes = append(t.changes, change{pool, action}) }

func strp(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
