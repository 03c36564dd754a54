package console

import (
	"testing"

	"github.com/ipledger/ipledger/allocator"
)

// The console's search finds a DPU by its BMC MAC in every spelling
// ident.ParseMAC accepts and in Cisco's and bare hex, as one exact hit
// (the console opens its page),
// and by part of it in any notation (':', '-', Cisco's '.', bare hex, on
// an octet boundary or inside one); the host's BMC MAC still finds the
// host.
func TestSearchFindsDPUByBMCMAC(t *testing.T) {
	t.Parallel()
	siteEach(t, siteOpts{}, func(t *testing.T, s *site) {
		_, err := s.a.Report(s.ctx, allocator.ReportSpec{BmcMacAddress: "02:00:00:00:00:01", DPUs: []allocator.ReportDPU{
			{SerialNumber: "S-1", BmcMacAddress: "1a:2b:3c:4d:5e:6f"}, {SerialNumber: "S-2"}}})
		if err != nil {
			t.Fatal(err)
		}
		dpu := allocator.DPUMachineID("S-1")
		for _, q := range []string{"1a:2b:3c:4d:5e:6f", "1A:2B:3C:4D:5E:6F", "1a-2b-3c-4d-5e-6f", " 1A-2b-3C-4d-5E-6f ", "1a2b.3c4d.5e6f", "1A2B3C4D5E6F"} {
			r, err := s.c.Search(s.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			h := r.Redirect()
			if h == nil || h.Kind != HitDPU || h.ID != dpu || h.Name != "S-1" {
				t.Errorf("search %q: hits %+v, want the one DPU S-1", q, r.Hits)
			}
		}
		for _, q := range []string{"3c-4d-5e", "3C:4D", "4d:5e:6f", "c-4d-5", "C-4D-5", "3c4d.5", "3C4D5E", "c4d5", "b-3c-4", "2b3c.4d5e"} {
			r, err := s.c.Search(s.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Hits) != 1 || r.Hits[0].ID != dpu || r.Hits[0].Detail != "DPU BMC MAC 1a:2b:3c:4d:5e:6f" {
				t.Errorf("search %q: hits %+v, want DPU S-1 by its BMC MAC", q, r.Hits)
			}
		}
		r, err := s.c.Search(s.ctx, "02-00-00-00-00-01")
		if err != nil {
			t.Fatal(err)
		}
		if h := r.Redirect(); h == nil || h.Kind != HitHost || h.ID != allocator.HostMachineID("02:00:00:00:00:01") {
			t.Errorf("host BMC MAC: hits %+v", r.Hits)
		}
	})
}
