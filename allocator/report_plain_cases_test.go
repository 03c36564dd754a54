package allocator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// plainCase is one equivalence scenario: setup builds the site (run on two
// databases alike), then reports are sent as one batch on the first and
// one by one, in the order the batch ran them, on the second.
type plainCase struct {
	hold    time.Duration
	setup   func(f *fnd)
	reports []ReportSpec
	check   func(f *fnd) // on the batch's site, afterwards (optional)
}

// plainEquivalent runs c on both databases and fails on any difference in
// answers or stored state, and checks the batch's run ends and range
// counts.
func plainEquivalent(t *testing.T, c plainCase) {
	t.Helper()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		db2 := dbtest.Open(t, models.DialectOf(db))
		fb, fa := newFnd(t, db, c.hold), newFnd(t, db2, c.hold)
		c.setup(fb)
		c.setup(fa)
		actor := func(i int) context.Context {
			return audit.WithActor(context.Background(), fmt.Sprintf("client-%d", i), fmt.Sprintf("req-%d", i))
		}
		index := map[string]int{}
		for i, r := range c.reports {
			index[reportKey(t, r)] = i
		}
		var order []int
		fb.a.reportOrder = func(ran []*report, n int) {
			order = order[:0]
			for _, r := range ran {
				order = append(order, index[r.mac+" "+strings.Join(r.serials, " ")])
			}
		}
		results := make([]*IngestResult, len(c.reports))
		errs := make([]error, len(c.reports))
		reportsQueued(t, fb.a, len(c.reports), func(i int) {
			results[i], errs[i] = fb.a.Report(actor(i), c.reports[i])
		})
		fb.a.reportOrder = nil
		if len(order) != len(c.reports) {
			t.Fatalf("the batch ran %d of %d reports", len(order), len(c.reports))
		}
		for _, i := range order {
			r, err := newReport(c.reports[i])
			if err != nil {
				t.Fatal(err)
			}
			res, err := fa.a.reportAlone(actor(i), r)
			if fmt.Sprint(err) != fmt.Sprint(errs[i]) {
				t.Fatalf("report %d: batch error %v, alone %v", i, errs[i], err)
			}
			if got, want := jsonOf(t, results[i]), jsonOf(t, res); got != want {
				t.Fatalf("report %d answers differ:\nbatch %s\nalone %s", i, got, want)
			}
		}
		sameIngestState(t, db, db2)
		if c.check != nil {
			c.check(fb)
		}
		for _, p := range []string{PoolLoopbackV4, PoolLoopbackV6} {
			if fb.countRows(&models.Pool{}, "name = ?", p) > 0 {
				fb.checkRunEnds(p)
				fb.checkRangeCounts(p)
			}
		}
	})
}

func specOf(mac string, serials ...string) ReportSpec {
	r := ReportSpec{BmcMacAddress: mac}
	for _, s := range serials {
		r.DPUs = append(r.DPUs, ReportDPU{SerialNumber: s})
	}
	return r
}

// Quarantines whose hold ran out are freed by the first report that
// allocates, and their audit events sit where that report writes them.
func TestReportPlainExpiredQuarantine(t *testing.T) {
	t.Parallel()
	plainEquivalent(t, plainCase{
		hold: time.Hour,
		setup: func(f *fnd) {
			f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.9", true), rng("10.0.0.10", "10.0.0.20", false))
			f.mkPool(PoolLoopbackV6, "ipv6", 0, rng("fd00::1", "fd00::ff", true))
			if _, err := f.a.Report(f.ctx, specOf("02:00:00:00:09:01", "OLD-1")); err != nil {
				f.t.Fatal(err)
			}
			if _, err := f.a.DeleteMachine(f.ctx, HostMachineID("02:00:00:00:09:01"), true); err != nil {
				f.t.Fatal(err)
			}
			f.clock.Advance(2 * time.Hour)
		},
		reports: []ReportSpec{specOf("02:00:00:00:09:02", "NEW-1"), specOf("02:00:00:00:09:03", "NEW-2")},
	})
}

