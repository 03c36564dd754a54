package feed

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// The feed's sequencer gives every committed audit event its revision
// (docs/feed.md). Writers insert events with revision NULL, on whatever
// path (gorm, the batch statements), and know nothing of the feed. After
// their commit, a sequencer pass numbers the events it can see:
//
//	UPDATE audit_events SET revision = head + row_number()
//	WHERE id IN (the oldest events without a revision)
//
// Passes run one at a time across every server process (a transaction-
// scoped advisory lock of the schema on PostgreSQL; SQLite has one writer at a time
// anyway), and a pass sees only committed events, so the revisions one
// pass assigns are all above every revision of every earlier pass, and a
// pass's revisions become visible together at its commit. A reader that
// has seen revision R has therefore seen every revision up to R, and the
// next revision it can ever see is above R: resuming after R misses
// nothing and repeats nothing. A process killed during a pass rolls the
// pass back (and PostgreSQL frees its lock); any other process's next pass
// numbers those events.
//
// The same transaction queues the events for the webhooks that want them
// (package webhook), and on PostgreSQL notifies FeedChannel so that the
// readers of every process wake up.

// FeedChannel is the PostgreSQL notification channel a sequencer pass that
// numbered events notifies at its commit.
const FeedChannel = "ipledger_feed"

// feedPassLimit bounds the events one pass numbers (a burst is numbered
// in several passes, back to back).
const feedPassLimit = 1000

// hub wakes the sequencer after local commits and the feed's readers
// and the delivery engine after new revisions.
type hub struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced when new revisions appear
	head    int64         // the highest revision this process has seen
	running bool          // RunFeed is sequencing in this process

	kick chan struct{} // the sequencer's wake-up (capacity 1)
}

func newHub() *hub {
	return &hub{changed: make(chan struct{}), kick: make(chan struct{}, 1)}
}

// wait returns a channel closed at the next broadcast.
func (h *hub) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// advance records head and wakes every waiter when it moved (force wakes
// them anyway: a notification from another process).
func (h *hub) advance(head int64, force bool) {
	h.mu.Lock()
	moved := head > h.head
	if moved {
		h.head = head
	}
	if moved || force {
		close(h.changed)
		h.changed = make(chan struct{})
	}
	h.mu.Unlock()
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Committed is called after every committed write of this process (the
// hook passed to the allocator, auth and the webhooks at assembly): the
// sequencer numbers its events now rather than at its next poll.
func (f *Feed) Committed() { signal(f.hub.kick) }

// wakeDeliveries tells the delivery engine that deliveries wait.
func (f *Feed) wakeDeliveries() {
	if f.deliveries != nil {
		f.deliveries.Wake()
	}
}

// FeedOptions configure RunFeed.
type FeedOptions struct {
	// Poll is the fallback interval at which the sequencer looks for
	// events no local commit told it about (other processes' CLI writes, a
	// lost notification); default 1s.
	Poll time.Duration
	// MinGap is the least time between two passes of this process that
	// follow each other (default 50ms; an event waits at most that long
	// plus a pass while the process is busy): an idle sequencer numbers a new
	// event at once, a busy one gathers the commits of MinGap into one
	//
	// pass instead of one pass (and one more commit) per commit.
	MinGap time.Duration
}

// RunFeed sequences audit events and wakes the feed's readers until ctx
// ends: a pass after every local commit and every Poll, and on PostgreSQL
// a listener on FeedChannel for the passes of other processes. It returns
// at once; done is closed when everything has stopped.
func (f *Feed) RunFeed(ctx context.Context, opts FeedOptions) (done <-chan struct{}) {
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.MinGap <= 0 {
		opts.MinGap = 50 * time.Millisecond
	}
	f.hub.mu.Lock()
	f.hub.running = true
	f.hub.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.sequenceLoop(ctx, opts.Poll, opts.MinGap)
	}()
	if f.dialect == models.Postgres {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.listenFeed(ctx)
		}()
	}
	d := make(chan struct{})
	go func() {
		wg.Wait()
		close(d)
	}()
	return d
}

