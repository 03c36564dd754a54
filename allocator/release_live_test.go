package allocator

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// A loopback that an ingested DPU's network config carries is never
// released by hand: 409 conflict naming the DPU's serial and machine_id,
// nothing changes, and the next automatic allocation does not hand it out.
func TestReleaseRefusesLiveLoopback(t *testing.T) {
	t.Parallel()
	lcEach(t, lcOpts{}, func(t *testing.T, s *lcSite) {
		s.em(macA)
		s.report(macA, "MT-LIVE")
		v4, v6 := s.loopbacks("MT-LIVE")
		mid := DPUMachineID("MT-LIVE")
		for pool, v := range map[string]string{PoolLoopbackV4: v4, PoolLoopbackV6: v6} {
			err := s.a.Release(s.ctx, pool, v, Owner{Type: "machine", ID: mid})
			e, ok := fault.AsError(err)
			if !ok || e.Code != fault.CodeConflict || !strings.Contains(e.Message, "MT-LIVE") || !strings.Contains(e.Message, mid) {
				t.Fatalf("release of live %s %s: %v", pool, v, err)
			}
		}
		s.wantLoopbacks("MT-LIVE", v4, v6)
		// The next automatic allocation does not get the DPU's address.
		al, _, err := s.a.Allocate(s.ctx, PoolLoopbackV4, Owner{Type: "machine", ID: "other"}, "")
		if err != nil || al.Value == v4 {
			t.Fatalf("next allocation %v %v (DPU holds %s)", al.Value, err, v4)
		}
		// A value the owner holds that no network config carries is
		// released as before.
		if err := s.a.Release(s.ctx, PoolLoopbackV4, al.Value, Owner{Type: "machine", ID: "other"}); err != nil {
			t.Fatal(err)
		}
		// Decommission and delete release it.
		host := s.report(macA, "MT-LIVE").Machines[0].MachineID
		s.decommission(host)
		s.delete(host, false)
		if got := s.heldBy(PoolLoopbackV4, mid); got != "" {
			t.Fatalf("after delete the DPU still holds %q", got)
		}
	})
}

// A hand release racing a report of the same DPU, from two goroutines, on
// both databases: whichever commits first, the DPU's network config never
// carries a value that is not allocated to it, and a release that
// succeeded came before the report recorded the value.
func TestReleaseRacingReport(t *testing.T) {
	t.Parallel()
	lcEach(t, lcOpts{autoV4: [2]string{"10.0.0.1", "10.0.0.99"}}, func(t *testing.T, s *lcSite) {
		for i := 0; i < 12; i++ {
			mac := fmt.Sprintf("0a:00:00:00:77:%02x", i)
			serial := fmt.Sprintf("MT-RACE-%d", i)
			mid := DPUMachineID(serial)
			s.em(mac)
			// The operator took a value for the DPU's machine id by hand
			// before ingestion; ingestion finds it (idempotent by owner).
			held, _, err := s.a.Allocate(s.ctx, PoolLoopbackV4, Owner{Type: "machine", ID: mid}, "")
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var relErr, repErr error
			start := make(chan struct{})
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				relErr = s.a.Release(s.ctx, PoolLoopbackV4, held.Value, Owner{Type: "machine", ID: mid})
			}()
			go func() {
				defer wg.Done()
				<-start
				_, repErr = s.a.Report(s.ctx, ReportSpec{BmcMacAddress: mac, ChassisSerialNumber: "CHS-" + mac, DPUs: []ReportDPU{{SerialNumber: serial}}})
			}()
			close(start)
			wg.Wait()
			if repErr != nil {
				t.Fatalf("report: %v", repErr)
			}
			if relErr != nil {
				if e, ok := fault.AsError(relErr); !ok || e.Code != fault.CodeConflict || !strings.Contains(e.Message, serial) {
					t.Fatalf("release lost the race with an unexpected error: %v", relErr)
				}
			}
			nc4, _ := s.loopbacks(serial)
			if nc4 == "" {
				t.Fatalf("%s: no IPv4 loopback after the report", serial)
			}
			row := s.allocationRow(PoolLoopbackV4, nc4)
			if row == nil || deref(row.OwnerID) != mid || row.State != models.StateAllocated {
				t.Fatalf("%s: network config carries %s, allocated as %+v", serial, nc4, row)
			}
			if relErr != nil && nc4 != held.Value {
				t.Fatalf("%s: release refused but the DPU carries %s, not %s", serial, nc4, held.Value)
			}
		}
	})
}
