package auth

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// Options configure a Service.
type Options struct {
	// Now is the clock (tests); defaults to time.Now in UTC.
	Now func() time.Time
	// Logger receives operational messages; defaults to slog.Default().
	Logger *slog.Logger
	// OnCommit, when set, is called after each committed write (the
	// change feed numbers the write's audit events at once).
	OnCommit func()
}

// Service keeps the API tokens and the console sessions: creating,
// authenticating (with the token cache and its listener) and deleting
// them.
type Service struct {
	db       *gorm.DB
	dialect  models.Dialect
	now      func() time.Time
	log      *slog.Logger
	onCommit func()

	// tokens caches Authenticate's answers while ListenForTokenChanges
	// runs (tokencache.go).
	tokens tokenCache
	// tokenReads counts Authenticate's database look-ups (tests).
	tokenReads atomic.Int64
}

// New returns a Service over a migrated database.
func New(db *gorm.DB, opts Options) *Service {
	s := &Service{db: db, dialect: models.DialectOf(db), now: opts.Now, log: opts.Logger, onCommit: opts.OnCommit}
	// Stored times in UTC and in microseconds, as the allocator keeps them.
	clock := s.now
	if clock == nil {
		clock = time.Now
	}
	s.now = func() time.Time { return clock().UTC().Truncate(time.Microsecond) }
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// write runs fn in one transaction (txn.Write) and then the commit hook.
func (s *Service) write(ctx context.Context, fn func(t *txn.Tx) error) error {
	if err := txn.Write(ctx, s.db, txn.WriteOptions{Now: s.now()}, fn); err != nil {
		return err
	}
	if s.onCommit != nil {
		s.onCommit()
	}
	return nil
}

// read runs fn with a read-only handle, mapping database errors.
func (s *Service) read(ctx context.Context, fn func(db *gorm.DB) error) error {
	return txn.Read(ctx, s.db, fn)
}

// DB is the service's database handle (the sessions of people share it).
func (s *Service) DB() *gorm.DB { return s.db }

// Now is the service's clock, in UTC.
func (s *Service) Now() time.Time { return s.now() }
