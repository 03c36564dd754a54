package allocator

import (
	"strings"
	"testing"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

func dpuSpec(host string, dpus ...[2]string) ReportSpec {
	r := ReportSpec{BmcMacAddress: host}
	for _, d := range dpus {
		r.DPUs = append(r.DPUs, ReportDPU{SerialNumber: d[0], BmcMacAddress: d[1]})
	}
	return r
}

func (f *fnd) storedMAC(id string) string {
	f.t.Helper()
	var m models.Machine
	if err := f.db.Where("machine_id = ?", id).Take(&m).Error; err != nil {
		f.t.Fatalf("machine %s: %v", id, err)
	}
	return deref(m.BmcMacAddress)
}

// wantErr fails unless err is an *Error of this code and field whose
// message names value.
func wantErr(t *testing.T, err error, code fault.Code, field, value string) {
	t.Helper()
	e, ok := fault.AsError(err)
	if !ok || e.Code != code || e.Field != field || !strings.Contains(e.Message, value) {
		t.Fatalf("error %v, want %s on %s naming %q", err, code, field, value)
	}
}

// A DPU's BMC MAC from a report, in any spelling ParseMAC accepts, is
// stored canonically by both report paths (one by one and set-based) and
// shown in the answer; a later report adds or changes it, and one without
// it keeps the stored one.
func TestReportStoresDPUBMCMAC(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.30", true))
		// One by one (ingestReport).
		r, err := newReport(dpuSpec("02:00:00:00:00:01", [2]string{"S-1", "1A-2B-3C-4D-5E-01"}, [2]string{"S-2", ""}))
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.a.reportAlone(f.ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if got := deref(res.Machines[0].DPUs[0].BmcMacAddress); got != "1a:2b:3c:4d:5e:01" {
			t.Fatalf("answer's DPU BMC MAC %q", got)
		}
		if j := jsonOf(t, res); !strings.Contains(j, `"bmc_mac_address":"1a:2b:3c:4d:5e:01"`) || strings.Count(j, `"bmc_mac_address"`) != 2 {
			t.Fatalf("answer %s: want the host's and S-1's BMC MAC only", j)
		}
		// Set-based (a batch of new machines).
		plain := -1
		f.a.reportOrder = func(_ []*report, n int) { plain = n }
		if _, err := f.a.Report(f.ctx, dpuSpec("02:00:00:00:00:02", [2]string{"S-3", " 1A:2B:3C:4D:5E:03 "})); err != nil {
			t.Fatal(err)
		}
		f.a.reportOrder = nil
		if plain != 1 {
			t.Fatalf("the new host with a DPU BMC MAC ran with %d plain reports, want 1 (set-based)", plain)
		}
		for id, want := range map[string]string{DPUMachineID("S-1"): "1a:2b:3c:4d:5e:01", DPUMachineID("S-2"): "",
			DPUMachineID("S-3"): "1a:2b:3c:4d:5e:03", HostMachineID("02:00:00:00:00:01"): "02:00:00:00:00:01"} {
			if got := f.storedMAC(id); got != want {
				t.Errorf("%s: stored BMC MAC %q, want %q", id, got, want)
			}
		}
		// Re-reports: without it keeps it, with it adds or changes it.
		f.mustReport(dpuSpec("02:00:00:00:00:01", [2]string{"S-1", ""}, [2]string{"S-2", "1a:2b:3c:4d:5e:02"}))
		f.mustReport(dpuSpec("02:00:00:00:00:02", [2]string{"S-3", "1a-2b-3c-4d-5e-0f"}))
		for id, want := range map[string]string{DPUMachineID("S-1"): "1a:2b:3c:4d:5e:01", DPUMachineID("S-2"): "1a:2b:3c:4d:5e:02",
			DPUMachineID("S-3"): "1a:2b:3c:4d:5e:0f"} {
			if got := f.storedMAC(id); got != want {
				t.Errorf("%s after re-reports: stored BMC MAC %q, want %q", id, got, want)
			}
		}
		if n := f.countRows(&models.AuditEvent{}, "action = 'machine.update' AND object_id IN ?", []string{DPUMachineID("S-2"), DPUMachineID("S-3")}); n != 2 {
			t.Errorf("%d machine.update events for the BMC MAC changes, want 2", n)
		}
		got, err := f.a.GetMachine(f.ctx, DPUMachineID("S-3"))
		if err != nil {
			t.Fatal(err)
		}
		if deref(got.BmcMacAddress) != "1a:2b:3c:4d:5e:0f" {
			t.Errorf("GetMachine: DPU BMC MAC %v", got.BmcMacAddress)
		}
	})
}

