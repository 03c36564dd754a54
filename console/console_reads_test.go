package console

// Tests of the console's read models: names, search, the machine page,
// pending-edit warnings and the wallboard's fleet summary, on SQLite and
// PostgreSQL.

import (
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
)

// crSite: a site with two named ExpectedMachines, one ingested host
// (rack1-u01, DPU MT0001 reserved 10.0.0.100, MT0002 automatic) and one
// not ingested (rack1-u02, DPU MT0003 reserving 10.0.0.103).
func crSite(t *testing.T, s *site) {
	t.Helper()
	str := func(v string) *string { return &v }
	for _, spec := range []allocator.ExpectedMachineSpec{
		{BmcMacAddress: "0a:00:00:00:00:01", ChassisSerialNumber: "CH-1", Metadata: &allocator.Metadata{Name: "rack1-u01"},
			ExpectedDPUs: &[]allocator.ExpectedDPU{{SerialNumber: "MT0001", LoopbackIP: str("10.0.0.100")}, {SerialNumber: "MT0002"}}},
		{BmcMacAddress: "0a:00:00:00:00:02", ChassisSerialNumber: "CH-2", Metadata: &allocator.Metadata{Name: "rack1-u02"},
			ExpectedDPUs: &[]allocator.ExpectedDPU{{SerialNumber: "MT0003", LoopbackIP: str("10.0.0.103")}}},
	} {
		if _, err := s.a.CreateExpectedMachine(s.ctx, spec); err != nil {
			t.Fatalf("create %s: %v", spec.BmcMacAddress, err)
		}
	}
	s.report("0a:00:00:00:00:01", "MT0001", "MT0002")
	// A host without an ExpectedMachine: named by its chassis serial.
	if _, err := s.a.Report(s.ctx, allocator.ReportSpec{BmcMacAddress: "0a:00:00:00:00:09", ChassisSerialNumber: "CH-9",
		DPUs: []allocator.ReportDPU{{SerialNumber: "MT0009"}}}); err != nil {
		t.Fatal(err)
	}
}

