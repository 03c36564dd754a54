// Package database opens the embedded SQLite file or PostgreSQL from a
// database URL (README.md), and holds what concerns the database as a
// running thing rather than its schema: backups and restores of the SQLite
// file, the file lock a server holds on it, the classification of
// database errors (constraint violation, lost race, failover, outage), the
// search indexes' status and the connection a LISTEN keeps open. The
// schema, its rows and its migrations are package models.
package database

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/ipledger/ipledger/models"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// DefaultURL is the zero-setup default: an SQLite file in the working
// directory (README.md).
const DefaultURL = "sqlite:ipledger.db"

// Target is a parsed database URL.
type Target struct {
	Dialect models.Dialect
	// DSN is what the driver receives: a libpq URL for PostgreSQL, a file
	// path with pragmas for SQLite.
	DSN string
	// Path is the SQLite file path (empty for PostgreSQL).
	Path string
}

// ParseURL reads a database URL: `postgres://…` or `postgresql://…` selects
// PostgreSQL; `sqlite:PATH` or a bare path ending in `.db` selects the
// embedded SQLite file. Anything else is an error naming the value.
func ParseURL(raw string) (Target, error) {
	s := strings.TrimSpace(raw)
	switch {
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		if _, err := url.Parse(s); err != nil {
			return Target{}, fmt.Errorf("database URL %q: %v", raw, err)
		}
		return Target{Dialect: models.Postgres, DSN: s}, nil
	case strings.HasPrefix(s, "sqlite:"):
		p := strings.TrimPrefix(s, "sqlite:")
		p = strings.TrimPrefix(p, "//")
		if p == "" {
			return Target{}, fmt.Errorf("database URL %q: the file path after \"sqlite:\" is missing", raw)
		}
		return sqliteTarget(p), nil
	case strings.HasSuffix(s, ".db") && !strings.Contains(s, "://"):
		return sqliteTarget(s), nil
	}
	return Target{}, fmt.Errorf("database URL %q: want postgres://…, postgresql://…, sqlite:PATH or a path ending in .db", raw)
}

func sqliteTarget(path string) Target {
	q := url.Values{}
	// WAL lets readers run beside the writer; busy_timeout and BEGIN
	// IMMEDIATE make several processes on one file queue for the write lock
	// instead of failing; foreign keys are off by default in SQLite.
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "cache_size(-16384)")
	q.Add("_pragma", "temp_store(MEMORY)")
	q.Set("_txlock", "immediate")
	// The path is a URI path: '%', '?' and '#' would otherwise be read as
	// an escape, the start of the parameters or a fragment.
	esc := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
	return Target{Dialect: models.SQLite, DSN: "file:" + esc + "?" + q.Encode(), Path: path}
}

// Open connects to the database named by rawURL and pings it. It does not
// migrate; call Migrate.
func Open(rawURL string) (*gorm.DB, models.Dialect, error) {
	return OpenWith(rawURL, OpenOptions{})
}

// OpenOptions tunes a connection pool; the zero value is the default.
type OpenOptions struct {
	// MaxConns is the size of the connection pool of one process
	// (0: 32 for PostgreSQL, 4 for SQLite). Several server processes
	// share the database's max_connections.
	MaxConns int
}

// OpenWith is Open with options.
func OpenWith(rawURL string, o OpenOptions) (*gorm.DB, models.Dialect, error) {
	t, err := ParseURL(rawURL)
	if err != nil {
		return nil, "", err
	}
	return openTarget(t, o)
}

// OpenTarget connects to a parsed Target.
func OpenTarget(t Target) (*gorm.DB, models.Dialect, error) { return openTarget(t, OpenOptions{}) }

func openTarget(t Target, o OpenOptions) (*gorm.DB, models.Dialect, error) {
	cfg := &gorm.Config{
		Logger:                                   logger.Discard,
		SkipDefaultTransaction:                   true,
		DisableForeignKeyConstraintWhenMigrating: true,
		NowFunc:                                  func() time.Time { return time.Now().UTC() },
	}
	var (
		db  *gorm.DB
		err error
	)
	switch t.Dialect {
	case models.Postgres:
		db, err = gorm.Open(postgres.New(postgres.Config{DSN: t.DSN}), cfg)
	case models.SQLite:
		if dir := filepath.Dir(t.Path); dir != "" && dir != "." {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, "", fmt.Errorf("database directory %q: %w", dir, err)
			}
		}
		db, err = gorm.Open(sqlite.Open(t.DSN), cfg)
	default:
		return nil, "", fmt.Errorf("unknown database dialect %q", t.Dialect)
	}
	if err != nil {
		return nil, "", fmt.Errorf("open %s database: %w", t.Dialect, err)
	}
	if err := db.Use(&StorageWatch{interval: StorageProbeInterval}); err != nil {
		return nil, "", err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, "", err
	}
	if t.Dialect == models.SQLite {
		// One writer at a time anyway; a small pool keeps readers going
		// beside it without piling up BUSY waits.
		sqlDB.SetMaxOpenConns(o.maxConns(4))
	} else {
		n := o.maxConns(32)
		sqlDB.SetMaxOpenConns(n)
		sqlDB.SetMaxIdleConns(n)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(ctx); err != nil {
		return nil, "", fmt.Errorf("connect to %s database: %w", t.Dialect, err)
	}
	return db, t.Dialect, nil
}

func (o OpenOptions) maxConns(def int) int {
	if o.MaxConns > 0 {
		return o.MaxConns
	}
	return def
}
