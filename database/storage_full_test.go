package database_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// sqliteErr has the shape of the SQLite driver's error: a result code.
type sqliteErr int

func (e sqliteErr) Error() string { return fmt.Sprintf("sqlite error (%d)", int(e)) }
func (e sqliteErr) Code() int     { return int(e) }

// Which errors mean the storage cannot take a write (503, readiness
// false), which are other unavailability (503 only), and which neither.
func TestIsStorageFull(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name              string
		err               error
		full, unavailable bool
	}{
		{"PostgreSQL 53100 disk_full", &pgconn.PgError{Code: "53100"}, true, true},
		{"PostgreSQL 58030 io_error", fmt.Errorf("insert: %w", &pgconn.PgError{Code: "58030"}), true, true},
		{"PostgreSQL 53200 out_of_memory", &pgconn.PgError{Code: "53200"}, false, true},
		{"PostgreSQL 53300 too_many_connections", &pgconn.PgError{Code: "53300"}, false, true},
		{"PostgreSQL 53000 insufficient_resources", &pgconn.PgError{Code: "53000"}, false, true},
		{"PostgreSQL 23505 unique", &pgconn.PgError{Code: "23505"}, false, false},
		{"SQLITE_FULL", sqliteErr(13), true, true},
		{"SQLITE_IOERR_WRITE", fmt.Errorf("commit: %w", sqliteErr(778)), true, true},
		{"SQLITE_IOERR_FSYNC", sqliteErr(1034), true, true},
		{"SQLITE_IOERR_DIR_FSYNC", sqliteErr(1290), true, true},
		{"SQLITE_IOERR_TRUNCATE", sqliteErr(1546), true, true},
		{"SQLITE_IOERR_SHMSIZE", sqliteErr(4874), true, true},
		{"SQLITE_IOERR_READ", sqliteErr(266), false, false},
		{"SQLITE_BUSY", sqliteErr(5), false, false},
		{"SQLITE_CONSTRAINT_UNIQUE", sqliteErr(2067), false, false},
		{"the text alone", errors.New("database or disk is full (13)"), true, true},
		{"nil", nil, false, false},
	} {
		if got := database.IsStorageFull(c.err); got != c.full {
			t.Errorf("%s: IsStorageFull = %v, want %v", c.name, got, c.full)
		}
		if got := database.IsUnavailable(c.err); got != c.unavailable {
			t.Errorf("%s: IsUnavailable = %v, want %v", c.name, got, c.unavailable)
		}
	}
}

// The error a real SQLite gives when it cannot grow the database file
// (PRAGMA max_page_count stands for the end of the disk) is a full
// storage.
func TestSQLiteFullIsStorageFull(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, models.SQLite)
	err := fillSQLite(t, db)
	if !database.IsStorageFull(err) || !database.IsUnavailable(err) {
		t.Fatalf("SQLite's error for a full database: %v (%T), not a full storage", err, err)
	}
}

// fillSQLite caps db at its present size and writes until SQLite refuses,
// returning its error. db must have one connection (the cap is the
// connection's).
func fillSQLite(t *testing.T, db *gorm.DB) error {
	t.Helper()
	s, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	s.SetMaxOpenConns(1)
	if err := db.Exec(`CREATE TABLE filler (v TEXT)`).Error; err != nil {
		t.Fatal(err)
	}
	var pages int64
	if err := db.Raw(`PRAGMA page_count`).Scan(&pages).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+1)).Error; err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		if err := db.Exec(`INSERT INTO filler (v) VALUES (?)`, strings.Repeat("x", 3000)).Error; err != nil {
			return err
		}
	}
	t.Fatal("SQLite took 1000 rows of 3 kB beyond max_page_count")
	return nil
}

// The storage watch of a handle: a refused write makes the storage full
// and is counted; the probe write ends the state by itself once it
// commits, and leaves its row. On both databases.
func TestStorageWatchRecoversByItsProbe(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		w := database.StorageWatchOf(db)
		if w == nil {
			t.Fatal("a handle from database.Open has no storage watch")
		}
		if full, _ := w.Full(); full || w.RefusedWrites() != 0 {
			t.Fatalf("a fresh handle: full %v, %d refused", full, w.RefusedWrites())
		}
		database.SetStorageProbeInterval(db, 50*time.Millisecond)
		before := time.Now()
		w.Refused(&pgconn.PgError{Code: "53100", Message: "could not extend file"})
		w.Refused(&pgconn.PgError{Code: "53100", Message: "could not extend file"})
		full, since := w.Full()
		if n := w.RefusedWrites(); n != 2 || (full && since.Before(before)) {
			t.Errorf("after two refusals: %d refused, since %v (test began %v)", n, since, before)
		}
		testkit.WaitFor(t, time.Minute, func() bool {
			full, _ := w.Full()
			return !full
		}, "the probe to end the full state")
		var n int64
		if err := db.Raw(`SELECT count(*) FROM settings WHERE key = 'storage_probe'`).Scan(&n).Error; err != nil || n != 1 {
			t.Errorf("probe rows: %d (%v), want 1", n, err)
		}
		if w.RefusedWrites() != 2 {
			t.Errorf("refused writes %d after recovery, want the 2 counted", w.RefusedWrites())
		}
	})
}
