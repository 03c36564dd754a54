package allocator

// Tests of the DPU lifecycle (docs/reservations.md lifecycle table, §10 machines,
// bindings, delete-impact). Helpers start with "lc". Every test runs on
// SQLite and PostgreSQL, each with its own database.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

type lcSite struct {
	t   *testing.T
	db  *gorm.DB
	a   *Allocator
	ctx context.Context
}

type lcOpts struct {
	noV6   bool // lo-ip-v6 not defined
	autoV4 [2]string
	autoV6 [2]string
}

// newLC builds a site: lo-ip auto 10.0.0.1..10.0.0.9 (or opts.autoV4) and
// explicit 10.0.0.100..10.0.0.199; lo-ip-v6 auto fd00::1..fd00::ff and
// explicit fd00:1::1..fd00:1::ff.
func newLC(t *testing.T, db *gorm.DB, o lcOpts) *lcSite {
	t.Helper()
	s := &lcSite{t: t, db: db, a: New(db, Options{}), ctx: audit.WithActor(context.Background(), "test", "req-lc")}
	auto := o.autoV4
	if auto[0] == "" {
		auto = [2]string{"10.0.0.1", "10.0.0.9"}
	}
	s.pool(PoolLoopbackV4, "ipv4", rng(auto[0], auto[1], true), rng("10.0.0.100", "10.0.0.199", false))
	if !o.noV6 {
		auto6 := o.autoV6
		if auto6[0] == "" {
			auto6 = [2]string{"fd00::1", "fd00::ff"}
		}
		s.pool(PoolLoopbackV6, "ipv6", rng(auto6[0], auto6[1], true), rng("fd00:1::1", "fd00:1::ff", false))
	}
	return s
}

func lcEach(t *testing.T, o lcOpts, fn func(t *testing.T, s *lcSite)) {
	t.Helper()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) { fn(t, newLC(t, db, o)) })
}

func (s *lcSite) pool(name, typ string, ranges ...RangeSpec) {
	s.t.Helper()
	if _, err := s.a.CreatePool(s.ctx, PoolSpec{Name: name, Type: typ, Ranges: ranges}); err != nil {
		s.t.Fatalf("create pool %s: %v", name, err)
	}
}

type lcDPU struct{ serial, v4, v6 string }

func lcKey(v string) *string {
	a, err := parseAddr(v)
	if err != nil {
		panic(err)
	}
	k := fromAddr(a).key()
	return &k
}

