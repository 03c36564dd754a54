package main

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The writers of the backup drills: each allocates one value after
// another, for owners w<writer>-<n>, and the acknowledgements are logged in
// the order they arrive. A backup taken while they run must hold every
// write acknowledged before it began, and, being one snapshot, a prefix of
// each writer's writes.

// drillAck is one acknowledged write; started numbers the requests in the
// order they were sent.
type drillAck struct {
	owner, value string
	started      int64
}

type drillWriters struct {
	started atomic.Int64
	mu      sync.Mutex
	acks    []drillAck
	stopCh  chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	errs    chan error
}

// startWriters starts n writers calling allocate(owner), which returns the
// acknowledged value.
func startWriters(n int, allocate func(owner string) (string, error)) *drillWriters {
	w := &drillWriters{stopCh: make(chan struct{}), errs: make(chan error, n)}
	for k := 0; k < n; k++ {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-w.stopCh:
					return
				default:
				}
				owner := fmt.Sprintf("w%d-%d", k, i)
				started := w.started.Add(1)
				v, err := allocate(owner)
				if err != nil {
					w.errs <- fmt.Errorf("allocate %s: %w", owner, err)
					return
				}
				w.mu.Lock()
				w.acks = append(w.acks, drillAck{owner, v, started})
				w.mu.Unlock()
			}
		}()
	}
	return w
}

// stop stops the writers and returns the first error one met.
func (w *drillWriters) stop() error {
	w.once.Do(func() { close(w.stopCh) })
	w.wg.Wait()
	select {
	case err := <-w.errs:
		return err
	default:
		return nil
	}
}

func (w *drillWriters) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acks)
}

// acked returns the acknowledgements from the from-th to the count now.
func (w *drillWriters) acked(from int) []drillAck {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]drillAck(nil), w.acks[from:]...)
}

// waitFor waits until n writes are acknowledged.
func (w *drillWriters) waitFor(n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for w.count() < n {
		select {
		case err := <-w.errs:
			return err
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d writes acknowledged after %v, waiting for %d", w.count(), limit, n)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

var drillOwner = regexp.MustCompile(`^w([0-9]+)-([0-9]+)$`)

// checkCopy compares the writers' allocations a copy holds (owner → value)
// with what was acknowledged: every write of before is there with its
// value, and each writer's writes there are 0..k with no gap (a write the
// copy holds was committed before every later write of its writer).
func checkCopy(t *testing.T, copied map[string]string, before []drillAck) {
	t.Helper()
	for _, k := range before {
		if copied[k.owner] != k.value {
			t.Errorf("acknowledged %s → %s before the backup began; the copy has %q", k.owner, k.value, copied[k.owner])
		}
	}
	top := map[int]int{}
	n := map[int]int{}
	for owner := range copied {
		m := drillOwner.FindStringSubmatch(owner)
		if m == nil {
			continue
		}
		wr, _ := strconv.Atoi(m[1])
		i, _ := strconv.Atoi(m[2])
		top[wr] = max(top[wr], i)
		n[wr]++
	}
	for wr, i := range top {
		if n[wr] != i+1 {
			t.Errorf("the copy holds %d writes of writer %d up to its write %d: not one snapshot", n[wr], wr, i)
		}
	}
}
