// Package feed follows ipledger's change feed for the manager's
// controllers: one long poll per manager (GET /api/v1/events?after=R&wait=),
// each event handed to every subscriber, which maps it to the objects to
// reconcile. The controllers react to ipledger's changes — a value freed in
// an exhausted pool, a value released by hand — through it, not through a
// resync period.
package feed

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"k8s.io/client-go/util/workqueue"

	"github.com/ipledger/ipledger/k8s/internal/ledger"
)

// Poll is how long one long poll waits for a new event.
const Poll = 30 * time.Second

// Reader reads the feed; *ledger.Client is one.
type Reader interface {
	Head(ctx context.Context) (int64, error)
	Events(ctx context.Context, after int64, wait time.Duration) ([]ledger.Event, int64, error)
}

// Watcher follows the feed from the head it finds at start. It is a
// manager Runnable (and so runs only on the elected leader, with the
// controllers it feeds).
type Watcher struct {
	r   Reader
	log logr.Logger

	mu      sync.Mutex
	subs    []func(Resync bool, ev ledger.Event)
	synced  bool
	current int64
}

// New builds a watcher reading r.
func New(r Reader, log logr.Logger) *Watcher { return &Watcher{r: r, log: log} }

// Revision is the last revision handed to subscribers (0 before the first).
func (w *Watcher) Revision() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current
}

// Source is a controller source that enqueues what mapFn makes of each
// event. When the watcher first reaches ipledger, and again when it
// reaches it after failing to, it calls mapFn with resync set (and an
// empty event), so that whatever was reconciled before the feed's head
// was known, or failed while ipledger was away, is looked at again.
func (w *Watcher) Source(mapFn func(ctx context.Context, resync bool, ev ledger.Event) []reconcile.Request) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.subs = append(w.subs, func(resync bool, ev ledger.Event) {
			for _, r := range mapFn(ctx, resync, ev) {
				q.Add(r)
			}
		})
		return nil
	})
}

func (w *Watcher) publish(resync bool, ev ledger.Event) {
	w.mu.Lock()
	subs := append([]func(bool, ledger.Event){}, w.subs...)
	if !resync {
		w.current = ev.Revision
	}
	w.mu.Unlock()
	for _, s := range subs {
		s(resync, ev)
	}
}

// Start follows the feed until ctx ends. Errors are retried with a
// backoff from 1 s doubling to 30 s; the position is kept, so nothing is
// missed across them.
func (w *Watcher) Start(ctx context.Context) error {
	backoff := newBackoff()
	var after int64
	for !w.isSynced() {
		h, err := w.r.Head(ctx)
		if err == nil {
			after = h
			w.mu.Lock()
			w.synced, w.current = true, h
			w.mu.Unlock()
			w.log.Info("following ipledger's change feed", "after", h)
			w.publish(true, ledger.Event{})
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		w.log.Error(err, "reading the feed's head; retrying", "in", backoff.peek())
		if !backoff.wait(ctx) {
			return nil
		}
	}
	backoff.reset()
	failing := false
	for ctx.Err() == nil {
		evs, next, err := w.r.Events(ctx, after, Poll)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			failing = true
			w.log.Error(err, "reading the change feed; retrying", "after", after, "in", backoff.peek())
			if !backoff.wait(ctx) {
				return nil
			}
			continue
		}
		backoff.reset()
		if failing {
			// ipledger is back: whatever failed while it was away is
			// tried again now, not after its growing retry backoff.
			failing = false
			w.log.Info("ipledger's change feed is back", "after", after)
			w.publish(true, ledger.Event{})
		}
		for _, ev := range evs {
			w.publish(false, ev)
		}
		after = next
	}
	return nil
}

func (w *Watcher) isSynced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.synced
}

type backoff struct{ d time.Duration }

func newBackoff() *backoff             { return &backoff{d: time.Second} }
func (b *backoff) reset()              { b.d = time.Second }
func (b *backoff) peek() time.Duration { return b.d }

// wait waits the current delay (false when ctx ends first) and doubles it.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.d)
	defer t.Stop()
	b.d = min(2*b.d, 30*time.Second)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
