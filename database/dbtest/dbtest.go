// Package dbtest gives each test its own migrated database: a fresh SQLite
// file in t.TempDir(), or a fresh PostgreSQL schema in the database named by
// IPLEDGER_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/test).
// Without a reachable PostgreSQL the PostgreSQL half skips with a clear
// message, except under CI=true, where it fails.
package dbtest

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/models"
)

// DefaultPostgres is the machine's PostgreSQL (trust auth, database test).
const DefaultPostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// PostgresBase returns the base URL of the test PostgreSQL.
func PostgresBase() string {
	if u := os.Getenv("IPLEDGER_TEST_POSTGRES"); u != "" {
		return u
	}
	return DefaultPostgres
}

var (
	pgOnce  sync.Once
	pgErr   error
	adminMu sync.Mutex
	admin   *gorm.DB
)

// adminDB is one small shared handle for creating and dropping schemas, so
// that parallel tests do not each hold connections of their own for it.
func adminDB() (*gorm.DB, error) {
	adminMu.Lock()
	defer adminMu.Unlock()
	if admin != nil {
		return admin, nil
	}
	db, _, err := database.Open(PostgresBase())
	if err != nil {
		return nil, err
	}
	if s, e := db.DB(); e == nil {
		s.SetMaxOpenConns(2)
		s.SetMaxIdleConns(1)
	}
	// pg_trgm in public, once for the whole database, so that
	// models.Migrate creates the search indexes in every test schema
	// without creating the extension there (dropping a test's schema would
	// drop it under the other tests). A database that refuses it runs the
	// tests on the search's slower path.
	db.Exec(`CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public`)
	admin = db
	return admin, nil
}

// RequirePostgres skips (or, under CI=true, fails) when PostgreSQL is not
// reachable.
func RequirePostgres(t testing.TB) {
	t.Helper()
	pgOnce.Do(func() {
		db, _, err := database.Open(PostgresBase())
		if err == nil {
			if s, e := db.DB(); e == nil {
				s.Close()
			}
		}
		pgErr = err
	})
	if pgErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL is required under CI=true but unreachable at %s: %v", PostgresBase(), pgErr)
		}
		t.Skipf("PostgreSQL unreachable at %s (%v): skipping PostgreSQL half; set IPLEDGER_TEST_POSTGRES or start PostgreSQL", PostgresBase(), pgErr)
	}
}

// NewPostgresURL creates a fresh schema and returns a database URL whose
// connections use it (search_path), dropping the schema when t ends. Other
// processes (a server under test) can open the same URL.
func NewPostgresURL(t testing.TB) string {
	t.Helper()
	RequirePostgres(t)
	admin, err := adminDB()
	if err != nil {
		t.Fatalf("open PostgreSQL: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	if err := admin.Exec(`CREATE SCHEMA ` + schema).Error; err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`)
	})
	u, err := url.Parse(PostgresBase())
	if err != nil {
		t.Fatalf("parse %s: %v", PostgresBase(), err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// NewSQLiteURL returns the URL of a fresh SQLite file in t.TempDir().
func NewSQLiteURL(t testing.TB) string {
	t.Helper()
	return "sqlite:" + filepath.Join(t.TempDir(), "ipledger.db")
}

// Open opens and migrates a fresh database of the given dialect, closed
// when t ends.
func Open(t testing.TB, d models.Dialect) *gorm.DB {
	t.Helper()
	return OpenURL(t, NewURL(t, d))
}

// OpenURL opens and migrates the database at u, closed when t ends.
func OpenURL(t testing.TB, u string) *gorm.DB {
	t.Helper()
	db, _, err := database.Open(u)
	if err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
	if s, e := db.DB(); e == nil {
		if models.DialectOf(db) == models.Postgres {
			s.SetMaxOpenConns(8)
		}
		t.Cleanup(func() { s.Close() })
	}
	if err := models.Migrate(db); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return db
}

// Dialects is the list every storage test runs on.
var Dialects = []models.Dialect{models.SQLite, models.Postgres}

// Each runs fn as a parallel-safe subtest once per dialect, each with its
// own fresh database.
func Each(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	for _, d := range Dialects {
		t.Run(string(d), func(t *testing.T) {
			fn(t, Open(t, d))
		})
	}
}

// NewURL returns the URL of a fresh, not yet migrated database of the
// given dialect, dropped or removed when t ends; OpenURL and Handles open
// it, and so can another process.
func NewURL(t testing.TB, d models.Dialect) string {
	t.Helper()
	if d == models.Postgres {
		return NewPostgresURL(t)
	}
	return NewSQLiteURL(t)
}

// Handles opens n independent handles (each its own connection pool) on
// the database at u, the first one migrating it: the in-process picture
// of n server processes on one database. All are closed when t ends.
func Handles(t testing.TB, u string, n int) []*gorm.DB {
	t.Helper()
	out := make([]*gorm.DB, n)
	for i := range out {
		if i == 0 {
			out[i] = OpenURL(t, u)
			continue
		}
		db, _, err := database.Open(u)
		if err != nil {
			t.Fatalf("open %s: %v", u, err)
		}
		if s, e := db.DB(); e == nil {
			t.Cleanup(func() { s.Close() })
		}
		out[i] = db
	}
	return out
}
