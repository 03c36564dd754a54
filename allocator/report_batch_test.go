package allocator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// reportsQueued holds the report leader back while n reports queue, then
// lets one leader run them all as batches.
func reportsQueued(t *testing.T, a *Allocator, n int, send func(i int)) {
	t.Helper()
	// No leader starts until the queue is full. A leader of earlier
	// reports may still be on its way out (it clears running when it
	// finds the queue empty), so wait for it to leave first.
	for deadline := time.Now().Add(10 * time.Second); ; {
		a.qmu.Lock()
		if !a.reports.running {
			a.reports.running = true
			a.qmu.Unlock()
			break
		}
		a.qmu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("the previous report leader did not finish")
		}
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); send(i) }(i)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		a.qmu.Lock()
		k := len(a.reports.pending)
		a.qmu.Unlock()
		if k == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d reports queued", k, n)
		}
		time.Sleep(time.Millisecond)
	}
	go a.drainReports()
	wg.Wait()
}

// Group commit of reports: queued reports run in one transaction, each
// with exactly the outcome it has alone — a refused one (a decommissioned
// host, 409) answers alone and writes nothing while the others commit;
// every DPU gets one value per family, none twice; each report's audit
// events carry its own actor and request id. A batch whose transaction
// fails runs its reports again one by one, with the same outcome.
func TestReportBatches(t *testing.T) {
	t.Parallel()
	for _, failBatch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch fails=%t", failBatch), func(t *testing.T) {
			fndEach(t, func(t *testing.T, f *fnd) {
				f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.200", true), rng("10.0.1.0", "10.0.1.255", false))
				f.mkPool(PoolLoopbackV6, "ipv6", 0, rng("fd00::1", "fd00::ff", true))
				f.declare("MT-R-3-0", "10.0.1.7", "")
				if _, err := f.a.Report(f.ctx, ReportSpec{BmcMacAddress: "02:00:00:00:00:63", DPUs: []ReportDPU{{SerialNumber: "MT-GONE"}}}); err != nil {
					t.Fatal(err)
				}
				if _, err := f.a.Decommission(f.ctx, HostMachineID("02:00:00:00:00:63")); err != nil {
					t.Fatal(err)
				}
				sizes := []int{}
				var mu sync.Mutex
				f.a.testHookReportBatchFail = func(n int) error {
					mu.Lock()
					defer mu.Unlock()
					sizes = append(sizes, n)
					if failBatch {
						return errors.New("injected batch failure")
					}
					return nil
				}
				defer func() { f.a.testHookReportBatchFail = nil }()
				const n = 20
				results := make([]*IngestResult, n+1)
				errs := make([]error, n+1)
				reportsQueued(t, f.a, n+1, func(i int) {
					ctx := audit.WithActor(context.Background(), fmt.Sprintf("client-%d", i), fmt.Sprintf("req-%d", i))
					spec := ReportSpec{BmcMacAddress: fmt.Sprintf("02:00:00:00:00:%02x", i),
						DPUs: []ReportDPU{{SerialNumber: fmt.Sprintf("MT-R-%d-0", i)}, {SerialNumber: fmt.Sprintf("MT-R-%d-1", i)}}}
					if i == n {
						spec = ReportSpec{BmcMacAddress: "02:00:00:00:00:63", DPUs: []ReportDPU{{SerialNumber: "MT-GONE"}}}
					}
					results[i], errs[i] = f.a.Report(ctx, spec)
				})
				if len(sizes) == 0 || sizes[0] != maxReportBatch && sizes[0] != n+1 {
					t.Fatalf("batch sizes %v: the queued reports did not run as one batch", sizes)
				}
				testkit.WantCode(t, errs[n], fault.CodeConflict, "", "decommissioned")
				seen := map[string]string{}
				for i := 0; i < n; i++ {
					if errs[i] != nil {
						t.Fatalf("report %d: %v", i, errs[i])
					}
					if len(results[i].Incomplete) != 0 || len(results[i].Machines) != 1 || len(results[i].Machines[0].DPUs) != 2 {
						t.Fatalf("report %d: %+v", i, results[i])
					}
					for _, d := range results[i].Machines[0].DPUs {
						nc := d.NetworkConfig
						for _, v := range []*string{nc.LoopbackIP, nc.LoopbackIPv6} {
							if v == nil {
								t.Fatalf("report %d DPU %s has no loopback: %+v", i, d.SerialNumber, nc)
							}
							if other, dup := seen[*v]; dup {
								t.Fatalf("%s given to %s and %s", *v, other, d.SerialNumber)
							}
							seen[*v] = d.SerialNumber
						}
						if d.SerialNumber == "MT-R-3-0" && deref(nc.LoopbackIP) != "10.0.1.7" {
							t.Fatalf("reserved DPU got %s, want its reservation 10.0.1.7", deref(nc.LoopbackIP))
						}
					}
					var evs []models.AuditEvent
					f.db.Where("action = ? AND object_id = ?", "machine.create", HostMachineID(fmt.Sprintf("02:00:00:00:00:%02x", i))).Find(&evs)
					if len(evs) != 1 || evs[0].Actor != fmt.Sprintf("client-%d", i) || evs[0].RequestID != fmt.Sprintf("req-%d", i) {
						t.Fatalf("report %d: host creation events %+v, want one by its own actor and request id", i, evs)
					}
				}
				if n := f.countRows(&models.Machine{}, "serial_number = ?", "MT-GONE"); n != 1 {
					t.Fatalf("the refused report's DPU: %d rows", n)
				}
				f.checkRunEnds(PoolLoopbackV4)
				f.checkRunEnds(PoolLoopbackV6)
			})
		})
	}
}
