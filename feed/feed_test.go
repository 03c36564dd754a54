package feed

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit/sitekit"
	"github.com/ipledger/ipledger/models"

	"gorm.io/gorm"
)

// runFeed starts a's sequencer for the test's lifetime with a short
// fallback poll.
func runFeed(t *testing.T, a *Feed) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := a.RunFeed(ctx, FeedOptions{Poll: 50 * time.Millisecond})
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

// proc is one server process of a test: its database handle, its
// allocator and its feed, wired as serve wires them.
type proc struct {
	db   *gorm.DB
	a    *allocator.Allocator
	feed *Feed
}

func newProc(db *gorm.DB) *proc {
	f := New(db, Options{})
	return &proc{db: db, a: allocator.New(db, allocator.Options{OnCommit: f.Committed}), feed: f}
}

// Revisions follow commit order: writers in three "processes" (handles)
// on three pools allocate and release while a reader resumes after every
// page with the last next_after; one process's sequencer stops half-way
// (the others take over). The reader sees every committed event exactly
// once, in increasing revision order, and the revisions are 1..N without
// a gap.
func TestFeedOrderUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			var as []*proc
			for _, db := range dbtest.Handles(t, dbtest.NewURL(t, d), 3) {
				as = append(as, newProc(db))
			}
			ctx := audit.WithActor(context.Background(), "test", "")
			for i, p := range []string{"fa", "fb", "fc"} {
				if _, err := as[0].a.CreatePool(ctx, allocator.PoolSpec{Name: p, Type: "integer", Ranges: []allocator.RangeSpec{sitekit.Range(fmt.Sprint(i*10000+1), fmt.Sprint(i*10000+9999), true)}}); err != nil {
					t.Fatal(err)
				}
			}
			cancels := make([]context.CancelFunc, len(as))
			for i, a := range as {
				cancels[i] = runFeed(t, a.feed)
			}
			perWriter := 60
			if d == models.Postgres {
				perWriter = 150
			}
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					a := as[w%len(as)]
					pool := []string{"fa", "fb", "fc"}[w%3]
					for i := 0; i < perWriter; i++ {
						o := allocator.Owner{Type: "machine", ID: fmt.Sprintf("w%d-%d", w, i)}
						al, _, err := a.a.Allocate(ctx, pool, o, "")
						if err != nil {
							t.Errorf("allocate: %v", err)
							return
						}
						if i%3 == 0 {
							if err := a.a.Release(ctx, pool, al.Value, o); err != nil {
								t.Errorf("release: %v", err)
								return
							}
						}
						if w == 0 && i == perWriter/2 {
							cancels[0]() // one process's sequencer stops
						}
					}
				}(w)
			}
			seen := map[int64]bool{}
			var last int64
			after := int64(0)
			readPage := func() int {
				page, err := as[2].feed.ReadFeed(ctx, FeedQuery{After: after, Limit: 37})
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range page.Items {
					r := *e.Revision
					if r <= last || seen[r] {
						t.Fatalf("revision %d after %d (seen before: %v)", r, last, seen[r])
					}
					seen[r], last = true, r
				}
				if page.NextAfter < after {
					t.Fatalf("next_after %d below after %d", page.NextAfter, after)
				}
				after = page.NextAfter
				return len(page.Items)
			}
			writersDone := make(chan struct{})
			go func() { wg.Wait(); close(writersDone) }()
		read:
			for {
				select {
				case <-writersDone:
					break read
				default:
					if readPage() == 0 {
						time.Sleep(2 * time.Millisecond)
					}
				}
			}
			var total int64
			deadline := time.Now().Add(20 * time.Second)
			for {
				var unnumbered int64
				as[0].db.Raw(`SELECT COUNT(*) FROM audit_events WHERE revision IS NULL`).Scan(&unnumbered)
				as[0].db.Raw(`SELECT COUNT(*) FROM audit_events`).Scan(&total)
				for readPage() > 0 {
				}
				if unnumbered == 0 && int64(len(seen)) == total {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("reader saw %d of %d events, %d not numbered", len(seen), total, unnumbered)
				}
				time.Sleep(10 * time.Millisecond)
			}
			want := int64(8*perWriter + 8*((perWriter+2)/3) + 3)
			if total != want {
				t.Fatalf("%d events stored, want %d", total, want)
			}
			var maxRev, distinct int64
			as[0].db.Raw(`SELECT COALESCE(MAX(revision), 0) FROM audit_events`).Scan(&maxRev)
			as[0].db.Raw(`SELECT COUNT(DISTINCT revision) FROM audit_events`).Scan(&distinct)
			if maxRev != total || distinct != total {
				t.Fatalf("revisions: max %d, %d distinct, %d events: want 1..%d", maxRev, distinct, total, total)
			}
		})
	}
}