// A malformed DPU BMC MAC, or one named twice in a report, is 422 naming
// the field and the value; a BMC MAC another machine has (host or DPU) is
// 409 naming it. Nothing changes.
func TestReportRefusesBadDPUBMCMAC(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.30", true))
		f.mustReport(dpuSpec("02:00:00:00:00:01", [2]string{"S-1", "1a:00:00:00:00:01"}, [2]string{"S-2", ""}))
		f.mustReport(dpuSpec("02:00:00:00:00:05"))
		before := ingestDump(t, f.db)
		for _, bad := range []string{"1a-00:00:00:00:02", "1a00.0000.0002", "1a0000000002", "1a:00:00:00:00", "zz:00:00:00:00:02"} {
			_, err := f.a.Report(f.ctx, dpuSpec("02:00:00:00:00:09", [2]string{"S-9", ""}, [2]string{"S-8", bad}))
			wantErr(t, err, fault.CodeInvalid, "dpus[1].bmc_mac_address", bad)
		}
		_, err := f.a.Report(f.ctx, dpuSpec("02:00:00:00:00:09", [2]string{"S-9", "1A:00:00:00:00:09"}, [2]string{"S-8", "1a-00-00-00-00-09"}))
		wantErr(t, err, fault.CodeInvalid, "dpus[1].bmc_mac_address", "1a-00-00-00-00-09")
		_, err = f.a.Report(f.ctx, dpuSpec("02:00:00:00:00:09", [2]string{"S-9", "02:00:00:00:00:09"}))
		wantErr(t, err, fault.CodeInvalid, "dpus[0].bmc_mac_address", "02:00:00:00:00:09")
		for name, c := range map[string]struct {
			spec         ReportSpec
			field, value string
		}{
			"a new DPU with a host's":     {dpuSpec("02:00:00:00:00:09", [2]string{"S-9", "02:00:00:00:00:01"}), "dpus[0].bmc_mac_address", "02:00:00:00:00:01"},
			"a new DPU with a DPU's":      {dpuSpec("02:00:00:00:00:09", [2]string{"S-8", ""}, [2]string{"S-9", "1A:00:00:00:00:01"}), "dpus[1].bmc_mac_address", "1a:00:00:00:00:01"},
			"a known DPU taking a DPU's":  {dpuSpec("02:00:00:00:00:01", [2]string{"S-2", "1a:00:00:00:00:01"}), "dpus[0].bmc_mac_address", "1a:00:00:00:00:01"},
			"a known DPU taking a host's": {dpuSpec("02:00:00:00:00:01", [2]string{"S-1", "02:00:00:00:00:09"}, [2]string{"S-2", "02:00:00:00:00:05"}), "dpus[1].bmc_mac_address", "02:00:00:00:00:05"},
			"a new host with a DPU's":     {dpuSpec("1a:00:00:00:00:01", [2]string{"S-9", ""}), "bmc_mac_address", "1a:00:00:00:00:01"},
		} {
			_, err := f.a.Report(f.ctx, c.spec)
			if e, ok := fault.AsError(err); ok && !strings.Contains(e.Message, "S-1") && c.value == "1a:00:00:00:00:01" {
				t.Errorf("%s: %q does not name the DPU that has the MAC", name, e.Message)
			}
			wantErr(t, err, fault.CodeConflict, c.field, c.value)
			r, err := newReport(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.a.reportAlone(f.ctx, r)
			wantErr(t, err, fault.CodeConflict, c.field, c.value)
		}
		if after := ingestDump(t, f.db); after != before {
			t.Fatalf("refused reports changed the stored state:\nbefore %s\nafter  %s", before, after)
		}
	})
}

// Batches with DPU BMC MACs equal running their reports one by one: new
// DPUs with MACs (set-based), a DPU MAC a later report of the batch
// claims as its host's or DPU's, a known DPU keeping or changing its MAC.
func TestReportPlainDPUBMCMACs(t *testing.T) {
	t.Parallel()
	plainEquivalent(t, plainCase{
		setup: func(f *fnd) {
			f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.30", true))
			f.mkPool(PoolLoopbackV6, "ipv6", 0, rng("fd00::1", "fd00::ff", true))
			f.mustReport(dpuSpec("02:00:00:00:0c:01", [2]string{"K-1", "1a:00:00:00:0c:01"}, [2]string{"K-2", ""}))
		},
		reports: []ReportSpec{
			dpuSpec("02:00:00:00:0c:02", [2]string{"N-1", "1A-00-00-00-0C-02"}, [2]string{"N-2", ""}),
			dpuSpec("02:00:00:00:0c:01", [2]string{"K-1", ""}, [2]string{"K-2", "1a:00:00:00:0c:03"}),
			dpuSpec("02:00:00:00:0c:04", [2]string{"N-3", "1a:00:00:00:0c:02"}), // N-1's: 409
			dpuSpec("1a:00:00:00:0c:02", [2]string{"N-4", ""}),                  // N-1's as a host: 409
			dpuSpec("02:00:00:00:0c:05", [2]string{"N-5", "1a:00:00:00:0c:05"}),
			dpuSpec("02:00:00:00:0c:06", [2]string{"N-6", "1a:00:00:00:0c:01"}), // K-1's: 409
		},
		// Which of the three claims of 1a:00:00:00:0c:02 wins depends on
		// the order the batch received them; exactly one does.
		check: func(f *fnd) {
			for s, want := range map[string]string{"K-1": "1a:00:00:00:0c:01", "K-2": "1a:00:00:00:0c:03", "N-5": "1a:00:00:00:0c:05"} {
				if got := f.storedMAC(DPUMachineID(s)); got != want {
					f.t.Errorf("%s: stored BMC MAC %q, want %q", s, got, want)
				}
			}
			if n := f.countRows(&models.Machine{}, "bmc_mac_address = ?", "1a:00:00:00:0c:02"); n != 1 {
				f.t.Errorf("%d machines with BMC MAC 1a:00:00:00:0c:02, want 1", n)
			}
			if n := f.countRows(&models.Machine{}, "serial_number = ?", "N-6"); n != 0 {
				f.t.Errorf("N-6, refused, was stored")
			}
		},
	})
}
