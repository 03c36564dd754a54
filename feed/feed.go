// Package feed is ipledger's change feed (docs/feed.md): the sequencer
// that gives every committed audit event its revision, and the reads —
// pages, long polls, the event stream — that follow it. Writers know
// nothing of it: they call Committed after their commits (a hook passed
// to them at assembly). Webhook deliveries are queued through Deliveries.
package feed

import (
	"context"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// Deliveries is what the sequencer tells the webhooks (package webhook).
type Deliveries interface {
	// Queue runs in a pass's transaction with the events the pass
	// numbered and returns how many deliveries it queued.
	Queue(g *gorm.DB, events []Sequenced) (int, error)
	// Wake tells the delivery engine that deliveries are waiting.
	Wake()
}

// Options configure a Feed.
type Options struct {
	// Now is the clock (tests); defaults to time.Now in UTC.
	Now func() time.Time
	// Logger receives operational messages; defaults to slog.Default().
	Logger *slog.Logger
	// OnPass, when set, is called after each sequencer pass with the
	// number of events it numbered (metrics).
	OnPass func(events int)
}

// Feed numbers audit events and serves them in revision order.
type Feed struct {
	db      *gorm.DB
	dialect models.Dialect
	now     func() time.Time
	log     *slog.Logger
	onPass  func(events int)
	hub     *hub
	// deliveries is set once, before Run (SetDeliveries).
	deliveries Deliveries
}

// New returns a Feed over a migrated database.
func New(db *gorm.DB, opts Options) *Feed {
	f := &Feed{db: db, dialect: models.DialectOf(db), now: opts.Now, log: opts.Logger, onPass: opts.OnPass, hub: newHub()}
	clock := f.now
	if clock == nil {
		clock = time.Now
	}
	f.now = func() time.Time { return clock().UTC().Truncate(time.Microsecond) }
	if f.log == nil {
		f.log = slog.Default()
	}
	return f
}

// SetOnPass sets the hook called after each sequencer pass with the
// number of events it numbered (metrics); set it before Run.
func (f *Feed) SetOnPass(fn func(events int)) { f.onPass = fn }

// SetDeliveries connects the webhooks' queue; call it before Run.
func (f *Feed) SetDeliveries(d Deliveries) { f.deliveries = d }

// read runs fn with a read-only handle, mapping database errors.
func (f *Feed) read(ctx context.Context, fn func(db *gorm.DB) error) error {
	return txn.Read(ctx, f.db, fn)
}
