package txn

// Write's handling of a PostgreSQL failover, made deterministic: a
// connection turned read-only (what a demoted primary or a standby
// answers: 25006), and a backend terminated mid-transaction or just before
// COMMIT (57P01 or a lost connection). pg_terminate_backend waits for the
// backend to exit, so the next statement always meets a dead connection.

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
)

// failoverDB opens a fresh PostgreSQL schema with one table, through a
// pool of at most maxConns connections, plus extra URL parameters.
func failoverDB(t *testing.T, maxConns int, params url.Values) (*gorm.DB, *gorm.DB) {
	t.Helper()
	raw := dbtest.NewPostgresURL(t)
	admin, _, err := database.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, e := admin.DB(); e == nil {
			s.Close()
		}
	})
	if err := admin.Exec(`CREATE TABLE ft (n INTEGER NOT NULL)`).Error; err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(raw)
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	db, _, err := database.OpenWith(u.String(), database.OpenOptions{MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, e := db.DB(); e == nil {
			s.Close()
		}
	})
	return db, admin
}

func countRows(t *testing.T, db *gorm.DB) int64 {
	t.Helper()
	var n int64
	if err := db.Raw(`SELECT COUNT(*) FROM ft`).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// terminate ends the backend of t's connection and waits until it is gone.
func terminate(t *Tx, admin *gorm.DB) error {
	var pid int64
	if err := t.Raw(`SELECT pg_backend_pid()`).Scan(&pid).Error; err != nil {
		return err
	}
	var ok bool
	if err := admin.Raw(`SELECT pg_terminate_backend(?, 5000)`, pid).Scan(&ok).Error; err != nil {
		return err
	}
	if !ok {
		return errors.New("backend did not exit")
	}
	return nil
}

func wantUnavailable(t *testing.T, err error) {
	t.Helper()
	e, ok := fault.AsError(err)
	if !ok || e.Code != fault.CodeUnavailable || e.Code.Status() != 503 {
		t.Fatalf("want 503 unavailable, got %v", err)
	}
}

func TestWriteRetriesOnAReadOnlyConnection(t *testing.T) {
	t.Parallel()
	db, _ := failoverDB(t, 1, nil)
	// The pool's only connection now refuses writes, as a demoted primary's do.
	if err := db.Connection(func(c *gorm.DB) error {
		return c.Exec(`SET default_transaction_read_only = on`).Error
	}); err != nil {
		t.Fatal(err)
	}
	var codes []string
	err := Write(context.Background(), db, WriteOptions{Now: time.Now()}, func(t *Tx) error {
		err := t.Exec(`INSERT INTO ft (n) VALUES (1)`).Error
		var pg *pgconn.PgError
		if errors.As(err, &pg) {
			codes = append(codes, pg.Code)
		} else {
			codes = append(codes, "ok")
		}
		return err
	})
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	if strings.Join(codes, ",") != "25006,ok" {
		t.Fatalf("attempts saw %v, want a read-only refusal then success on a fresh connection", codes)
	}
	if n := countRows(t, db); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

func TestWriteGivesUpOnAReadOnlyDatabaseWith503(t *testing.T) {
	t.Parallel()
	db, admin := failoverDB(t, 2, url.Values{"default_transaction_read_only": {"on"}})
	runs := 0
	err := Write(context.Background(), db, WriteOptions{Now: time.Now()}, func(t *Tx) error {
		runs++
		return t.Exec(`INSERT INTO ft (n) VALUES (1)`).Error
	})
	wantUnavailable(t, err)
	if runs != 1+FailoverAttempts {
		t.Fatalf("%d runs, want %d (bounded)", runs, 1+FailoverAttempts)
	}
	if n := countRows(t, admin); n != 0 {
		t.Fatalf("%d rows written", n)
	}
}

func TestWriteRetriesATransactionWhoseBackendWasTerminated(t *testing.T) {
	t.Parallel()
	db, admin := failoverDB(t, 4, nil)
	var errs []error
	err := Write(context.Background(), db, WriteOptions{Now: time.Now()}, func(t *Tx) error {
		if t.Attempt == 0 {
			if err := t.Exec(`INSERT INTO ft (n) VALUES (0)`).Error; err != nil {
				return err
			}
			if err := terminate(t, admin); err != nil {
				return err
			}
		}
		err := t.Exec(`INSERT INTO ft (n) VALUES (1)`).Error
		errs = append(errs, err)
		return err
	})
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	if len(errs) != 2 || errs[0] == nil || !database.IsFailover(errs[0]) || errs[1] != nil {
		t.Fatalf("attempts: %v; want a lost connection, then success", errs)
	}
	// The first attempt's row died with its transaction.
	var ns []int
	if err := admin.Raw(`SELECT n FROM ft ORDER BY n`).Scan(&ns).Error; err != nil {
		t.Fatal(err)
	}
	if len(ns) != 1 || ns[0] != 1 {
		t.Fatalf("rows %v, want [1]", ns)
	}
}

// A connection lost at COMMIT leaves the outcome unknown to the client:
// the write is not run again, and the answer is 503.
func TestWriteDoesNotRetryALostCommit(t *testing.T) {
	t.Parallel()
	db, admin := failoverDB(t, 4, nil)
	runs := 0
	err := Write(context.Background(), db, WriteOptions{Now: time.Now()}, func(t *Tx) error {
		runs++
		if err := t.Exec(`INSERT INTO ft (n) VALUES (1)`).Error; err != nil {
			return err
		}
		return terminate(t, admin)
	})
	wantUnavailable(t, err)
	if runs != 1 {
		t.Fatalf("%d runs, want 1", runs)
	}
	if n := countRows(t, admin); n != 0 {
		t.Fatalf("%d rows: the terminated transaction committed", n)
	}
}

func TestFailoverErrorsMapTo503(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"57P01", "57P02", "57P03", "25006", "08006"} {
		err := MapDBError(&pgconn.PgError{Code: code, Message: "x"})
		wantUnavailable(t, err)
		if !database.IsFailover(&pgconn.PgError{Code: code}) {
			t.Errorf("%s is not classified as a failover", code)
		}
	}
	for _, code := range []string{"57014", "23505", "40001", "42P01"} {
		if database.IsFailover(&pgconn.PgError{Code: code}) {
			t.Errorf("%s is classified as a failover", code)
		}
	}
}