// em inserts an ExpectedMachine with its ExpectedDpus through the models
// (as the ExpectedMachine writes store them; the rows may deliberately break
// validation
// to create "unexpectedly unavailable" states) and returns its id.
func (s *lcSite) em(mac string, dpus ...lcDPU) string {
	s.t.Helper()
	now := time.Now().UTC()
	row := models.ExpectedMachine{ID: "em-" + strings.ReplaceAll(mac, ":", ""), BmcMacAddress: mac, ChassisSerialNumber: "CHS-" + mac,
		FallbackDPUSerialNumbers: "[]", MetadataLabels: "[]", Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := s.db.Create(&row).Error; err != nil {
		s.t.Fatalf("insert expected machine: %v", err)
	}
	for i, d := range dpus {
		s.addDPU(row.ID, i, d)
	}
	return row.ID
}

func (s *lcSite) addDPU(emID string, pos int, d lcDPU) {
	s.t.Helper()
	r := models.ExpectedDPU{ExpectedMachineID: emID, Position: pos, SerialNumber: d.serial}
	if d.v4 != "" {
		r.LoopbackIP, r.LoopbackIPKey = strp(d.v4), lcKey(d.v4)
	}
	if d.v6 != "" {
		r.LoopbackIPv6, r.LoopbackIPv6Key = strp(d.v6), lcKey(d.v6)
	}
	if err := s.db.Create(&r).Error; err != nil {
		s.t.Fatalf("insert expected dpu: %v", err)
	}
}

func (s *lcSite) setReservation(serial, v4 string) {
	s.t.Helper()
	if err := s.db.Model(&models.ExpectedDPU{}).Where("serial_number = ?", serial).
		Updates(map[string]any{"loopback_ip": v4, "loopback_ip_key": *lcKey(v4)}).Error; err != nil {
		s.t.Fatal(err)
	}
}

func (s *lcSite) report(mac string, serials ...string) *IngestResult {
	s.t.Helper()
	spec := ReportSpec{BmcMacAddress: mac, ChassisSerialNumber: "CHS-" + mac}
	for _, x := range serials {
		spec.DPUs = append(spec.DPUs, ReportDPU{SerialNumber: x})
	}
	res, err := s.a.Report(s.ctx, spec)
	if err != nil {
		s.t.Fatalf("report %s %v: %v", mac, serials, err)
	}
	return res
}

// loopbacks returns the DPU's network config values ("" when null).
func (s *lcSite) loopbacks(serial string) (string, string) {
	s.t.Helper()
	var nc models.NetworkConfig
	if err := s.db.Where("machine_id = ?", DPUMachineID(serial)).Take(&nc).Error; err != nil {
		s.t.Fatalf("network config of %s: %v", serial, err)
	}
	return deref(nc.LoopbackIP), deref(nc.LoopbackIPv6)
}

func (s *lcSite) wantLoopbacks(serial, v4, v6 string) {
	s.t.Helper()
	g4, g6 := s.loopbacks(serial)
	if g4 != v4 || g6 != v6 {
		s.t.Fatalf("DPU %s loopbacks = %q, %q; want %q, %q", serial, g4, g6, v4, v6)
	}
	// The network config and the pools agree.
	for _, c := range []struct{ pool, v string }{{PoolLoopbackV4, v4}, {PoolLoopbackV6, v6}} {
		held := s.heldBy(c.pool, DPUMachineID(serial))
		if held != c.v {
			s.t.Fatalf("DPU %s holds %q in %s, network config says %q", serial, held, c.pool, c.v)
		}
	}
}

// heldBy is the value owner holds in pool ("" none).
func (s *lcSite) heldBy(pool, owner string) string {
	s.t.Helper()
	var vals []string
	if err := s.db.Raw(`SELECT a.value FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = ? AND a.state = 'allocated' AND a.owner_type = 'machine' AND a.owner_id = ?`,
		pool, owner).Scan(&vals).Error; err != nil {
		s.t.Fatal(err)
	}
	if len(vals) > 1 {
		s.t.Fatalf("%s holds %d values in %s", owner, len(vals), pool)
	}
	if len(vals) == 0 {
		return ""
	}
	return vals[0]
}

func (s *lcSite) allocationRow(pool, value string) *models.Allocation {
	s.t.Helper()
	var rows []models.Allocation
	if err := s.db.Raw(`SELECT a.* FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = ? AND a.value = ?`, pool, value).Scan(&rows).Error; err != nil {
		s.t.Fatal(err)
	}
	if len(rows) == 0 {
		return nil
	}
	return &rows[0]
}

func (s *lcSite) binding(serial string) Binding {
	s.t.Helper()
	b, err := s.a.GetBinding(s.ctx, serial)
	if err != nil {
		s.t.Fatalf("binding of %s: %v", serial, err)
	}
	return *b
}

func (s *lcSite) wantStatus(serial, v4, v6 string) {
	s.t.Helper()
	b := s.binding(serial)
	if b.StatusV4 != v4 || b.StatusV6 != v6 {
		s.t.Fatalf("binding of %s = %s/%s; want %s/%s (%+v)", serial, b.StatusV4, b.StatusV6, v4, v6, b)
	}
}

func wantIncomplete(t *testing.T, res *IngestResult, want ...string) {
	t.Helper()
	var got []string
	for _, i := range res.Incomplete {
		got = append(got, i.MachineID+"/"+i.Family+"/"+string(i.Code))
		if i.Message == "" {
			t.Fatalf("incomplete entry without message: %+v", i)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("incomplete = %v; want %v", got, want)
	}
}

func (s *lcSite) decommission(id string) {
	s.t.Helper()
	if _, err := s.a.Decommission(s.ctx, id); err != nil {
		s.t.Fatalf("decommission %s: %v", id, err)
	}
}

func (s *lcSite) delete(id string, force bool) *DeleteImpact {
	s.t.Helper()
	imp, err := s.a.DeleteMachine(s.ctx, id, force)
	if err != nil {
		s.t.Fatalf("delete %s (force %v): %v", id, force, err)
	}
	return imp
}

const (
	macA = "0a:00:00:00:00:0a"
	macB = "0a:00:00:00:00:0b"
	macC = "0a:00:00:00:00:0c"
)

// TestLifecycleTable runs every row of the docs/reservations.md lifecycle table.
func TestLifecycleTable(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name string
		opts lcOpts
		run  func(t *testing.T, s *lcSite)
	}{
		{"DPU ingested, reservation for its serial exists: reserved value allocated to its machine_id", lcOpts{}, func(t *testing.T, s *lcSite) {
			s.em(macA, lcDPU{"S1", "10.0.0.150", "fd00:1::50"})
			res := s.report(macA, "S1")
			wantIncomplete(t, res)
			s.wantLoopbacks("S1", "10.0.0.150", "fd00:1::50")
			s.wantStatus("S1", BindingReserved, BindingReserved)
			if len(res.Machines) != 1 || res.Machines[0].Kind != KindHost || res.Machines[0].State != StateReady ||
				len(res.Machines[0].DPUs) != 1 || res.Machines[0].DPUs[0].MachineID != DPUMachineID("S1") {
				t.Fatalf("machines = %+v", res.Machines)
			}
			if got := deref(res.Machines[0].DPUs[0].NetworkConfig.LoopbackIP); got != "10.0.0.150" {
				t.Fatalf("answer's network config loopback_ip = %q", got)
			}
		}},
		{"DPU ingested, no reservation: automatic allocation from each family's pool", lcOpts{}, func(t *testing.T, s *lcSite) {
			s.em(macA, lcDPU{serial: "S1"})
			wantIncomplete(t, s.report(macA, "S1"))
			s.wantLoopbacks("S1", "10.0.0.1", "fd00::1")
			s.wantStatus("S1", BindingAutomatic, BindingAutomatic)
		}},
		{"DPU ingested without lo-ip-v6: the v6 loopback stays empty and is not incomplete", lcOpts{noV6: true}, func(t *testing.T, s *lcSite) {
			wantIncomplete(t, s.report(macA, "S1"))
			s.wantLoopbacks("S1", "10.0.0.1", "")
			s.wantStatus("S1", BindingAutomatic, BindingNone)
		}},
		{"reserved value unexpectedly unavailable: family unassigned, not_available, binding conflict, no fallback", lcOpts{}, func(t *testing.T, s *lcSite) {
			if _, _, err := s.a.Allocate(s.ctx, PoolLoopbackV4, Owner{"network", "squatter"}, "10.0.0.150"); err != nil {
				t.Fatal(err)
			}
			s.em(macA, lcDPU{"S1", "10.0.0.150", "fd00:1::50"})
			res := s.report(macA, "S1")
			wantIncomplete(t, res, DPUMachineID("S1")+"/ipv4/not_available")
			if !strings.Contains(res.Incomplete[0].Message, "10.0.0.150") {
				t.Fatalf("message does not name the value: %s", res.Incomplete[0].Message)
			}
			s.wantLoopbacks("S1", "", "fd00:1::50") // IPv6 independent
			s.wantStatus("S1", BindingConflict, BindingReserved)
			// A repeated report changes nothing and says so again.
			wantIncomplete(t, s.report(macA, "S1"), DPUMachineID("S1")+"/ipv4/not_available")
			s.wantLoopbacks("S1", "", "fd00:1::50")
			// Once the value is free again, reconciliation completes it.
			if err := s.a.Release(s.ctx, PoolLoopbackV4, "10.0.0.150", Owner{"network", "squatter"}); err != nil {
				t.Fatal(err)
			}
			rr, err := s.a.ReconcileLoopbacks(s.ctx)
			if err != nil || rr.Completed != 1 {
				t.Fatalf("reconcile = %+v, %v", rr, err)
			}
			s.wantLoopbacks("S1", "10.0.0.150", "fd00:1::50")
			s.wantStatus("S1", BindingReserved, BindingReserved)
		}},
		{"reservation edited while the DPU is active: no readdressing, binding pending until re-ingested", lcOpts{}, func(t *testing.T, s *lcSite) {
			s.em(macA, lcDPU{"S1", "10.0.0.150", ""})
			s.report(macA, "S1")
			s.setReservation("S1", "10.0.0.151")
			s.report(macA, "S1")
			if _, err := s.a.ReconcileLoopbacks(s.ctx); err != nil {
				t.Fatal(err)
			}
			s.wantLoopbacks("S1", "10.0.0.150", "fd00::1")
			s.wantStatus("S1", BindingPending, BindingAutomatic)
			if b := s.binding("S1"); deref(b.ReservedIP) != "10.0.0.151" || deref(b.LoopbackIP) != "10.0.0.150" {
				t.Fatalf("binding = %+v", b)
			}
			s.decommission(HostMachineID(macA))
			s.delete(HostMachineID(macA), false)
			s.report(macA, "S1")
			s.wantLoopbacks("S1", "10.0.0.151", "fd00::1")
			s.wantStatus("S1", BindingReserved, BindingAutomatic)
		}},
		{"ExpectedMachine removed: active DPUs keep their values, bindings automatic, next ingestion automatic", lcOpts{}, func(t *testing.T, s *lcSite) {
			id := s.em(macA, lcDPU{"S1", "10.0.0.150", "fd00:1::50"})
			s.report(macA, "S1")
			if err := s.db.Where("expected_machine_id = ?", id).Delete(&models.ExpectedDPU{}).Error; err != nil {
				t.Fatal(err)
			}
			if err := s.db.Where("id = ?", id).Delete(&models.ExpectedMachine{}).Error; err != nil {
				t.Fatal(err)
			}
			s.report(macA, "S1")
			s.wantLoopbacks("S1", "10.0.0.150", "fd00:1::50")
			s.wantStatus("S1", BindingAutomatic, BindingAutomatic)
			if b := s.binding("S1"); b.ExpectedMachineID != nil || b.ReservedIP != nil {
				t.Fatalf("binding keeps the gone ExpectedMachine: %+v", b)
			}
			m, err := s.a.GetMachine(s.ctx, HostMachineID(macA))
			if err != nil || m.ExpectedMachineID != nil {
				t.Fatalf("host expected_machine_id = %v, %v; want null", m, err)
			}
			s.decommission(HostMachineID(macA))
			s.delete(HostMachineID(macA), false)
			s.report(macA, "S1")
			s.wantLoopbacks("S1", "10.0.0.1", "fd00::1")
		}},
		{"host decommissioned, then deleted: values free; a reserved value only reachable by its declared DPU", lcOpts{}, func(t *testing.T, s *lcSite) {
			s.em(macA, lcDPU{"S1", "10.0.0.150", ""}, lcDPU{serial: "S2"})
			s.report(macA, "S1", "S2")
			s.wantLoopbacks("S2", "10.0.0.1", "fd00::2")
			s.decommission(HostMachineID(macA))
			imp := s.delete(HostMachineID(macA), false)
			wantActions(t, imp, "lo-ip 10.0.0.1 release", "lo-ip 10.0.0.150 return_to_reservation", "lo-ip-v6 fd00::1 release", "lo-ip-v6 fd00::2 release")
			for _, v := range []string{"10.0.0.1", "10.0.0.150"} {
				if r := s.allocationRow(PoolLoopbackV4, v); r != nil {
					t.Fatalf("%s still held after delete: %+v", v, r)
				}
			}
			var n int64
			s.db.Model(&models.Machine{}).Count(&n)
			if n != 0 {
				t.Fatalf("%d machine rows left", n)
			}
			_, _, err := s.a.Allocate(s.ctx, PoolLoopbackV4, Owner{"network", "other"}, "10.0.0.150")
			testkit.WantCode(t, err, fault.CodeNotAvailable, "", "declared for DPU S1")
			if al, _, err := s.a.Allocate(s.ctx, PoolLoopbackV4, Owner{"network", "other"}, ""); err != nil || al.Value != "10.0.0.1" {
				t.Fatalf("released automatic value not free again: %v %v", al, err)
			}
			s.report(macA, "S1")
			s.wantLoopbacks("S1", "10.0.0.150", "fd00::1")
		}},
		{"force delete: declared value returns to its reservation, every other value quarantined with reason, time, former owner", lcOpts{}, func(t *testing.T, s *lcSite) {
			s.em(macA, lcDPU{"S1", "10.0.0.150", ""})
			s.report(macA, "S1")
			imp, err := s.a.DeleteImpact(s.ctx, HostMachineID(macA), true)
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, imp, "lo-ip 10.0.0.150 return_to_reservation", "lo-ip-v6 fd00::1 quarantine")
			if !imp.Force || !strings.Contains(imp.Warning, "may still carry") || !strings.Contains(imp.Warning, "fd00::1") {
				t.Fatalf("impact = %+v", imp)
			}
			s.delete(HostMachineID(macA), true)
			if r := s.allocationRow(PoolLoopbackV4, "10.0.0.150"); r != nil {
				t.Fatalf("reserved value not returned: %+v", r)
			}
			q := s.allocationRow(PoolLoopbackV6, "fd00::1")
			if q == nil || q.State != models.StateQuarantined || deref(q.FormerOwnerType) != OwnerTypeMachine ||
				deref(q.FormerOwnerID) != DPUMachineID("S1") || q.QuarantinedAt == nil || !strings.Contains(deref(q.QuarantineReason), "force delete") {
				t.Fatalf("quarantine row = %+v", q)
			}
			// An admin may unquarantine it.
			if err := s.a.Unquarantine(s.ctx, PoolLoopbackV6, "fd00::1"); err != nil {
				t.Fatal(err)
			}
		}},
		{"same hardware ingested again: same machine_id, reserved value, else its own quarantined value; never another's", lcOpts{}, func(t *testing.T, s *lcSite) {
			s.em(macA, lcDPU{"S1", "10.0.0.150", ""}, lcDPU{serial: "S2"})
			s.report(macA, "S1", "S2")
			s.wantLoopbacks("S1", "10.0.0.150", "fd00::1")
			s.wantLoopbacks("S2", "10.0.0.1", "fd00::2")
			s.delete(HostMachineID(macA), true)
			// Another DPU never gets the quarantined values.
			s.report(macB, "S3")
			s.wantLoopbacks("S3", "10.0.0.2", "fd00::3")
			// Same hardware again.
			res := s.report(macA, "S2", "S1")
			wantIncomplete(t, res)
			if res.Machines[0].MachineID != HostMachineID(macA) || res.Machines[0].DPUs[0].MachineID != DPUMachineID("S1") {
				t.Fatalf("ids changed: %+v", res.Machines)
			}
			s.wantLoopbacks("S1", "10.0.0.150", "fd00::1")
			s.wantLoopbacks("S2", "10.0.0.1", "fd00::2")
			var q int64
			s.db.Model(&models.Allocation{}).Where("state = ?", models.StateQuarantined).Count(&q)
			if q != 0 {
				t.Fatalf("%d quarantines left after re-ingest", q)
			}
		}},
		{"DPU reported under a host whose ExpectedMachine does not declare it while another does: conflict for reserved families", lcOpts{}, func(t *testing.T, s *lcSite) {
			s.em(macA, lcDPU{"S1", "10.0.0.150", ""})
			emB := s.em(macB, lcDPU{serial: "S9"})
			res := s.report(macB, "S1")
			wantIncomplete(t, res, DPUMachineID("S1")+"/ipv4/conflict")
			s.wantLoopbacks("S1", "", "fd00::1")
			s.wantStatus("S1", BindingConflict, BindingAutomatic)
			// The operator fixes the ExpectedMachines: S1 belongs to B.
			if err := s.db.Model(&models.ExpectedDPU{}).Where("serial_number = ?", "S1").Update("expected_machine_id", emB).Error; err != nil {
				t.Fatal(err)
			}
			if _, err := s.a.ReconcileLoopbacks(s.ctx); err != nil {
				t.Fatal(err)
			}
			s.wantLoopbacks("S1", "10.0.0.150", "fd00::1")
			s.wantStatus("S1", BindingReserved, BindingAutomatic)
		}},
		{"a host whose ExpectedMachine lists the DPU in fallback_dpu_serial_numbers is not misplaced", lcOpts{}, func(t *testing.T, s *lcSite) {
			s.em(macA, lcDPU{"S1", "10.0.0.150", ""})
			s.em(macB)
			s.db.Model(&models.ExpectedMachine{}).Where("bmc_mac_address = ?", macB).Update("fallback_dpu_serial_numbers", `["S1"]`)
			wantIncomplete(t, s.report(macB, "S1"))
			s.wantLoopbacks("S1", "10.0.0.150", "fd00::1")
		}},
		{"host with no ExpectedMachine (unknown BMC MAC): reservation looked up by serial", lcOpts{}, func(t *testing.T, s *lcSite) {
			s.em(macA, lcDPU{"S1", "", "fd00:1::50"})
			res := s.report(macC, "S1")
			wantIncomplete(t, res)
			if res.Machines[0].ExpectedMachineID != nil {
				t.Fatalf("unknown host matched an ExpectedMachine: %+v", res.Machines[0])
			}
			s.wantLoopbacks("S1", "10.0.0.1", "fd00:1::50") // IPv4 automatic, IPv6 reserved
			s.wantStatus("S1", BindingAutomatic, BindingReserved)
		}},
		{"direct discovery: reservation found by serial; a DPU without host is a host-less entry", lcOpts{}, func(t *testing.T, s *lcSite) {
			s.em(macA, lcDPU{"S1", "10.0.0.150", "fd00:1::50"})
			res, err := s.a.Discover(s.ctx, DiscoverSpec{SerialNumber: "S1"})
			if err != nil {
				t.Fatal(err)
			}
			wantIncomplete(t, res)
			if len(res.Machines) != 1 || res.Machines[0].Kind != KindDPU || res.Machines[0].HostMachineID != nil {
				t.Fatalf("machines = %+v", res.Machines)
			}
			s.wantLoopbacks("S1", "10.0.0.150", "fd00:1::50")
			b, _ := json.Marshal(res.Machines[0])
			if !strings.Contains(string(b), `"kind":"dpu"`) || !strings.Contains(string(b), `"host_machine_id":null`) {
				t.Fatalf("host-less JSON = %s", b)
			}
			// The site explorer later reports its host: it is attached, same values.
			s.report(macA, "S1")
			m, err := s.a.GetMachine(s.ctx, "S1")
			if err != nil || deref(m.HostMachineID) != HostMachineID(macA) {
				t.Fatalf("DPU after report = %+v, %v", m, err)
			}
			s.wantLoopbacks("S1", "10.0.0.150", "fd00:1::50")
		}},
		{"lo-ip-v6 defined after ingestion: pool creation completes the v6 loopbacks", lcOpts{noV6: true}, func(t *testing.T, s *lcSite) {
			s.report(macA, "S1", "S2")
			s.wantLoopbacks("S1", "10.0.0.1", "")
			s.wantStatus("S1", BindingAutomatic, BindingNone)
			s.pool(PoolLoopbackV6, "ipv6", rng("fd00::1", "fd00::ff", true))
			s.wantLoopbacks("S1", "10.0.0.1", "fd00::1")
			s.wantLoopbacks("S2", "10.0.0.2", "fd00::2")
		}},
		{"pool exhausted: DPU recorded, missing, completed by pool growth", lcOpts{autoV4: [2]string{"10.0.0.1", "10.0.0.1"}}, func(t *testing.T, s *lcSite) {
			res := s.report(macA, "S1", "S2")
			wantIncomplete(t, res, DPUMachineID("S2")+"/ipv4/pool_exhausted")
			s.wantLoopbacks("S2", "", "fd00::2")
			s.wantStatus("S2", BindingMissing, BindingAutomatic)
			if _, err := s.a.AddRange(s.ctx, PoolLoopbackV4, rng("10.0.0.2", "10.0.0.3", true)); err != nil {
				t.Fatal(err)
			}
			s.wantLoopbacks("S2", "10.0.0.2", "fd00::2")
		}},
		{"IPv4 and IPv6 independent: reserved v4 assigned while the v6 pool is exhausted, then v6 completed by growth", lcOpts{autoV6: [2]string{"fd00::1", "fd00::1"}}, func(t *testing.T, s *lcSite) {
			s.em(macA, lcDPU{serial: "S1"}, lcDPU{"S2", "10.0.0.150", ""}, lcDPU{"S3", "", "fd00:1::1"})
			res := s.report(macA, "S3", "S2", "S1")
			wantIncomplete(t, res, DPUMachineID("S2")+"/ipv6/pool_exhausted")
			s.wantLoopbacks("S1", "10.0.0.1", "fd00::1")
			s.wantLoopbacks("S2", "10.0.0.150", "")
			s.wantLoopbacks("S3", "10.0.0.2", "fd00:1::1") // reserved v6 needs no free auto value
			s.wantStatus("S2", BindingReserved, BindingMissing)
			s.wantStatus("S3", BindingAutomatic, BindingReserved)
			if _, err := s.a.AddRange(s.ctx, PoolLoopbackV6, rng("fd00::2", "fd00::f", true)); err != nil {
				t.Fatal(err)
			}
			s.wantLoopbacks("S2", "10.0.0.150", "fd00::2")
			s.wantStatus("S2", BindingReserved, BindingAutomatic)
		}},
		{"decommission and delete refusals: not ready, not decommissioned, decommissioned host reported", lcOpts{}, func(t *testing.T, s *lcSite) {
			s.report(macA, "S1")
			_, err := s.a.DeleteMachine(s.ctx, HostMachineID(macA), false)
			testkit.WantCode(t, err, fault.CodeConflict, "", "decommission it first")
			_, err = s.a.Decommission(s.ctx, DPUMachineID("S1"))
			testkit.WantCode(t, err, fault.CodeConflict, "", "decommission the host")
			s.decommission(HostMachineID(macA))
			_, err = s.a.Decommission(s.ctx, HostMachineID(macA))
			testkit.WantCode(t, err, fault.CodeConflict, "", "not ready")
			_, err = s.a.Report(s.ctx, ReportSpec{BmcMacAddress: macA, DPUs: []ReportDPU{{SerialNumber: "S1"}}})
			testkit.WantCode(t, err, fault.CodeConflict, "", "decommissioned")
			s.wantLoopbacks("S1", "10.0.0.1", "fd00::1") // decommission alone keeps the values
			_, err = s.a.Decommission(s.ctx, "nope")
			testkit.WantCode(t, err, fault.CodeNotFound, "")
		}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			lcEach(t, r.opts, r.run)
		})
	}
}

