package kernel

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"time"

	"gorm.io/gorm"

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

// Write runs fn in one transaction, retrying a few times when the database
// reports a lost race (deadlock, serialization failure, SQLite busy), and
// maps database errors: constraint violations become 409 conflict, lost
// connections 503 unavailable.
func Write(ctx context.Context, db *gorm.DB, opts WriteOptions, fn func(t *Tx) error) error {
	var err error
	for attempt := 0; attempt < Attempts; attempt++ {
		t := &Tx{Ctx: ctx, Now: opts.Now, Attempt: attempt}
		run := func(g *gorm.DB) error {
			return g.Transaction(func(g *gorm.DB) error {
				t.DB = g
				return fn(t)
			})
		}
		if opts.OwnConn {
			err = db.WithContext(ctx).Connection(func(c *gorm.DB) error {
				t.Conn, _ = c.Statement.ConnPool.(*sql.Conn)
				return run(c)
			})
		} else {
			err = run(db.WithContext(ctx))
		}
		if err == nil {
			return nil
		}
		if !models.IsRetryable(err) {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 15 * time.Millisecond)
	}
	return MapCtxError(ctx, err)
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
	if _, ok := AsError(err); !ok && ctx.Err() != nil {
		return Errf(CodeUnavailable, "", "request cancelled or timed out (%v) before the database confirmed it; retry (allocation is idempotent by owner)", ctx.Err())
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
	if _, ok := AsError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Errf(CodeUnavailable, "", "request cancelled or timed out: %v", err)
	}
	if models.IsConstraintViolation(err) {
		return Errf(CodeConflict, "", "the change collides with stored state (%s)", constraintText(err))
	}
	if models.IsUnavailable(err) {
		// The driver's text names the database's user, host and port: it
		// goes to the server log, the client gets a plain 503.
		slog.Warn("database unavailable", "error", err)
		return Errf(CodeUnavailable, "", "the database is unavailable; retry shortly")
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
