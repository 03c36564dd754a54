package allocator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// Callers of a report batch that leave: one whose context ends before the
// batch claims its report gets 503 and nothing of its report is written,
// while the others commit; once claimed, a report's answer is its
// outcome — a 200 is stored, a 503 wrote nothing — however the deadlines
// of the batch's callers fall.
func TestReportBatchCallersLeaving(t *testing.T) {
	t.Parallel()
	mac := func(i int) string { return fmt.Sprintf("02:00:00:00:10:%02x", i) }
	spec := func(i int) ReportSpec { return specOf(mac(i), fmt.Sprintf("L-%d", i)) }
	stored := func(f *fnd, i int) bool {
		return f.countRows(&models.Machine{}, "machine_id IN ?", []string{HostMachineID(mac(i)), DPUMachineID(fmt.Sprintf("L-%d", i))}) == 2
	}
	t.Run("before the claim", func(t *testing.T) {
		fndEach(t, func(t *testing.T, f *fnd) {
			f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.99", true))
			const n = 8
			ctxs := make([]context.Context, n)
			cancels := make([]context.CancelFunc, n)
			for i := range ctxs {
				ctxs[i], cancels[i] = context.WithCancel(f.ctx)
			}
			errs := make([]error, n)
			f.a.qmu.Lock()
			f.a.reports.running = true
			f.a.qmu.Unlock()
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) { defer wg.Done(); _, errs[i] = f.a.Report(ctxs[i], spec(i)) }(i)
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				f.a.qmu.Lock()
				k := len(f.a.reports.pending)
				f.a.qmu.Unlock()
				if k == n {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("reports did not queue")
				}
			}
			for i := 0; i < n; i += 2 {
				cancels[i]()
			}
			go f.a.drainReports()
			wg.Wait()
			for i := 0; i < n; i++ {
				if i%2 == 0 {
					testkit.WantCode(t, errs[i], fault.CodeUnavailable, "")
					if f.countRows(&models.Machine{}, "machine_id = ?", HostMachineID(mac(i))) != 0 {
						t.Fatalf("report %d left before its batch, yet its host is stored", i)
					}
					continue
				}
				if errs[i] != nil || !stored(f, i) {
					t.Fatalf("report %d: %v, stored %t", i, errs[i], stored(f, i))
				}
			}
			f.checkRunEnds(PoolLoopbackV4)
		})
	})
	for _, tc := range []struct {
		name     string
		deadline []bool // which callers have a 50 ms deadline
	}{{"one caller without a deadline", []bool{true, false, true}}, {"every caller with a deadline", []bool{true, true, true}}} {
		t.Run(tc.name, func(t *testing.T) {
			fndEach(t, func(t *testing.T, f *fnd) {
				f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.99", true))
				f.a.testHookReportBatchFail = func(int) error { time.Sleep(150 * time.Millisecond); return nil }
				defer func() { f.a.testHookReportBatchFail = nil }()
				n := len(tc.deadline)
				errs := make([]error, n)
				reportsQueued(t, f.a, n, func(i int) {
					ctx := f.ctx
					if tc.deadline[i] {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
						defer cancel()
					}
					_, errs[i] = f.a.Report(ctx, spec(i))
				})
				for i := 0; i < n; i++ {
					switch {
					case errs[i] == nil && !stored(f, i):
						t.Fatalf("report %d was answered 200 but is not stored", i)
					case errs[i] != nil:
						testkit.WantCode(t, errs[i], fault.CodeUnavailable, "")
						if f.countRows(&models.Machine{}, "machine_id = ?", HostMachineID(mac(i))) != 0 {
							t.Fatalf("report %d was answered %v, yet its host is stored", i, errs[i])
						}
						if !tc.deadline[i] {
							t.Fatalf("report %d has no deadline, yet: %v", i, errs[i])
						}
					}
				}
				f.checkRunEnds(PoolLoopbackV4)
			})
		})
	}
}
