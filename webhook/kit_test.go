package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/kernel"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/models/dbtest"
)

// proc is one server process of a test: its allocator, feed and
// webhooks, wired as serve wires them.
type proc struct {
	db    *gorm.DB
	a     *allocator.Allocator
	feed  *feed.Feed
	hooks *Service
}

func newProc(db *gorm.DB) *proc {
	fd := feed.New(db, feed.Options{})
	hooks := New(db, Options{OnCommit: fd.Committed})
	fd.SetDeliveries(hooks)
	return &proc{db: db, a: allocator.New(db, allocator.Options{OnCommit: fd.Committed}), feed: fd, hooks: hooks}
}

// fnd is one test's process over its own database.
type fnd struct {
	*proc
	t   *testing.T
	ctx context.Context
}

func (f *fnd) mkPool(name, typ string, plen int, ranges ...allocator.RangeSpec) *allocator.Pool {
	f.t.Helper()
	p, err := f.a.CreatePool(f.ctx, allocator.PoolSpec{Name: name, Type: typ, DelegatePrefixLen: plen, Ranges: ranges})
	if err != nil {
		f.t.Fatalf("create pool %s: %v", name, err)
	}
	return p
}

func own(id string) allocator.Owner { return allocator.Owner{Type: "machine", ID: id} }

// alloc allocates and fails the test on error.
func (f *fnd) alloc(pool, owner, requested string) allocator.Allocation {
	f.t.Helper()
	al, _, err := f.a.Allocate(f.ctx, pool, own(owner), requested)
	if err != nil {
		f.t.Fatalf("allocate %s for %s (requested %q): %v", pool, owner, requested, err)
	}
	return al
}

func (f *fnd) countRows(model any, where string, args ...any) int64 {
	f.t.Helper()
	var n int64
	if err := f.db.Model(model).Where(where, args...).Count(&n).Error; err != nil {
		f.t.Fatal(err)
	}
	return n
}

func rng(first, last string, auto bool) allocator.RangeSpec {
	return allocator.RangeSpec{First: first, Last: last, AutoAssign: &auto}
}

func concurrencyURL(t *testing.T, d models.Dialect) string {
	if d == models.Postgres {
		return dbtest.NewPostgresURL(t)
	}
	return dbtest.NewSQLiteURL(t)
}

// processes opens n independent handles (own connection pools) on one
// database: the in-process picture of n server processes.
func processes(t *testing.T, u string, n int) []*proc {
	out := make([]*proc, n)
	for i := range out {
		var db *gorm.DB
		if i == 0 {
			db = dbtest.OpenURL(t, u)
		} else {
			var err error
			db, _, err = models.Open(u)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := db.DB()
			t.Cleanup(func() { s.Close() })
		}
		out[i] = newProc(db)
	}
	return out
}

// wantCode fails the test unless err is a *kernel.Error with this code
// whose message mentions each of msgs.
func wantCode(t *testing.T, err error, code kernel.Code, msgs ...string) *kernel.Error {
	t.Helper()
	e, ok := kernel.AsError(err)
	if !ok {
		t.Fatalf("want %s error, got %v", code, err)
	}
	if e.Code != code {
		t.Fatalf("want code %s, got %s (%s)", code, e.Code, e.Message)
	}
	for _, m := range msgs {
		if !strings.Contains(e.Message, m) {
			t.Fatalf("error %q does not mention %q", e.Message, m)
		}
	}
	return e
}

// runFeed starts fd's sequencer for the test's lifetime with a short
// fallback poll.
func runFeed(t *testing.T, fd *feed.Feed) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := fd.RunFeed(ctx, feed.FeedOptions{Poll: 50 * time.Millisecond})
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}
