package webhook

import (
	"context"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/google/uuid"
	"github.com/ipledger/ipledger/feed"
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
	// OnDelivery, when set, is called after each delivery attempt with
	// its outcome: "delivered", "retry" or "failed" (metrics).
	OnDelivery func(outcome string)
}

// Service keeps the webhooks (their rows, their delivery log) and runs
// the delivery engine. It is the feed's Deliveries: the sequencer queues
// the deliveries of the events it numbers through it.
type Service struct {
	db       *gorm.DB
	dialect  models.Dialect
	now      func() time.Time
	log      *slog.Logger
	onCommit func()
	engine   engine
	// wake is the delivery engine's wake-up (capacity 1).
	wake chan struct{}
}

var _ feed.Deliveries = (*Service)(nil)

// New returns a Service over a migrated database.
func New(db *gorm.DB, opts Options) *Service {
	wh := &Service{db: db, dialect: models.DialectOf(db), now: opts.Now, log: opts.Logger, onCommit: opts.OnCommit,
		wake: make(chan struct{}, 1)}
	wh.engine.onResult = opts.OnDelivery
	clock := wh.now
	if clock == nil {
		clock = time.Now
	}
	wh.now = func() time.Time { return clock().UTC().Truncate(time.Microsecond) }
	if wh.log == nil {
		wh.log = slog.Default()
	}
	return wh
}

// Wake tells the delivery engine that deliveries are waiting.
func (wh *Service) Wake() { signal(wh.wake) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// write runs fn in one transaction (txn.Write) and then the commit hook.
func (wh *Service) write(ctx context.Context, fn func(t *txn.Tx) error) error {
	if err := txn.Write(ctx, wh.db, txn.WriteOptions{Now: wh.now()}, fn); err != nil {
		return err
	}
	if wh.onCommit != nil {
		wh.onCommit()
	}
	return nil
}

// read runs fn with a read-only handle, mapping database errors.
func (wh *Service) read(ctx context.Context, fn func(db *gorm.DB) error) error {
	return txn.Read(ctx, wh.db, fn)
}

// Queue creates, in the pass's transaction, one pending
// delivery per (enabled webhook, numbered event it matches), and returns
// how many.
func (wh *Service) Queue(g *gorm.DB, rows []feed.Sequenced) (int, error) {
	var hooks []models.Webhook
	if err := g.Select("id, actions, pools").Where("enabled").Find(&hooks).Error; err != nil {
		return 0, err
	}
	if len(hooks) == 0 {
		return 0, nil
	}
	now := wh.now()
	giveUp := now.Add(wh.engine.opts().GiveUpAfter)
	var out []models.WebhookDelivery
	for _, h := range hooks {
		m, err := webhookMatcher(&h)
		if err != nil {
			return 0, err
		}
		for _, r := range rows {
			if !m.match(r.Action, r.ObjectType, r.ObjectID) {
				continue
			}
			out = append(out, models.WebhookDelivery{WebhookID: h.ID, DeliveryID: uuid.NewString(), EventID: r.ID,
				Revision: r.Revision, Action: r.Action, State: models.DeliveryPending, CreatedAt: now, GiveUpAt: giveUp, NextAttemptAt: &now})
		}
	}
	if len(out) == 0 {
		return 0, nil
	}
	return len(out), g.CreateInBatches(&out, 500).Error
}
