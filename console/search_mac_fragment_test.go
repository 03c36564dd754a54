package console

import (
	"testing"

	"github.com/ipledger/ipledger/allocator"
)

// TestSearchFindsPartOfAMACWithDashes: the header search finds part of a
// BMC MAC typed with '-' in any case (00-00-02), starting or ending inside
// an octet (0-00-0), in Cisco's groups (0000.0002) or as bare hex
// (000002), as it does with ':' and as the ExpectedMachine list's search
// does; for an ingested record the
// hit is its host, for another the ExpectedMachine, and for a host
// without an ExpectedMachine the host itself.
func TestSearchFindsPartOfAMACWithDashes(t *testing.T) {
	t.Parallel()
	siteEach(t, siteOpts{}, func(t *testing.T, s *site) {
		crSite(t, s)
		em2, err := s.a.GetExpectedMachine(s.ctx, "0a:00:00:00:00:02")
		if err != nil {
			t.Fatal(err)
		}
		host1 := SearchHit{Kind: HitHost, ID: allocator.HostMachineID("0a:00:00:00:00:01")}
		host9 := SearchHit{Kind: HitHost, ID: allocator.HostMachineID("0a:00:00:00:00:09")}
		for q, want := range map[string]SearchHit{
			"00-00-02": {Kind: HitExpectedMachine, ID: em2.ID},
			"00-00-01": host1,
			"0A-00-00": host1,
			"00-00-09": host9,
			// Inside an octet, Cisco's groups, bare hex, any case.
			"0-00-02":        {Kind: HitExpectedMachine, ID: em2.ID},
			"0-00-0":         host1,
			"00-0":           host1,
			"0-0":            host9,
			"0000.0002":      {Kind: HitExpectedMachine, ID: em2.ID},
			"0A00.0000.0009": host9,
			"0.0009":         host9,
			"000002":         {Kind: HitExpectedMachine, ID: em2.ID},
			"00009":          host9,
			"0A0000000001":   host1,
		} {
			r, err := s.c.Search(s.ctx, q)
			if err != nil {
				t.Fatalf("search %q: %v", q, err)
			}
			found := false
			for _, h := range r.Hits {
				found = found || (h.Kind == want.Kind && h.ID == want.ID)
			}
			if !found {
				t.Errorf("search %q: no %s %s in %+v", q, want.Kind, want.ID, r.Hits)
			}
		}
	})
}