func (f *Feed) sequenceLoop(ctx context.Context, poll, minGap time.Duration) {
	backoff := 50 * time.Millisecond
	var last time.Time
	for ctx.Err() == nil {
		if wait := minGap - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		n, err := f.SequenceOnce(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f.log.Warn("feed sequencer pass failed; retrying", "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		if n == feedPassLimit {
			continue // a burst: the next pass at once
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
		case <-f.hub.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// Sequenced is one event a pass numbered.
type Sequenced struct {
	ID         int64
	Revision   int64
	Action     string
	ObjectType string
	ObjectID   string
}

// SequenceOnce runs one sequencer pass and returns how many events it
// numbered. RunFeed calls it; tests and tools may call it directly.
func (f *Feed) SequenceOnce(ctx context.Context) (int, error) {
	var (
		rows   []Sequenced
		head   int64
		queued int
	)
	err := f.db.WithContext(ctx).Transaction(func(g *gorm.DB) error {
		rows, head, queued = nil, 0, 0
		lock := ""
		if f.dialect == models.Postgres {
			if err := models.LockSchema(g, models.LockFeed); err != nil {
				return err
			}
			lock = " FOR UPDATE"
		}
		err := g.Raw(`WITH next AS (SELECT id FROM audit_events WHERE revision IS NULL ORDER BY id LIMIT ?`+lock+`),
base AS (SELECT COALESCE(MAX(revision), 0) AS m FROM audit_events),
num AS (SELECT next.id AS eid, base.m + row_number() OVER (ORDER BY next.id) AS rev FROM next CROSS JOIN base)
UPDATE audit_events SET revision = num.rev FROM num WHERE audit_events.id = num.eid
RETURNING id, revision, action, object_type, object_id`, feedPassLimit).Scan(&rows).Error
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return g.Raw(`SELECT COALESCE(MAX(revision), 0) FROM audit_events`).Scan(&head).Error
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].Revision < rows[j].Revision })
		head = rows[len(rows)-1].Revision
		if f.deliveries != nil {
			if queued, err = f.deliveries.Queue(g, rows); err != nil {
				return err
			}
		}
		if f.dialect == models.Postgres {
			// The payload tells the other processes whether there is
			// something new to deliver.
			payload := fmt.Sprint(head)
			if queued > 0 {
				payload += " deliveries"
			}
			return g.Exec(`SELECT pg_notify(?, ?)`, FeedChannel, payload).Error
		}
		return nil
	})
	if err != nil {
		return 0, txn.MapCtxError(ctx, err)
	}
	f.hub.advance(head, false)
	if queued > 0 {
		f.wakeDeliveries()
	}
	if f.onPass != nil {
		f.onPass(len(rows))
	}
	return len(rows), nil
}

// FeedHead returns the highest revision readers can see (0 when none).
func (f *Feed) FeedHead(ctx context.Context) (int64, error) {
	var head int64
	err := f.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT COALESCE(MAX(revision), 0) FROM audit_events`).Scan(&head).Error
	})
	return head, err
}

// listenFeed wakes this process's readers and delivery engine on every
// notification of FeedChannel (other processes' passes), reconnecting when
// the connection fails; the sequencer's poll covers the time it is down.
func (f *Feed) listenFeed(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := f.listenFeedOnce(ctx, func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		f.log.Warn("feed listener lost its connection; readers wake up by polling until it is back", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (f *Feed) listenFeedOnce(ctx context.Context, listening func()) error {
	conn, err := database.DialLike(ctx, f.db)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+FeedChannel); err != nil {
		return err
	}
	listening()
	// Whatever was Sequenced while this listener was away.
	f.hub.advance(0, true)
	f.wakeDeliveries()
	for {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			f.hub.advance(0, true)
			if n == nil || strings.HasSuffix(n.Payload, " deliveries") {
				f.wakeDeliveries()
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// Lag is how far the sequencer is behind: events committed but not
// yet numbered, and the age of the oldest (metrics).
func (f *Feed) Lag(ctx context.Context) (events int64, oldest time.Duration, err error) {
	var row struct {
		N      int64
		Oldest *time.Time
	}
	err = f.read(ctx, func(db *gorm.DB) error {
		if err := db.Raw(`SELECT COUNT(*) AS n FROM audit_events WHERE revision IS NULL`).Scan(&row.N).Error; err != nil {
			return err
		}
		if row.N == 0 {
			return nil
		}
		var e models.AuditEvent
		if err := db.Where("revision IS NULL").Order("id").Limit(1).Take(&e).Error; err != nil {
			return err
		}
		row.Oldest = &e.At
		return nil
	})
	if err != nil || row.Oldest == nil {
		return row.N, 0, err
	}
	return row.N, max(f.now().Sub(*row.Oldest), 0), nil
}