// emWith inserts an ExpectedMachine for mac with DPUs (serial, v4, v6,
// each optional) and fallback serials, through the models.
func (f *fnd) emWith(mac string, fallback string, dpus ...[3]string) {
	f.t.Helper()
	em := models.ExpectedMachine{ID: "em-" + strings.ReplaceAll(mac, ":", ""), BmcMacAddress: mac, ChassisSerialNumber: "CHS-" + mac,
		FallbackDPUSerialNumbers: fallback, MetadataLabels: "[]", Version: 1, CreatedAt: f.clock.Now(), UpdatedAt: f.clock.Now()}
	if err := f.db.Create(&em).Error; err != nil {
		f.t.Fatal(err)
	}
	for i, d := range dpus {
		r := models.ExpectedDPU{ExpectedMachineID: em.ID, Position: i, SerialNumber: d[0]}
		if d[1] != "" {
			r.LoopbackIP, r.LoopbackIPKey = strp(d[1]), lcKey(d[1])
		}
		if d[2] != "" {
			r.LoopbackIPv6, r.LoopbackIPv6Key = strp(d[2]), lcKey(d[2])
		}
		if err := f.db.Create(&r).Error; err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fnd) mustReport(spec ReportSpec) {
	f.t.Helper()
	if _, err := f.a.Report(f.ctx, spec); err != nil {
		f.t.Fatal(err)
	}
}

// A small automatic range right below the reserved one runs out in the
// middle of the batch: the same DPUs get pool_exhausted, and the run ends
// across the two ranges stay exact.
func TestReportPlainExhaustedNextToReserved(t *testing.T) {
	t.Parallel()
	plainEquivalent(t, plainCase{
		setup: func(f *fnd) {
			f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.3", true), rng("10.0.0.4", "10.0.0.10", false))
			f.mkPool(PoolLoopbackV6, "ipv6", 0, rng("fd00::1", "fd00::2", true), rng("fd00::3", "fd00::9", false))
			f.emWith("02:00:00:00:0a:01", "[]", [3]string{"A-1", "10.0.0.4", ""}, [3]string{"A-2", "", "fd00::3"})
			f.emWith("02:00:00:00:0a:02", "[]", [3]string{"B-1", "10.0.0.6", "fd00::5"})
			f.alloc(PoolLoopbackV4, "vm:x", "10.0.0.5")
		},
		reports: []ReportSpec{
			specOf("02:00:00:00:0a:03", "C-2", "C-1"),
			specOf("02:00:00:00:0a:01", "A-1", "A-2"),
			specOf("02:00:00:00:0a:04", "D-1", "D-2"),
			specOf("02:00:00:00:0a:02", "B-1"),
		},
	})
}

// Hosts with and without an ExpectedMachine, a serial another
// ExpectedMachine declares (misplaced unless listed as a fallback), case
// variants of a declared serial, a host-less DPU getting a host, a value
// the DPU already holds next to a reservation for another one.
func TestReportPlainDeclarations(t *testing.T) {
	t.Parallel()
	plainEquivalent(t, plainCase{
		setup: func(f *fnd) {
			f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.30", true), rng("10.0.0.31", "10.0.0.60", false))
			f.mkPool(PoolLoopbackV6, "ipv6", 0, rng("fd00::1", "fd00::ff", true), rng("fd00::100", "fd00::1ff", false))
			f.emWith("02:00:00:00:0b:01", "[]", [3]string{"MT-A", "10.0.0.31", "fd00::100"}, [3]string{"MT-B", "10.0.0.32", ""})
			f.emWith("02:00:00:00:0b:02", `["MT-B"]`, [3]string{"MT-C", "", "fd00::101"})
			f.emWith("02:00:00:00:0b:03", "[]", [3]string{"MT-D", "10.0.0.33", ""})
			if _, err := f.a.Discover(f.ctx, DiscoverSpec{SerialNumber: "MT-HL"}); err != nil {
				f.t.Fatal(err)
			}
			f.alloc(PoolLoopbackV4, DPUMachineID("MT-E"), "10.0.0.40")
		},
		reports: []ReportSpec{
			specOf("02:00:00:00:0b:04", "mt-a", "MT-E"),       // unknown host: case variant is another serial
			specOf("02:00:00:00:0b:02", "MT-B", "MT-C"),       // MT-B is a fallback of this host, declared by host 1
			specOf("02:00:00:00:0b:05", "MT-D"),               // unknown host, declared serial: reserved
			specOf("02:00:00:00:0b:03", "MT-X", "MT-HL"),      // a host-less DPU gets a host
			specOf("02:00:00:00:0b:01", "MT-A"),               // reserved
			specOf("02:00:00:00:0b:06", "MT-F", "mt-d", "z1"), // case variant of a serial in this batch
		},
	})
}

func (f *fnd) loopbacksOf(serial string) (string, string) {
	f.t.Helper()
	var nc models.NetworkConfig
	if err := f.db.Where("machine_id = ?", DPUMachineID(serial)).Take(&nc).Error; err != nil {
		f.t.Fatalf("network config of %s: %v", serial, err)
	}
	return deref(nc.LoopbackIP), deref(nc.LoopbackIPv6)
}

// Force-deleted hardware reported again in a batch of new hosts takes its
// quarantined values back (they are the lowest values, which the new
// hosts must not get), and a reserved DPU its reservation, not its
// quarantined value, which stays quarantined.
func TestReportPlainForceDeletedComesBack(t *testing.T) {
	t.Parallel()
	var was [3][2]string
	plainEquivalent(t, plainCase{
		setup: func(f *fnd) {
			f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.30", true), rng("10.0.0.31", "10.0.0.60", false))
			f.mkPool(PoolLoopbackV6, "ipv6", 0, rng("fd00::1", "fd00::ff", true))
			f.mustReport(specOf("02:00:00:00:0f:01", "Q-1", "Q-2"))
			f.mustReport(specOf("02:00:00:00:0f:02", "Q-3"))
			for i, s := range []string{"Q-1", "Q-2", "Q-3"} {
				was[i][0], was[i][1] = f.loopbacksOf(s)
			}
			for _, h := range []string{"02:00:00:00:0f:01", "02:00:00:00:0f:02"} {
				if _, err := f.a.DeleteMachine(f.ctx, HostMachineID(h), true); err != nil {
					f.t.Fatal(err)
				}
			}
			f.emWith("02:00:00:00:0f:02", "[]", [3]string{"Q-3", "10.0.0.40", ""})
		},
		reports: []ReportSpec{
			specOf("02:00:00:00:0f:03", "N-1", "N-2"),
			specOf("02:00:00:00:0f:01", "Q-2", "Q-1"),
			specOf("02:00:00:00:0f:04", "N-3"),
			specOf("02:00:00:00:0f:02", "Q-3"),
		},
		check: func(f *fnd) {
			for i, s := range []string{"Q-1", "Q-2"} {
				if v4, v6 := f.loopbacksOf(s); v4 != was[i][0] || v6 != was[i][1] {
					t.Errorf("%s came back with %s %s, held %s %s before its force delete", s, v4, v6, was[i][0], was[i][1])
				}
			}
			if v4, v6 := f.loopbacksOf("Q-3"); v4 != "10.0.0.40" || v6 != was[2][1] {
				t.Errorf("Q-3 came back with %s %s, want its reservation and its old IPv6 %s", v4, v6, was[2][1])
			}
			if n := f.countRows(&models.Allocation{}, "value = ? AND state = ?", was[2][0], models.StateQuarantined); n != 1 {
				t.Errorf("Q-3's old IPv4 %s: %d quarantines, want it still quarantined", was[2][0], n)
			}
		},
	})
}
