package console

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
)

// TestHostsListedByName: the console's host list is ordered by the name it
// shows (ExpectedMachine name, else chassis serial, else BMC MAC; in lower
// case), machine_id breaking ties, keyset-paginated without repeating or
// skipping a host across pages of every size; a DPU without a host is
// never a host row but is listed apart; a forged cursor is 422.
func TestHostsListedByName(t *testing.T) {
	t.Parallel()
	siteEach(t, siteOpts{autoV4: [2]string{"10.0.0.1", "10.0.0.60"}}, func(t *testing.T, s *site) {
		// Names chosen so that machine_id order scatters them; two hosts
		// share a name (the tie goes to machine_id); one host has no
		// ExpectedMachine (named by chassis serial), one upper-cased.
		names := []string{"r01-u11", "r02-u14", "r01-u12", "R01-u13", "r01-u12", "r03-u01", "r01-u02"}
		for i, n := range names {
			mac := fmt.Sprintf("0a:00:00:00:01:%02x", i)
			if _, err := s.a.CreateExpectedMachine(s.ctx, allocator.ExpectedMachineSpec{BmcMacAddress: mac, ChassisSerialNumber: fmt.Sprintf("CH-%d", i),
				Metadata: &allocator.Metadata{Name: n}}); err != nil {
				t.Fatal(err)
			}
			s.report(mac, fmt.Sprintf("MTN%04d", i))
		}
		if _, err := s.a.Report(s.ctx, allocator.ReportSpec{BmcMacAddress: "0a:00:00:00:01:99", ChassisSerialNumber: "r01-u05",
			DPUs: []allocator.ReportDPU{{SerialNumber: "MTN0099"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.a.Discover(s.ctx, allocator.DiscoverSpec{SerialNumber: "MTLONE01"}); err != nil {
			t.Fatal(err)
		}
		want := append([]string{"r01-u05"}, names...)
		sort.Slice(want, func(i, j int) bool { return strings.ToLower(want[i]) < strings.ToLower(want[j]) })

		for _, limit := range []int{1, 2, 3, 100} {
			var got []string
			seen := map[string]bool{}
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 20 {
					t.Fatalf("limit %d: the pages never end", limit)
				}
				page, err := s.c.ListHostsByName(s.ctx, allocator.MachineFilter{Limit: limit, Cursor: cursor})
				if err != nil {
					t.Fatalf("limit %d: %v", limit, err)
				}
				for _, m := range page.Items {
					if m.Kind != allocator.KindHost {
						t.Errorf("limit %d: a %s (%s) is listed as a host", limit, m.Kind, m.Name)
					}
					if seen[m.MachineID] {
						t.Errorf("limit %d: %s listed twice", limit, m.Name)
					}
					seen[m.MachineID] = true
					got = append(got, m.Name)
				}
				if page.NextCursor == "" {
					break
				}
				cursor = page.NextCursor
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("limit %d: hosts listed as\n %v\nwant\n %v", limit, got, want)
			}
		}

		dpus, more, err := s.c.ListHostlessDPUs(s.ctx, "", 10)
		if err != nil || more || len(dpus) != 1 || dpus[0].SerialNumber != "MTLONE01" || dpus[0].Kind != allocator.KindDPU {
			t.Errorf("host-less DPUs: %+v more=%v err=%v", dpus, more, err)
		}
		_, err = s.c.ListHostsByName(s.ctx, allocator.MachineFilter{Cursor: "eA.fm100htnotanid"})
		testkit.WantCode(t, err, fault.CodeInvalid, "", "cursor")
	})
}