func wantActions(t *testing.T, imp *DeleteImpact, want ...string) {
	t.Helper()
	var got []string
	for _, v := range imp.Values {
		got = append(got, v.Pool+" "+v.Value+" "+v.Action)
		if v.Reason == "" {
			t.Fatalf("impact value without reason: %+v", v)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("impact = %v; want %v", got, want)
	}
}

func TestReportValidation(t *testing.T) {
	t.Parallel()
	lcEach(t, lcOpts{}, func(t *testing.T, s *lcSite) {
		cases := []struct {
			spec  ReportSpec
			field string
		}{
			{ReportSpec{BmcMacAddress: "nope"}, "bmc_mac_address"},
			{ReportSpec{BmcMacAddress: macA, DPUs: []ReportDPU{{SerialNumber: "S1"}, {SerialNumber: "bad serial"}}}, "dpus[1].serial_number"},
			{ReportSpec{BmcMacAddress: macA, DPUs: []ReportDPU{{SerialNumber: "S1"}, {SerialNumber: ""}}}, "dpus[1].serial_number"},
			{ReportSpec{BmcMacAddress: macA, DPUs: []ReportDPU{{SerialNumber: "S1"}, {SerialNumber: "S2"}, {SerialNumber: "S1"}}}, "dpus[2].serial_number"},
		}
		for _, c := range cases {
			_, err := s.a.Report(s.ctx, c.spec)
			if e := testkit.WantCode(t, err, fault.CodeInvalid, ""); e.Field != c.field {
				t.Fatalf("%+v: field %q, want %q", c.spec, e.Field, c.field)
			}
		}
		_, err := s.a.Discover(s.ctx, DiscoverSpec{SerialNumber: "S1", HostBmcMacAddress: "zz"})
		if e := testkit.WantCode(t, err, fault.CodeInvalid, ""); e.Field != "host_bmc_mac_address" {
			t.Fatalf("field %q", e.Field)
		}
		var n int64
		s.db.Model(&models.Machine{}).Count(&n)
		if n != 0 {
			t.Fatalf("refused reports recorded %d machines", n)
		}
		// MAC addresses in any case with '-' are the same host.
		s.report("0A-00-00-00-00-0A", "S1")
		s.report(macA, "S1")
		s.db.Model(&models.Machine{}).Where("kind = ?", KindHost).Count(&n)
		if n != 1 {
			t.Fatalf("%d hosts for one BMC MAC", n)
		}
	})
}

// TestReportOrderIndependence: DPUs reported in reversed order get the
// same values, reserved and automatic.
func TestReportOrderIndependence(t *testing.T) {
	t.Parallel()
	serials := []string{"S1", "S2", "S3", "S4"}
	results := map[string][2]string{}
	for _, reversed := range []bool{false, true} {
		// Distinct subtest names: a '#' that Go adds to repeated names would
		// end up in the SQLite file path, where it starts a URI fragment.
		name := "in-order"
		if reversed {
			name = "reversed"
		}
		t.Run(name, func(t *testing.T) { lcOrderRun(t, reversed, serials, results) })
	}
}

func lcOrderRun(t *testing.T, reversed bool, serials []string, results map[string][2]string) {
	{
		dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
			s := newLC(t, db, lcOpts{})
			s.em(macA, lcDPU{"S2", "10.0.0.150", ""}, lcDPU{"S4", "", "fd00:1::4"}, lcDPU{serial: "S1"}, lcDPU{serial: "S3"})
			order := append([]string(nil), serials...)
			if reversed {
				for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
					order[i], order[j] = order[j], order[i]
				}
			}
			wantIncomplete(t, s.report(macA, order...))
			for _, x := range serials {
				v4, v6 := s.loopbacks(x)
				k := fmt.Sprintf("%s/%s", db.Dialector.Name(), x)
				if prev, ok := results[k]; ok && prev != [2]string{v4, v6} {
					t.Fatalf("%s: reversed order gave %v, in order %v", x, [2]string{v4, v6}, prev)
				}
				results[k] = [2]string{v4, v6}
			}
			s.wantLoopbacks("S2", "10.0.0.150", "fd00::2")
			s.wantLoopbacks("S4", "10.0.0.3", "fd00:1::4")
		})
	}
}