func TestNamesFollowTheRule(t *testing.T) {
	t.Parallel()
	if got := allocator.HostName("rack7-u12", "SN1", "1a:1b:1c:1d:1e:1f", "id"); got != "rack7-u12" {
		t.Errorf("name first: %s", got)
	}
	if got := allocator.HostName(" ", "SN1", "1a:1b:1c:1d:1e:1f", "id"); got != "SN1" {
		t.Errorf("chassis serial second: %s", got)
	}
	if got := allocator.HostName("", "", "1a:1b:1c:1d:1e:1f", "id"); got != "1a:1b:1c:1d:1e:1f" {
		t.Errorf("BMC MAC third: %s", got)
	}
	siteEach(t, siteOpts{}, func(t *testing.T, s *site) {
		crSite(t, s)
		page, err := s.a.ListMachines(s.ctx, allocator.MachineFilter{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, m := range page.Items {
			got[m.Name] = m.MachineID
			for _, d := range m.DPUs {
				if d.Name != d.SerialNumber {
					t.Errorf("DPU %s named %q", d.SerialNumber, d.Name)
				}
			}
		}
		if got["rack1-u01"] != allocator.HostMachineID("0a:00:00:00:00:01") || got["CH-9"] != allocator.HostMachineID("0a:00:00:00:00:09") {
			t.Errorf("host names: %v", got)
		}
		b := s.binding("MT0001")
		if b.HostName != "rack1-u01" {
			t.Errorf("binding host name %q", b.HostName)
		}
		// Errors name ExpectedMachines by name and MAC, not by UUID.
		err = s.a.ValidateExpectedMachine(s.ctx, "", allocator.ExpectedMachineSpec{BmcMacAddress: "0a:00:00:00:00:05",
			ExpectedDPUs: &[]allocator.ExpectedDPU{{SerialNumber: "MT0003"}}})
		if err == nil || !strings.Contains(err.Error(), "rack1-u02 (0a:00:00:00:00:02)") {
			t.Errorf("declared-serial error: %v", err)
		}
		// A delete refused for state names the host.
		_, err = s.a.DeleteMachine(s.ctx, allocator.HostMachineID("0a:00:00:00:00:01"), false)
		testkit.WantCode(t, err, fault.CodeConflict, "", "host rack1-u01")
	})
}

func TestSearchFindsEveryKind(t *testing.T) {
	t.Parallel()
	siteEach(t, siteOpts{}, func(t *testing.T, s *site) {
		crSite(t, s)
		host := allocator.HostMachineID("0a:00:00:00:00:01")
		em2, err := s.a.GetExpectedMachine(s.ctx, "0a:00:00:00:00:02")
		if err != nil {
			t.Fatal(err)
		}
		auto2 := s.heldBy(allocator.PoolLoopbackV4, allocator.DPUMachineID("MT0002"))
		for _, c := range []struct {
			q, kind, id string
		}{
			{"0A-00-00-00-00-01", HitHost, host},
			{"0a:00:00:00:00:02", HitExpectedMachine, em2.ID},
			{"MT0001", HitDPU, allocator.DPUMachineID("MT0001")},
			{"mt0001", HitDPU, allocator.DPUMachineID("MT0001")},
			{"MT0003", HitExpectedMachine, em2.ID},
			{"CH-1", HitHost, host},
			{"CH-2", HitExpectedMachine, em2.ID},
			{"RACK1-U01", HitHost, host},
			{"rack1-u02", HitExpectedMachine, em2.ID},
			{em2.ID, HitExpectedMachine, em2.ID},
			{host, HitHost, host},
			{"10.0.0.100", HitDPU, allocator.DPUMachineID("MT0001")},
			{auto2, HitDPU, allocator.DPUMachineID("MT0002")},
			{auto2 + "/32", HitDPU, allocator.DPUMachineID("MT0002")},
			{"10.0.0.103", HitExpectedMachine, em2.ID},
			{"10.0.0.150", HitPool, allocator.PoolLoopbackV4},
			{"lo-ip-v6", HitPool, allocator.PoolLoopbackV6},
		} {
			r, err := s.c.Search(s.ctx, c.q)
			if err != nil {
				t.Fatalf("search %q: %v", c.q, err)
			}
			h := r.Redirect()
			if h == nil || h.Kind != c.kind || h.ID != c.id {
				t.Errorf("search %q: want one exact %s %s, got %+v", c.q, c.kind, c.id, r.Hits)
			}
		}
		// A whole MAC in Cisco's or bare hex notation is the host's MAC
		// too (ident.MACFragments); mixed separators are no MAC at all.
		for _, q := range []string{"0a00.0000.0001", "0A0000000001"} {
			r, err := s.c.Search(s.ctx, q)
			if err != nil {
				t.Fatalf("search %q: %v", q, err)
			}
			if h := r.Redirect(); h == nil || h.Kind != HitHost || h.ID != host {
				t.Errorf("search %q: want one exact host %s, got %+v", q, host, r.Hits)
			}
		}
		r0, err := s.c.Search(s.ctx, "0a-00:00:00:00:01")
		if err != nil {
			t.Fatal(err)
		}
		if h := r0.Redirect(); h != nil && h.Kind == HitHost {
			t.Errorf("search with mixed separators found host %s by MAC", h.ID)
		}
		// A prefix lists every allocation inside it, no redirect.
		r, err := s.c.Search(s.ctx, "10.0.0.0/24")
		if err != nil {
			t.Fatal(err)
		}
		if r.Redirect() != nil || len(r.Hits) < 3 {
			t.Errorf("prefix: %+v", r.Hits)
		}
		// Part of a name lists, never redirects.
		r, err = s.c.Search(s.ctx, "rack1")
		if err != nil {
			t.Fatal(err)
		}
		if r.Redirect() != nil || len(r.Hits) < 2 {
			t.Errorf("partial: %+v", r.Hits)
		}
		r, err = s.c.Search(s.ctx, "no-such-thing")
		if err != nil || len(r.Hits) != 0 {
			t.Errorf("nothing: %+v %v", r, err)
		}
		_, err = s.c.Search(s.ctx, strings.Repeat("x", 201))
		testkit.WantCode(t, err, fault.CodeInvalid, "", "at most 200")
		// Characters, not bytes: 200 accented letters are 400 bytes.
		if _, err = s.c.Search(s.ctx, strings.Repeat("é", 200)); err != nil {
			t.Errorf("200 characters of two bytes each: %v", err)
		}
		_, err = s.c.Search(s.ctx, strings.Repeat("é", 201))
		testkit.WantCode(t, err, fault.CodeInvalid, "", "201 characters long")
		// The allocations filter takes a value or a prefix.
		page, err := s.a.ListAllocations(s.ctx, allocator.PoolLoopbackV4, allocator.AllocationFilter{Value: "10.0.0.0/28"})
		if err != nil || len(page.Items) == 0 {
			t.Fatalf("prefix filter: %v %v", page, err)
		}
		for _, it := range page.Items {
			if !strings.HasPrefix(it.Value, "10.0.0.") {
				t.Errorf("prefix filter let %s through", it.Value)
			}
		}
		page, err = s.a.ListAllocations(s.ctx, allocator.PoolLoopbackV4, allocator.AllocationFilter{Value: "10.0.0.100"})
		if err != nil || len(page.Items) != 1 || page.Items[0].Value != "10.0.0.100" {
			t.Fatalf("value filter: %+v %v", page, err)
		}
		_, err = s.a.ListAllocations(s.ctx, allocator.PoolLoopbackV4, allocator.AllocationFilter{Value: "fd00::/64"})
		testkit.WantCode(t, err, fault.CodeInvalid, "", "family")
		_, err = s.a.ListAllocations(s.ctx, allocator.PoolLoopbackV4, allocator.AllocationFilter{Value: "banana"})
		testkit.WantCode(t, err, fault.CodeInvalid, "", "banana")
	})
}

func TestMachineDetailAndPendingWarning(t *testing.T) {
	t.Parallel()
	siteEach(t, siteOpts{}, func(t *testing.T, s *site) {
		crSite(t, s)
		host := allocator.HostMachineID("0a:00:00:00:00:01")
		d, err := s.c.MachineDetail(s.ctx, host)
		if err != nil {
			t.Fatal(err)
		}
		if d.ExpectedMachine == nil || d.ExpectedMachine.Metadata.Name != "rack1-u01" || d.ConfirmPhrase != "rack1-u01" {
			t.Fatalf("detail EM %+v phrase %q", d.ExpectedMachine, d.ConfirmPhrase)
		}
		if len(d.Bindings) != 2 || d.Bindings[allocator.DPUMachineID("MT0001")].StatusV4 != allocator.BindingReserved {
			t.Errorf("bindings %+v", d.Bindings)
		}
		// Two DPUs × two families hold four values.
		if len(d.Values) != 4 {
			t.Errorf("values %+v", d.Values)
		}
		var sawAlloc, sawMachine bool
		for _, e := range d.History {
			sawAlloc = sawAlloc || e.ObjectType == "allocation"
			sawMachine = sawMachine || e.ObjectType == "machine"
		}
		if !sawAlloc || !sawMachine {
			t.Errorf("history lacks allocation or machine events: %d events", len(d.History))
		}
		dpu, err := s.c.MachineDetail(s.ctx, "MT0002")
		if err != nil || dpu.Host == nil || dpu.Host.Name != "rack1-u01" || len(dpu.Values) != 2 {
			t.Fatalf("DPU detail %+v %v", dpu, err)
		}
		noEM, err := s.c.MachineDetail(s.ctx, "0a:00:00:00:00:09")
		if err != nil || noEM.ConfirmPhrase != "0a:00:00:00:00:09" {
			t.Fatalf("host without EM: phrase %q %v", noEM.ConfirmPhrase, err)
		}
		if !allocator.ConfirmMatches(&noEM.Machine, "0A-00-00-00-00-09") || allocator.ConfirmMatches(&noEM.Machine, "CH-9") {
			t.Error("a MAC phrase matches in any spelling, and nothing else")
		}
		if !allocator.ConfirmMatches(&d.Machine, host) || !allocator.ConfirmMatches(&d.Machine, " rack1-u01 ") ||
			allocator.ConfirmMatches(&d.Machine, noEM.Machine.MachineID) || allocator.ConfirmMatches(&d.Machine, host[:20]) {
			t.Error("a named host is confirmed by its name or its own whole machine_id, nothing else")
		}

		// Pending: moving MT0001's reservation while it is active; MT0002
		// gaining one different from its automatic value; MT0003 is not
		// ingested (no warning).
		str := func(v string) *string { return &v }
		em, _ := s.a.GetExpectedMachine(s.ctx, "0a:00:00:00:00:01")
		spec := allocator.ExpectedMachineSpec{BmcMacAddress: em.BmcMacAddress, ExpectedDPUs: &[]allocator.ExpectedDPU{
			{SerialNumber: "MT0001", LoopbackIP: str("10.0.0.110")},
			{SerialNumber: "MT0002", LoopbackIP: str("10.0.0.111"), LoopbackIPv6: str("not-an-ip")},
			{SerialNumber: "MT0003", LoopbackIP: str("10.0.0.103")},
		}}
		ps, err := s.c.PendingLoopbacks(s.ctx, em.ID, spec)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 2 || ps[0].Field != "expected_dpus[0].loopback_ip" || ps[0].Active != "10.0.0.100" || ps[0].Already ||
			ps[1].Field != "expected_dpus[1].loopback_ip" || !strings.Contains(ps[0].Message, "active with 10.0.0.100 and keeps it") || !strings.Contains(ps[0].Message, allocator.PendingRemedy) {
			t.Fatalf("pending %+v", ps)
		}
		// Keeping the active value warns of nothing; no expected_dpus
		// keeps the stored list.
		(*spec.ExpectedDPUs)[0].LoopbackIP = str("10.0.0.100")
		(*spec.ExpectedDPUs)[1].LoopbackIP = nil
		if ps, err = s.c.PendingLoopbacks(s.ctx, em.ID, spec); err != nil || len(ps) != 0 {
			t.Fatalf("unchanged: %+v %v", ps, err)
		}
		if ps, err = s.c.PendingLoopbacks(s.ctx, em.ID, allocator.ExpectedMachineSpec{BmcMacAddress: em.BmcMacAddress}); err != nil || len(ps) != 0 {
			t.Fatalf("absent list: %+v %v", ps, err)
		}
	})
}

func TestFleetSummary(t *testing.T) {
	t.Parallel()
	siteEach(t, siteOpts{}, func(t *testing.T, s *site) {
		crSite(t, s)
		s.decommission(allocator.HostMachineID("0a:00:00:00:00:09"))
		pools, err := s.a.ListPools(s.ctx)
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.c.Fleet(s.ctx, pools, 5)
		if err != nil {
			t.Fatal(err)
		}
		if f.Hosts != 2 || f.HostsByState[allocator.StateReady] != 1 || f.HostsByState[allocator.StateDecommissioned] != 1 {
			t.Errorf("hosts %d %v", f.Hosts, f.HostsByState)
		}
		if f.DPUs != 3 || f.DPUsComplete != 3 || f.Bindings[allocator.BindingReserved] != 1 || f.Bindings[allocator.BindingAutomatic] != 5 {
			t.Errorf("dpus %d complete %d bindings %v", f.DPUs, f.DPUsComplete, f.Bindings)
		}
		if len(f.Forecasts) != 2 {
			t.Fatalf("forecasts %+v", f.Forecasts)
		}
		// Every value was taken today: the 30-day rate is positive and
		// the days left are the free values at that rate.
		for _, fc := range f.Forecasts {
			if fc.PerDay <= 0 || fc.DaysLeft < 0 || fc.ExplicitUsed < 0 {
				t.Errorf("forecast %s: %+v", fc.Pool.Name, fc)
			}
		}
		s.delete(allocator.HostMachineID("0a:00:00:00:00:01"), true)
		f, err = s.c.Fleet(s.ctx, pools, 5)
		if err != nil || len(f.ForceDeletes) != 1 || f.ForceDeletes[0].ObjectID != allocator.HostMachineID("0a:00:00:00:00:01") {
			t.Fatalf("force deletes %+v %v", f.ForceDeletes, err)
		}
	})
}
