package allocator

import (
	"fmt"
	"sync"
	"testing"

	"github.com/ipledger/ipledger/models"
)

// wantFleetExact checks that the stored sort names, binding classes and
// fleet counts equal a recount (the check's fleet rules) and that the
// statuses fleet_counts gives equal a walk of every binding, and that the
// pages of each status filter (read through the binding-class indexes)
// hold exactly the walk's DPUs of that status, in its order.
func wantFleetExact(t *testing.T, s *lcSite, step string) {
	t.Helper()
	res := runDBCheck(t, s.ctx, s.db)
	for _, rule := range []string{"fleet_names", "fleet_bindings", "fleet_counts"} {
		if res.Failed(rule) {
			t.Fatalf("%s: %s: %+v", step, rule, res)
		}
	}
	hasPool, err := LoopbackPoolsExist(s.db)
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Kind, State, BindingV4, BindingV6 string
		N                                 int64
	}
	if err := s.db.Raw(`SELECT kind, state, binding_v4, binding_v6, n FROM fleet_counts`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	counted := map[string]int64{}
	countedHosts := map[string]int64{}
	var countedDPUs, countedIncomplete int64
	for _, r := range rows {
		if r.Kind == KindHost {
			countedHosts[r.State] += r.N
			continue
		}
		v4, v6 := BindingClassStatus(r.BindingV4, hasPool[PoolLoopbackV4]), BindingClassStatus(r.BindingV6, hasPool[PoolLoopbackV6])
		counted[v4] += r.N
		counted[v6] += r.N
		countedDPUs += r.N
		if v4 == BindingMissing || v4 == BindingConflict || v6 == BindingMissing || v6 == BindingConflict {
			countedIncomplete += r.N
		}
	}
	want := map[string]int64{}
	var dpus, incomplete int64
	byStatus := map[string][]string{}
	cursor := ""
	for {
		page, err := s.a.ListBindings(s.ctx, BindingFilter{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Items {
			dpus++
			want[b.StatusV4]++
			want[b.StatusV6]++
			byStatus[b.StatusV4] = append(byStatus[b.StatusV4], b.MachineID)
			if b.StatusV6 != b.StatusV4 {
				byStatus[b.StatusV6] = append(byStatus[b.StatusV6], b.MachineID)
			}
			if b.StatusV4 == BindingMissing || b.StatusV4 == BindingConflict || b.StatusV6 == BindingMissing || b.StatusV6 == BindingConflict {
				incomplete++
			}
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if countedDPUs != dpus || countedIncomplete != incomplete {
		t.Fatalf("%s: fleet_counts count %d DPUs (%d incomplete); the walk finds %d (%d incomplete)", step, countedDPUs, countedIncomplete, dpus, incomplete)
	}
	for _, st := range []string{BindingReserved, BindingAutomatic, BindingPending, BindingConflict, BindingMissing, BindingNone} {
		if want[st] != counted[st] {
			t.Fatalf("%s: fleet_counts count %d %s families; the walk finds %d (%v)", step, counted[st], st, want[st], counted)
		}
	}
	for _, st := range []string{BindingReserved, BindingAutomatic, BindingPending, BindingConflict, BindingMissing, BindingNone} {
		var got []string
		cursor := ""
		for {
			page, err := s.a.ListBindings(s.ctx, BindingFilter{Status: st, Limit: 2, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range page.Items {
				got = append(got, b.MachineID)
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		if fmt.Sprint(got) != fmt.Sprint(byStatus[st]) {
			t.Fatalf("%s: status %s lists %v; the walk finds %v", step, st, got, byStatus[st])
		}
	}
	var hosts []models.Machine
	if err := s.db.Where("kind = ?", KindHost).Find(&hosts).Error; err != nil {
		t.Fatal(err)
	}
	byState := map[string]int64{}
	for _, h := range hosts {
		byState[h.State]++
	}
	for _, st := range []string{StateReady, StateDecommissioned} {
		if byState[st] != countedHosts[st] {
			t.Fatalf("%s: fleet_counts count %d %s hosts; there are %d", step, countedHosts[st], st, byState[st])
		}
	}
}

// sortName is the stored sort name of a machine.
func (s *lcSite) sortName(id string) string {
	s.t.Helper()
	var m models.Machine
	if err := s.db.Where("machine_id = ?", id).Take(&m).Error; err != nil {
		s.t.Fatal(err)
	}
	return deref(m.SortName)
}

// TestFleetCountsFollowEveryWrite makes each kind of write that changes a
// counted state and checks the counts, the binding classes and the sort
// names against a recount after each.
func TestFleetCountsFollowEveryWrite(t *testing.T) {
	t.Parallel()
	lcEach(t, lcOpts{}, func(t *testing.T, s *lcSite) {
		wantFleetExact(t, s, "empty")
		emA := s.em(macA, lcDPU{"S1", "10.0.0.150", "fd00:1::50"}, lcDPU{serial: "S2"})
		s.report(macA, "S1", "S2")
		wantFleetExact(t, s, "report: one reserved, one automatic DPU")
		if got := s.sortName(HostMachineID(macA)); got != "chs-"+macA {
			t.Fatalf("sort name without a metadata name = %q", got)
		}
		if err := s.db.Model(&models.ExpectedMachine{}).Where("id = ?", emA).Update("metadata_name", "Rack7-U12").Error; err != nil {
			t.Fatal(err)
		}
		if got := s.sortName(HostMachineID(macA)); got != "rack7-u12" {
			t.Fatalf("sort name after naming the ExpectedMachine = %q", got)
		}
		s.setReservation("S1", "10.0.0.160")
		wantFleetExact(t, s, "reservation edited under an active DPU: pending")
		if _, _, err := s.a.Allocate(s.ctx, PoolLoopbackV4, Owner{"network", "squatter"}, "10.0.0.170"); err != nil {
			t.Fatal(err)
		}
		s.addDPU(emA, 2, lcDPU{"S3", "10.0.0.170", ""})
		s.report(macA, "S1", "S2", "S3")
		wantFleetExact(t, s, "reserved value held by another: conflict")
		s.report(macB, "S4")
		s.decommission(HostMachineID(macB))
		wantFleetExact(t, s, "decommission")
		s.delete(HostMachineID(macB), false)
		wantFleetExact(t, s, "delete a decommissioned host")
		if err := s.db.Where("id = ?", emA).Delete(&models.ExpectedMachine{}).Error; err != nil {
			t.Fatal(err)
		}
		if got := s.sortName(HostMachineID(macA)); got != "chs-"+macA {
			t.Fatalf("sort name after deleting the ExpectedMachine = %q", got)
		}
		wantFleetExact(t, s, "ExpectedMachine deleted")
		s.delete(HostMachineID(macA), true)
		wantFleetExact(t, s, "force delete")
		s.report(macC, "S5")
		wantFleetExact(t, s, "new host after the others left")
	})
}

// TestFleetCountsConcurrentWriters reports, decommissions and edits
// reservations from several goroutines at once; the counts equal a
// recount afterwards.
func TestFleetCountsConcurrentWriters(t *testing.T) {
	t.Parallel()
	lcEach(t, lcOpts{autoV4: [2]string{"10.0.0.1", "10.0.0.99"}}, func(t *testing.T, s *lcSite) {
		for i := 0; i < 8; i++ {
			s.em(fmt.Sprintf("0a:00:00:00:02:%02x", i), lcDPU{fmt.Sprintf("CR%02d", i), fmt.Sprintf("10.0.0.%d", 100+i), ""})
		}
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 6; i++ {
					mac := fmt.Sprintf("0a:00:00:00:01:%02x", g*6+i)
					_, err := s.a.Report(s.ctx, ReportSpec{BmcMacAddress: mac, DPUs: []ReportDPU{{SerialNumber: fmt.Sprintf("CC%02d", g*6+i)}}})
					if err == nil && i%3 == 2 {
						_, err = s.a.Decommission(s.ctx, HostMachineID(mac))
					}
					errs <- err
				}
			}(g)
		}
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, err := s.a.Report(s.ctx, ReportSpec{BmcMacAddress: fmt.Sprintf("0a:00:00:00:02:%02x", i), DPUs: []ReportDPU{{SerialNumber: fmt.Sprintf("CR%02d", i)}}})
				errs <- err
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("concurrent write: %v", err)
			}
		}
		wantFleetExact(t, s, "after concurrent writers")
	})
}

// TestFleetCountsBrokenFound: a count or class changed behind the
// triggers' back is named by the check.
func TestFleetCountsBrokenFound(t *testing.T) {
	t.Parallel()
	lcEach(t, lcOpts{}, func(t *testing.T, s *lcSite) {
		s.report(macA, "S1")
		if err := s.db.Exec(`UPDATE fleet_counts SET n = n + 5 WHERE kind = 'host'`).Error; err != nil {
			t.Fatal(err)
		}
		if err := s.db.Exec(`UPDATE machines SET sort_name = 'zzz' WHERE kind = 'host'`).Error; err != nil {
			t.Fatal(err)
		}
		res := runDBCheck(t, s.ctx, s.db)
		if !res.Failed("fleet_counts") || !res.Failed("fleet_names") || res.Failed("fleet_bindings") {
			t.Fatalf("findings: %+v", res)
		}
	})
}

// TestFleetCountsWithoutV6Pool: without lo-ip-v6 a DPU's IPv6 family is
// none, not missing, and the DPU is complete.
func TestFleetCountsWithoutV6Pool(t *testing.T) {
	t.Parallel()
	lcEach(t, lcOpts{noV6: true}, func(t *testing.T, s *lcSite) {
		s.report(macA, "S1", "S2")
		wantFleetExact(t, s, "no IPv6 pool")
		var n int64
		if err := s.db.Raw(`SELECT COALESCE(SUM(n), 0) FROM fleet_counts WHERE kind = 'dpu' AND binding_v6 = 'unbound'`).Scan(&n).Error; err != nil || n != 2 {
			t.Fatalf("DPUs without an IPv6 value: %d %v", n, err)
		}
	})
}