// TestConcurrentReportsOneDPU: 10 reports racing for one DPU allocate once
// per family.
func TestConcurrentReportsOneDPU(t *testing.T) {
	t.Parallel()
	lcEach(t, lcOpts{}, func(t *testing.T, s *lcSite) {
		s.em(macA, lcDPU{"S1", "", "fd00:1::9"})
		var wg sync.WaitGroup
		errs := make(chan error, 10)
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.a.Report(s.ctx, ReportSpec{BmcMacAddress: macA, DPUs: []ReportDPU{{SerialNumber: "S1"}}})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("concurrent report: %v", err)
			}
		}
		var n int64
		s.db.Model(&models.Allocation{}).Count(&n)
		if n != 2 {
			t.Fatalf("%d allocations for one DPU; want 2 (one per family)", n)
		}
		s.wantLoopbacks("S1", "10.0.0.1", "fd00:1::9")
		var machines int64
		s.db.Model(&models.Machine{}).Count(&machines)
		if machines != 2 {
			t.Fatalf("%d machine rows; want host + DPU", machines)
		}
	})
}

// TestConcurrentReportsDistinctHosts: 50 hosts reported at once all get
// distinct loopbacks of both families.
func TestConcurrentReportsDistinctHosts(t *testing.T) {
	t.Parallel()
	lcEach(t, lcOpts{autoV4: [2]string{"10.0.0.1", "10.0.0.99"}}, func(t *testing.T, s *lcSite) {
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				res, err := s.a.Report(s.ctx, ReportSpec{BmcMacAddress: fmt.Sprintf("0a:00:00:00:01:%02x", i),
					DPUs: []ReportDPU{{SerialNumber: fmt.Sprintf("CS%02d", i)}}})
				if err == nil && len(res.Incomplete) > 0 {
					err = fmt.Errorf("incomplete: %+v", res.Incomplete)
				}
				errs <- err
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("concurrent report: %v", err)
			}
		}
		seen := map[string]string{}
		for i := 0; i < 50; i++ {
			serial := fmt.Sprintf("CS%02d", i)
			v4, v6 := s.loopbacks(serial)
			for _, v := range []string{v4, v6} {
				if v == "" {
					t.Fatalf("%s missing a loopback", serial)
				}
				if other, dup := seen[v]; dup {
					t.Fatalf("%s and %s share %s", serial, other, v)
				}
				seen[v] = serial
			}
		}
	})
}

