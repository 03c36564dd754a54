package console

import (
	"testing"

	"github.com/ipledger/ipledger/allocator"
)

// TestSearchMatchedNamesTheField: the "Matched" text of a search hit
// names the field that holds the text typed — a host found by part of its
// BMC MAC says BMC MAC, not its chassis serial; a DPU found by part of its
// BMC MAC or of its machine_id says so — for exact and partial matches.
func TestSearchMatchedNamesTheField(t *testing.T) {
	t.Parallel()
	siteEach(t, siteOpts{}, func(t *testing.T, s *site) {
		crSite(t, s)
		if _, err := s.a.Report(s.ctx, allocator.ReportSpec{BmcMacAddress: "0a:00:00:00:00:07", ChassisSerialNumber: "CH-7",
			DPUs: []allocator.ReportDPU{{SerialNumber: "MT0007", BmcMacAddress: "1a:2b:3c:4d:5e:07"}}}); err != nil {
			t.Fatal(err)
		}
		host9, host1 := allocator.HostMachineID("0a:00:00:00:00:09"), allocator.HostMachineID("0a:00:00:00:00:01")
		dpu7, dpu9 := allocator.DPUMachineID("MT0007"), allocator.DPUMachineID("MT0009")
		em2, err := s.a.GetExpectedMachine(s.ctx, "0a:00:00:00:00:02")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			q, id, want string
		}{
			// partial matches of machines without an ExpectedMachine
			{"00:00:09", host9, "BMC MAC 0a:00:00:00:00:09"},
			{"00-00-09", host9, "BMC MAC 0a:00:00:00:00:09"},
			{"h-9", host9, "chassis serial CH-9"},
			{host9[2:20], host9, "machine_id " + host9},
			{"T0009", dpu9, "DPU serial MT0009"},
			{dpu9[3:22], dpu9, "machine_id " + dpu9},
			{"4d:5e:07", dpu7, "DPU BMC MAC 1a:2b:3c:4d:5e:07"},
			// partial matches through an ExpectedMachine
			{"00:00:01", host1, "BMC MAC 0a:00:00:00:00:01"},
			{"ack1-u01", host1, "name rack1-u01"},
			{"CH-1", host1, "chassis serial CH-1"},
			{"T0003", em2.ID, "expected DPU serial MT0003, not ingested yet"},
			// exact matches
			{"0a:00:00:00:00:09", host9, "BMC MAC 0a:00:00:00:00:09"},
			{"1A-2B-3C-4D-5E-07", dpu7, "DPU BMC MAC 1a:2b:3c:4d:5e:07"},
			{"CH-9", host9, "chassis serial CH-9"},
			{"MT0009", dpu9, "DPU serial MT0009"},
			{"rack1-u02", em2.ID, "name rack1-u02, not ingested yet"},
			{host9, host9, "machine_id"},
			{"10.0.0.100", allocator.DPUMachineID("MT0001"), "holds 10.0.0.100 in lo-ip"},
		} {
			r, err := s.c.Search(s.ctx, c.q)
			if err != nil {
				t.Fatalf("search %q: %v", c.q, err)
			}
			found := false
			for _, h := range r.Hits {
				if h.ID == c.id {
					found = true
					if h.Detail != c.want {
						t.Errorf("search %q: %s matched %q, want %q", c.q, h.ID, h.Detail, c.want)
					}
				}
			}
			if !found {
				t.Errorf("search %q: no hit %s in %+v", c.q, c.id, r.Hits)
			}
		}
	})
}
