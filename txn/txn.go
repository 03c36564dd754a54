// Package txn runs ipledger's database transactions: Write, one write
// transaction retried on a lost race or a PostgreSQL failover before its
// COMMIT, and Read; both map database errors to the API's (package
// fault). IfMatch is the optimistic-concurrency precondition writes check
// a record's version against.
package txn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// Tx is one write transaction with its context and time.
type Tx struct {
	*gorm.DB
	// Conn is the transaction's own connection when the write asked for
	// one (WriteOptions.OwnConn): bulk writes send their rows with COPY on
	// it (PostgreSQL).
	Conn *sql.Conn
	Ctx  context.Context
	// Now is the write's time, the same in every attempt, so that an
	// attempt can recognise what an earlier one committed before its
	// answer was lost.
	Now time.Time
	// Attempt counts the retries of this write (0 on the first run).
	Attempt int
}

// WriteOptions configure Write.
type WriteOptions struct {
	// Now is the time of the write (every attempt shares it).
	Now time.Time
	// OwnConn runs the transaction on a connection of its own (Tx.Conn).
	OwnConn bool
}

// Attempts is how many times Write runs a write that keeps losing races.
const Attempts = 5

// FailoverAttempts bounds the extra runs of a write whose PostgreSQL
// server went away or turned read-only (database.IsFailover); between them
// Write waits 25 ms, 50 ms, … up to 400 ms, about 0.8 s in all, the time a
// promoted standby takes to accept writes on this machine
// (docs/reliability.md, "PostgreSQL failover").
const FailoverAttempts = 5

// Write runs fn in one transaction and maps database errors: constraint
// violations become 409 conflict, a lost database 503 unavailable.
//
// It runs fn again when the attempt could not have committed:
//   - a lost race (deadlock, serialization failure, SQLite busy), up to
//     Attempts runs in all;
//   - a failover (database.IsFailover: 57P01, 25006, a lost or refused
//     connection) met before COMMIT was sent, up to FailoverAttempts more
//     runs, each on a fresh connection: on PostgreSQL every attempt runs
//     on a connection of its own, which is discarded after such an error,
//     so a retry reconnects and a multi-host URL finds the new primary.
//
// A failover met by the COMMIT itself is never run again: the commit may
// have happened, so the caller gets 503 (retry; allocation is idempotent
// by owner) rather than a second, possibly different, answer.
func Write(ctx context.Context, db *gorm.DB, opts WriteOptions, fn func(t *Tx) error) error {
	var err error
	races, failovers := 0, 0
	pin := opts.OwnConn || models.DialectOf(db) == models.Postgres
	for attempt := 0; ; attempt++ {
		t := &Tx{Ctx: ctx, Now: opts.Now, Attempt: attempt}
		committing := false
		run := func(g *gorm.DB) error {
			return g.Transaction(func(g *gorm.DB) error {
				t.DB = g
				if err := fn(t); err != nil {
					return err
				}
				committing = true
				return nil
			})
		}
		if pin {
			err = db.WithContext(ctx).Connection(func(c *gorm.DB) error {
				conn, _ := c.Statement.ConnPool.(*sql.Conn)
				if opts.OwnConn {
					t.Conn = conn
				}
				err := run(c)
				if err != nil && conn != nil && database.IsFailover(err) {
					// The server went away or refuses writes: never hand
					// this connection to another write.
					_ = conn.Raw(func(any) error { return driver.ErrBadConn })
				}
				return err
			})
		} else {
			err = run(db.WithContext(ctx))
		}
		if err == nil {
			return nil
		}
		switch {
		case database.IsRetryable(err) && races < Attempts-1:
			races++
			time.Sleep(time.Duration(races) * 15 * time.Millisecond)
		case database.IsFailover(err) && !committing && ctx.Err() == nil && failovers < FailoverAttempts:
			failovers++
			slog.Warn("database failover: running the transaction again on a fresh connection", "attempt", failovers, "error", err)
			select {
			case <-ctx.Done():
				return MapCtxError(ctx, err)
			case <-time.After(min(25*time.Millisecond<<(failovers-1), 400*time.Millisecond)):
			}
		default:
			if database.IsStorageFull(err) {
				// Readiness, the metric and the log line follow the storage
				// (docs/operations.md "A full disk").
				database.StorageWatchOf(db).Refused(err)
			}
			return MapCtxError(ctx, err)
		}
	}
}

// Read runs fn with a read-only handle, mapping database errors.
func Read(ctx context.Context, db *gorm.DB, fn func(db *gorm.DB) error) error {
	return MapCtxError(ctx, fn(db.WithContext(ctx)))
}

// MapCtxError is MapDBError, except that any database error while ctx is
// done is 503 unavailable: when a request's deadline passes mid-query, the
// drivers report it in many ways (statement cancelled, bad connection,
// "interrupted", transaction already rolled back), and the transaction was
// rolled back whichever it was.
func MapCtxError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := fault.AsError(err); !ok && ctx.Err() != nil {
		return fault.Errf(fault.CodeUnavailable, "", "request cancelled or timed out (%v) before the database confirmed it; retry (allocation is idempotent by owner)", ctx.Err())
	}
	return MapDBError(err)
}

// MapDBError maps a database error to an *Error: a constraint violation is
// 409 conflict, a lost database or a cancelled context 503 unavailable.
// Other errors, and *Error values, pass unchanged.
func MapDBError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := fault.AsError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fault.Errf(fault.CodeUnavailable, "", "request cancelled or timed out: %v", err)
	}
	if database.IsConstraintViolation(err) {
		return fault.Errf(fault.CodeConflict, "", "the change collides with stored state (%s)", constraintText(err))
	}
	if database.IsStorageFull(err) {
		// Logged once when the storage fills (database.StorageWatch), not
		// per request.
		return fault.Errf(fault.CodeUnavailable, "", "the database cannot store the change: its storage is full or failing; nothing was written, retry once space is freed")
	}
	if database.IsUnavailable(err) {
		// The driver's text names the database's user, host and port: it
		// goes to the server log, the client gets a plain 503.
		slog.Warn("database unavailable", "error", err)
		return fault.Errf(fault.CodeUnavailable, "", "the database is unavailable; retry shortly")
	}
	return err
}

func constraintText(err error) string {
	m := err.Error()
	if i := strings.Index(m, "\nstatement:"); i > 0 {
		m = m[:i]
	}
	return m
}