// TestForceDeleteReingestNeverAnothersValue: with the auto range full, a
// value quarantined for one machine is not handed to another (the pool is
// exhausted for it) and goes back to its own hardware.
func TestForceDeleteReingestNeverAnothersValue(t *testing.T) {
	t.Parallel()
	lcEach(t, lcOpts{autoV4: [2]string{"10.0.0.1", "10.0.0.2"}}, func(t *testing.T, s *lcSite) {
		s.report(macA, "S1")
		s.report(macB, "S2")
		s.delete(HostMachineID(macA), true)
		res := s.report(macC, "S3")
		wantIncomplete(t, res, DPUMachineID("S3")+"/ipv4/pool_exhausted")
		_, _, err := s.a.Allocate(s.ctx, PoolLoopbackV4, Owner{"network", "x"}, "")
		testkit.WantCode(t, err, fault.CodePoolExhausted, "")
		res = s.report(macA, "S1")
		wantIncomplete(t, res)
		s.wantLoopbacks("S1", "10.0.0.1", "fd00::1")
		s.wantStatus("S3", BindingMissing, BindingAutomatic)
	})
}

// TestMachineConstraints tries to break the database rules behind the
// machine records directly.
func TestMachineConstraints(t *testing.T) {
	t.Parallel()
	lcEach(t, lcOpts{}, func(t *testing.T, s *lcSite) {
		s.report(macA, "S1")
		now := time.Now().UTC()
		dup := models.Machine{MachineID: "other", Kind: KindDPU, State: StateReady, SerialNumber: strp("S1"), Version: 1, CreatedAt: now, UpdatedAt: now}
		if err := s.db.Create(&dup).Error; !database.IsConstraintViolation(err) {
			t.Fatalf("second machine with serial S1: %v", err)
		}
		bad := models.Machine{MachineID: "bad", Kind: KindHost, State: "broken", Version: 1, CreatedAt: now, UpdatedAt: now}
		if err := s.db.Create(&bad).Error; !database.IsConstraintViolation(err) {
			t.Fatalf("state outside ready/decommissioned: %v", err)
		}
		var p models.Pool
		s.db.Where("name = ?", PoolLoopbackV4).Take(&p)
		second := models.Allocation{PoolID: p.ID, ValueKey: *lcKey("10.0.0.5"), Value: "10.0.0.5", State: models.StateAllocated,
			OwnerType: strp(OwnerTypeMachine), OwnerID: strp(DPUMachineID("S1")), RunEnd: true, AllocatedAt: now}
		if err := s.db.Create(&second).Error; !database.IsConstraintViolation(err) {
			t.Fatalf("second lo-ip value for one DPU: %v", err)
		}
		other := models.Allocation{PoolID: p.ID, ValueKey: *lcKey("10.0.0.1"), Value: "10.0.0.1", State: models.StateAllocated,
			OwnerType: strp(OwnerTypeMachine), OwnerID: strp("someone-else"), RunEnd: true, AllocatedAt: now}
		if err := s.db.Create(&other).Error; !database.IsConstraintViolation(err) {
			t.Fatalf("two DPUs with one loopback: %v", err)
		}
		// The network configs themselves never share a loopback (migration 3).
		s.report(macB, "S2")
		for _, col := range []string{"loopback_ip", "loopback_ip_v6"} {
			v4, v6 := s.loopbacks("S1")
			v := map[string]string{"loopback_ip": v4, "loopback_ip_v6": v6}[col]
			err := s.db.Model(&models.NetworkConfig{}).Where("machine_id = ?", DPUMachineID("S2")).Update(col, v).Error
			if !database.IsConstraintViolation(err) {
				t.Fatalf("two network configs with %s %s: %v", col, v, err)
			}
		}
		// Concurrent attempts: many writers set one value on distinct DPUs; at most one wins.
		for i := 0; i < 8; i++ {
			s.report(fmt.Sprintf("0a:00:00:00:04:%02x", i), fmt.Sprintf("K%d", i))
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				err := s.db.Model(&models.NetworkConfig{}).Where("machine_id = ?", DPUMachineID(fmt.Sprintf("K%d", i))).Update("loopback_ip", "10.0.0.250").Error
				if err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				} else if !database.IsConstraintViolation(err) && !database.IsRetryable(err) {
					t.Errorf("writer %d: %v", i, err)
				}
			}(i)
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d writers set one loopback; want exactly 1", wins)
		}
	})
}

