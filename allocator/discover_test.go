package allocator

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
)

// Direct discovery of a DPU under a host — a known host, an unknown BMC MAC,
// or a DPU that an earlier report placed under its host — answers with the
// host carrying the DPU (a regression: it used to fail with "record not
// found" because the host look-up reused the DPU's primary key).
func TestDiscoverUnderHost(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a := New(db, Options{})
		ctx := context.Background()
		if _, err := a.LoadPools(ctx, []PoolSpec{{Name: "lo-ip", Type: "ipv4", Ranges: []RangeSpec{rng("10.0.0.1", "10.0.0.99", true)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Report(ctx, ReportSpec{BmcMacAddress: "aa:00:00:00:00:02", DPUs: []ReportDPU{{SerialNumber: "C1"}}}); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name string
			spec DiscoverSpec
			host string
		}{
			{"known host", DiscoverSpec{SerialNumber: "C9", HostBmcMacAddress: "AA-00-00-00-00-02"}, HostMachineID("aa:00:00:00:00:02")},
			{"unknown host", DiscoverSpec{SerialNumber: "C10", HostBmcMacAddress: "ab:ab:ab:ab:ab:ab"}, HostMachineID("ab:ab:ab:ab:ab:ab")},
			{"reported DPU again without MAC", DiscoverSpec{SerialNumber: "C1"}, HostMachineID("aa:00:00:00:00:02")},
		}
		for _, c := range cases {
			res, err := a.Discover(ctx, c.spec)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if len(res.Machines) != 1 || res.Machines[0].MachineID != c.host || res.Machines[0].Kind != "host" {
				t.Fatalf("%s: machines %+v, want host %s", c.name, res.Machines, c.host)
			}
			found := false
			for _, d := range res.Machines[0].DPUs {
				if d.SerialNumber == c.spec.SerialNumber && d.MachineID == DPUMachineID(c.spec.SerialNumber) {
					found = d.NetworkConfig != nil && d.NetworkConfig.LoopbackIP != nil
				}
			}
			if !found {
				t.Fatalf("%s: host %+v does not carry DPU %s with a loopback", c.name, res.Machines[0], c.spec.SerialNumber)
			}
		}
	})
}
