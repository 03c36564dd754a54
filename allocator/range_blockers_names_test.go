package allocator

import (
	"testing"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
)

// TestRangeRefusalNamesMachines: a shrink or flip refused because of a
// machine's values names the machine as operators know it (DPU serial,
// host name), not by its machine_id, for the value it holds and for the
// value quarantined from it.
func TestRangeRefusalNamesMachines(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		p := f.mkPool("lo-ip", "ipv4", 0, rng("10.0.0.1", "10.0.0.99", true))
		if _, err := f.a.Report(f.ctx, ReportSpec{BmcMacAddress: "0a:00:00:00:00:31", ChassisSerialNumber: "CH-31",
			DPUs: []ReportDPU{{SerialNumber: "MT-31"}}}); err != nil {
			t.Fatal(err)
		}
		before := f.snap()
		_, err := f.a.UpdateRange(f.ctx, "lo-ip", p.Ranges[0].ID, RangeUpdate{First: func() *string { s := "10.0.0.2"; return &s }()})
		testkit.WantCode(t, err, fault.CodeConflict, "", "10.0.0.1 (allocated to DPU MT-31 of host CH-31)")
		f.unchanged(before, "refused shrink")
		// An owner that is no machine keeps its type/id alone.
		al := f.alloc("lo-ip", "not-a-machine", "")
		_, err = f.a.UpdateRange(f.ctx, "lo-ip", p.Ranges[0].ID, RangeUpdate{First: func() *string { s := "10.0.0.90"; return &s }()})
		testkit.WantCode(t, err, fault.CodeConflict, "", al.Value+" (allocated to machine/not-a-machine)", "(allocated to DPU MT-31 of host CH-31)")
		// The value quarantined from the DPU names it too.
		f.quarantine("lo-ip", "10.0.0.1")
		_, err = f.a.UpdateRange(f.ctx, "lo-ip", p.Ranges[0].ID, RangeUpdate{First: func() *string { s := "10.0.0.90"; return &s }()})
		testkit.WantCode(t, err, fault.CodeConflict, "", "10.0.0.1 (quarantined, former owner DPU MT-31 of host CH-31)")
	})
}