func TestListMachinesAndBindings(t *testing.T) {
	t.Parallel()
	lcEach(t, lcOpts{}, func(t *testing.T, s *lcSite) {
		s.em(macA, lcDPU{"S1", "10.0.0.150", ""})
		s.report(macA, "S1", "S2")
		s.report(macB, "S3")
		if _, err := s.a.Discover(s.ctx, DiscoverSpec{SerialNumber: "S4"}); err != nil {
			t.Fatal(err)
		}
		page, err := s.a.ListMachines(s.ctx, MachineFilter{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 2 || page.NextCursor == "" {
			t.Fatalf("page 1 = %d items, cursor %q", len(page.Items), page.NextCursor)
		}
		page2, err := s.a.ListMachines(s.ctx, MachineFilter{Limit: 2, Cursor: page.NextCursor})
		if err != nil || len(page2.Items) != 1 || page2.NextCursor != "" {
			t.Fatalf("page 2 = %+v, %v", page2, err)
		}
		kinds := map[string]int{}
		for _, m := range append(page.Items, page2.Items...) {
			kinds[m.Kind]++
		}
		if kinds[KindHost] != 2 || kinds[KindDPU] != 1 {
			t.Fatalf("kinds = %v", kinds)
		}
		_, err = s.a.ListMachines(s.ctx, MachineFilter{State: "gone"})
		testkit.WantCode(t, err, fault.CodeInvalid, "")
		bp, err := s.a.ListBindings(s.ctx, BindingFilter{})
		if err != nil || len(bp.Items) != 4 {
			t.Fatalf("bindings = %+v, %v", bp, err)
		}
		bp, err = s.a.ListBindings(s.ctx, BindingFilter{Status: BindingReserved})
		if err != nil || len(bp.Items) != 1 || bp.Items[0].SerialNumber != "S1" {
			t.Fatalf("reserved bindings = %+v, %v", bp, err)
		}
		bp, err = s.a.ListBindings(s.ctx, BindingFilter{Limit: 3})
		if err != nil || len(bp.Items) != 3 || bp.NextCursor == "" {
			t.Fatalf("bindings page = %+v, %v", bp, err)
		}
		_, err = s.a.ListBindings(s.ctx, BindingFilter{Status: "odd"})
		testkit.WantCode(t, err, fault.CodeInvalid, "")
		b, _ := json.Marshal(s.binding("S3"))
		for _, k := range []string{`"reserved_ip":null`, `"expected_machine_id":null`, `"status_v4":"automatic"`} {
			if !strings.Contains(string(b), k) {
				t.Fatalf("binding JSON %s lacks %s", b, k)
			}
		}
		// GET /addresses finds loopbacks of both families.
		for _, v := range []string{"10.0.0.150", "fd00::1"} {
			info, err := s.a.LookupAddress(s.ctx, v)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range info.Entries {
				if e.Kind == "allocation" && deref(e.OwnerType) == OwnerTypeMachine && strings.HasPrefix(deref(e.OwnerID), "fm100ds") {
					found = true
				}
			}
			if !found {
				t.Fatalf("lookup %s = %+v", v, info.Entries)
			}
		}
	})
}

// TestConcurrentReportsManyProcesses: reports racing through three
// database handles (as three server processes sharing one database) for
// one DPU, and for 30 distinct hosts, still allocate once per family and
// never share a loopback. A force delete racing the reports leaves either
// the machine with its values or its values quarantined, never both.
func TestConcurrentReportsManyProcesses(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			var u string
			if d == models.Postgres {
				u = dbtest.NewPostgresURL(t)
			} else {
				u = dbtest.NewSQLiteURL(t)
			}
			var sites []*lcSite
			for i := 0; i < 3; i++ {
				db := dbtest.OpenURL(t, u)
				s := &lcSite{t: t, db: db, a: New(db, Options{}), ctx: audit.WithActor(context.Background(), fmt.Sprintf("proc-%d", i), "")}
				sites = append(sites, s)
			}
			s0 := sites[0]
			s0.pool(PoolLoopbackV4, "ipv4", rng("10.0.0.1", "10.0.0.99", true), rng("10.0.0.100", "10.0.0.199", false))
			s0.pool(PoolLoopbackV6, "ipv6", rng("fd00::1", "fd00::ff", true))
			s0.em(macA, lcDPU{"S1", "10.0.0.150", ""})
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for i := 0; i < 30; i++ {
				wg.Add(2)
				go func(i int) {
					defer wg.Done()
					_, err := sites[i%3].a.Report(sites[i%3].ctx, ReportSpec{BmcMacAddress: macA, DPUs: []ReportDPU{{SerialNumber: "S1"}}})
					errs <- err
				}(i)
				go func(i int) {
					defer wg.Done()
					_, err := sites[i%3].a.Report(sites[i%3].ctx, ReportSpec{BmcMacAddress: fmt.Sprintf("0a:00:00:00:03:%02x", i),
						DPUs: []ReportDPU{{SerialNumber: fmt.Sprintf("P%02d", i)}}})
					errs <- err
				}(i)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("report: %v", err)
				}
			}
			s0.wantLoopbacks("S1", "10.0.0.150", s0.heldBy(PoolLoopbackV6, DPUMachineID("S1")))
			var dup int64
			for _, col := range []string{"loopback_ip", "loopback_ip_v6"} {
				if err := s0.db.Raw(`SELECT COUNT(*) FROM (SELECT ` + col + ` FROM network_configs WHERE ` + col + ` IS NOT NULL GROUP BY ` + col + ` HAVING COUNT(*) > 1) x`).Scan(&dup).Error; err != nil {
					t.Fatal(err)
				}
				if dup != 0 {
					t.Fatalf("%d %s values shared by several DPUs", dup, col)
				}
			}
			var complete int64
			s0.db.Model(&models.NetworkConfig{}).Where("loopback_ip IS NOT NULL AND loopback_ip_v6 IS NOT NULL").Count(&complete)
			if complete != 31 {
				t.Fatalf("%d complete network configs; want 31", complete)
			}
			var n int64
			s0.db.Model(&models.Allocation{}).Count(&n)
			if n != 62 {
				t.Fatalf("%d allocations; want 31 DPUs x 2 families", n)
			}
			// Force delete racing reports of the same host.
			wg = sync.WaitGroup{}
			errs = make(chan error, 16)
			for i := 0; i < 6; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					s := sites[i%3]
					var err error
					if i == 3 {
						_, err = s.a.DeleteMachine(s.ctx, HostMachineID(macA), true)
					} else {
						_, err = s.a.Report(s.ctx, ReportSpec{BmcMacAddress: macA, DPUs: []ReportDPU{{SerialNumber: "S1"}}})
					}
					errs <- err
				}(i)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("race with force delete: %v", err)
				}
			}
			v6 := s0.heldBy(PoolLoopbackV6, DPUMachineID("S1"))
			var q int64
			s0.db.Model(&models.Allocation{}).Where("state = ? AND former_owner_id = ?", models.StateQuarantined, DPUMachineID("S1")).Count(&q)
			if (v6 == "") == (q == 0) {
				t.Fatalf("after the race: S1 holds %q and has %d quarantined values", v6, q)
			}
			if v6 != "" {
				s0.wantLoopbacks("S1", "10.0.0.150", v6)
			}
		})
	}
}
