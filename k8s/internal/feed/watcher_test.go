package feed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ipledger/ipledger/k8s/internal/ledger"
)

// script is a feed that answers from a list of steps, then waits.
type script struct {
	mu    sync.Mutex
	head  int64
	steps []func(after int64) ([]ledger.Event, int64, error)
	asked []int64
}

func (s *script) Head(context.Context) (int64, error) { return s.head, nil }

func (s *script) Events(ctx context.Context, after int64, _ time.Duration) ([]ledger.Event, int64, error) {
	s.mu.Lock()
	s.asked = append(s.asked, after)
	if len(s.steps) == 0 {
		s.mu.Unlock()
		<-ctx.Done()
		return nil, after, ctx.Err()
	}
	step := s.steps[0]
	s.steps = s.steps[1:]
	s.mu.Unlock()
	return step(after)
}

// The watcher starts at the head, hands each event on once, resumes from
// the same revision after an error, and after an error that ended asks
// its subscribers to look at everything again (ipledger is back).
func TestWatcherResumesAndResyncsAfterAnOutage(t *testing.T) {
	t.Parallel()
	s := &script{head: 41, steps: []func(int64) ([]ledger.Event, int64, error){
		func(after int64) ([]ledger.Event, int64, error) {
			return []ledger.Event{{Revision: 42, Pool: "p"}}, 42, nil
		},
		func(after int64) ([]ledger.Event, int64, error) { return nil, after, errors.New("connection refused") },
		func(after int64) ([]ledger.Event, int64, error) {
			return []ledger.Event{{Revision: 43, Pool: "p"}}, 43, nil
		},
	}}
	w := New(s, logr.Discard())
	type call struct {
		resync bool
		rev    int64
	}
	calls := make(chan call, 16)
	src := w.Source(func(_ context.Context, resync bool, ev ledger.Event) []reconcile.Request {
		calls <- call{resync, ev.Revision}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := src.Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	want := []call{{true, 0}, {false, 42}, {true, 0}, {false, 43}}
	for i, wc := range want {
		select {
		case got := <-calls:
			if got != wc {
				t.Fatalf("call %d: %+v, want %+v", i, got, wc)
			}
		case <-time.After(time.Minute):
			t.Fatalf("call %d (%+v) never came", i, wc)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.asked) < 3 || s.asked[0] != 41 || s.asked[1] != 42 || s.asked[2] != 42 {
		t.Fatalf("asked after %v, want 41, 42, 42 (the same revision again after the error)", s.asked)
	}
	if w.Revision() != 43 {
		t.Fatalf("revision %d, want 43", w.Revision())
	}
}
