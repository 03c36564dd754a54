package allocator

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// The names audit events keep (audit_names.go): each event of a machine
// or an ExpectedMachine, and each event whose documents name a machine as
// an owner or a host, stores the name each had when it was written, by
// the rule of names.go, so that renaming or deleting an ExpectedMachine
// later (which renames its host) changes no event.

// eventNameLines is every audit event of db that mentions a machine or
// an ExpectedMachine, oldest first, as "action object names", the ids
// written by label (the others in full).
func eventNameLines(t *testing.T, f *fnd, label map[string]string) []string {
	t.Helper()
	var evs []models.AuditEvent
	if err := f.db.Where("object_type IN ? OR names_json IS NOT NULL", []string{"machine", "expected_machine"}).Order("id").Find(&evs).Error; err != nil {
		t.Fatal(err)
	}
	name := func(id string) string {
		if l, ok := label[id]; ok {
			return l
		}
		return id
	}
	var out []string
	for _, e := range evs {
		names := audit.DecodeNames(e.NamesJSON)
		var parts []string
		for id, n := range names {
			parts = append(parts, name(id)+"="+n)
		}
		sort.Strings(parts)
		out = append(out, e.Action+" "+name(e.ObjectID)+" {"+strings.Join(parts, ", ")+"}")
	}
	return out
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A host and its DPU through their whole life — declared, ingested, their
// ExpectedMachine renamed, reported with a new chassis serial, the
// ExpectedMachine deleted, decommissioned, deleted — and a second host
// force-deleted: every event names the host, the DPU and the
// ExpectedMachine as they were at that moment, a delete by the name
// before it, the DPU's values by their owner's name.
func TestAuditEventsKeepMachineNames(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.50", true), rng("10.0.0.51", "10.0.0.99", false))
		mac, mac2 := "02:00:00:00:50:01", "02:00:00:00:50:02"
		host, dpu := HostMachineID(mac), DPUMachineID("MT5001A")
		host2, dpu2 := HostMachineID(mac2), DPUMachineID("MT5002A")
		em := f.emCreate(ExpectedMachineSpec{BmcMacAddress: mac, ChassisSerialNumber: "CH-5003", Metadata: &Metadata{Name: "rack7-u01"},
			ExpectedDPUs: emDPUs(emDPU4("MT5001A", "10.0.0.51", ""))})
		em2 := f.emCreate(ExpectedMachineSpec{BmcMacAddress: mac2, ChassisSerialNumber: "CH-5010", Metadata: &Metadata{Name: "rack7-u02"}})
		label := map[string]string{host: "host", dpu: "dpu", em.ID: "em", host2: "host2", dpu2: "dpu2", em2.ID: "em2"}
		report := func(mac, chassis, serial string) {
			t.Helper()
			if _, err := f.a.Report(f.ctx, ReportSpec{BmcMacAddress: mac, ChassisSerialNumber: chassis, DPUs: []ReportDPU{{SerialNumber: serial}}}); err != nil {
				t.Fatalf("report %s: %v", mac, err)
			}
		}
		report(mac, "CH-5003", "MT5001A")
		if _, err := f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{"metadata": {"name": "rack7-u01b"}}`), txn.IfMatch{}); err != nil {
			t.Fatal(err)
		}
		report(mac, "CH-5004", "MT5001A")
		if err := f.a.DeleteExpectedMachine(f.ctx, em.ID, txn.IfMatch{}); err != nil {
			t.Fatal(err)
		}
		report(mac, "CH-5005", "MT5001A")
		if _, err := f.a.Decommission(f.ctx, host); err != nil {
			t.Fatal(err)
		}
		if _, err := f.a.DeleteMachine(f.ctx, host, false); err != nil {
			t.Fatal(err)
		}
		report(mac2, "CH-5010", "MT5002A")
		if _, err := f.a.DeleteMachine(f.ctx, host2, true); err != nil {
			t.Fatal(err)
		}
		// The events of the values, by pool/value: lo-ip/10.0.0.1 is the
		// second DPU's (automatic), 10.0.0.51 the first's (reserved).
		label[PoolLoopbackV4+"/10.0.0.51"], label[PoolLoopbackV4+"/10.0.0.1"] = "dpu's value", "dpu2's value"
		sameLines(t, "events with the names they kept", eventNameLines(t, f, label), []string{
			"expected_machine.create em {em=rack7-u01}",
			"expected_machine.create em2 {em2=rack7-u02}",
			"machine.create host {host=rack7-u01}",
			"machine.create dpu {dpu=MT5001A, host=rack7-u01}",
			"allocation.create dpu's value {dpu=MT5001A}",
			"network_config.update dpu {dpu=MT5001A}",
			"expected_machine.update em {em=rack7-u01b}",
			"machine.update host {host=rack7-u01b}",
			"expected_machine.delete em {em=rack7-u01b}",
			"machine.update host {host=CH-5005}",
			"machine.decommission host {host=CH-5005}",
			"machine.decommission dpu {dpu=MT5001A, host=CH-5005}",
			"allocation.release dpu's value {dpu=MT5001A}",
			"machine.delete host {host=CH-5005}",
			"machine.delete dpu {dpu=MT5001A, host=CH-5005}",
			"machine.create host2 {host2=rack7-u02}",
			"machine.create dpu2 {dpu2=MT5002A, host2=rack7-u02}",
			"allocation.create dpu2's value {dpu2=MT5002A}",
			"network_config.update dpu2 {dpu2=MT5002A}",
			"allocation.quarantine dpu2's value {dpu2=MT5002A}",
			"machine.force_delete host2 {host2=rack7-u02}",
			"machine.force_delete dpu2 {dpu2=MT5002A, host2=rack7-u02}",
		})
		// What the console reads now names them otherwise: the events
		// above are the only record of those names.
		now, _, err := MachineNamesOf(f.db, []string{host, host2})
		if err != nil {
			t.Fatal(err)
		}
		if now[host] != "CH-5005" || now[host2] != "rack7-u02" {
			t.Fatalf("names now %v", now)
		}
	})
}

// A replace-all names each ExpectedMachine's event from its record, the
// record before it for a removed one; the replace-all's own event (of
// every record, "*") names none.
func TestAuditEventsOfReplaceAllKeepNames(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.50", true))
		a := f.emCreate(ExpectedMachineSpec{BmcMacAddress: "02:00:00:00:60:01", Metadata: &Metadata{Name: "old-a"}})
		b := f.emCreate(ExpectedMachineSpec{BmcMacAddress: "02:00:00:00:60:02", Metadata: &Metadata{Name: "old-b"}})
		out, err := f.a.ReplaceAllExpectedMachines(f.ctx, []ExpectedMachineSpec{
			{BmcMacAddress: "02:00:00:00:60:01", Metadata: &Metadata{Name: "new-a"}},
			{BmcMacAddress: "02:00:00:00:60:03"}, // no name: its BMC MAC
		})
		if err != nil {
			t.Fatal(err)
		}
		label := map[string]string{a.ID: "a", b.ID: "b", out[1].ID: "c"}
		sameLines(t, "events with the names they kept", eventNameLines(t, f, label), []string{
			"expected_machine.create a {a=old-a}",
			"expected_machine.create b {b=old-b}",
			"expected_machine.delete b {b=old-b}",
			"expected_machine.update a {a=new-a}",
			"expected_machine.create c {c=02:00:00:00:60:03}",
			"expected_machine.replace_all * {}",
		})
	})
}

// Values a DPU is given on every path other than ingestion — one request,
// a bulk request, an owner's pools — and taken back keep the DPU's name;
// an owner_type machine whose id is no machine keeps none (the console
// shows its id).
func TestAuditEventsOfDPUValuesKeepNames(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.50", true))
		f.mkPool("vlans", "integer", 0, rng("100", "199", true))
		f.mkPool("mgmt", "ipv4", 0, rng("10.9.0.1", "10.9.0.50", true))
		if _, err := f.a.Report(f.ctx, ReportSpec{BmcMacAddress: "02:00:00:00:70:01", ChassisSerialNumber: "CH-7001",
			DPUs: []ReportDPU{{SerialNumber: "MT7001A"}}}); err != nil {
			t.Fatal(err)
		}
		dpu := DPUMachineID("MT7001A")
		if _, _, err := f.a.Allocate(f.ctx, "vlans", own(dpu), ""); err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.a.AllocateBulk(f.ctx, "mgmt", []BulkItem{{Owner: own(dpu)}, {Owner: own("not-a-machine")}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.a.AllocateForOwner(f.ctx, own(dpu), []OwnerPoolRequest{{Pool: "vlans"}, {Pool: "mgmt"}}); err != nil {
			t.Fatal(err)
		}
		if err := f.a.Release(f.ctx, "vlans", "100", own(dpu)); err != nil {
			t.Fatal(err)
		}
		var evs []models.AuditEvent
		if err := f.db.Where("object_type = 'allocation' AND object_id NOT LIKE ?", PoolLoopbackV4+"/%").Order("id").Find(&evs).Error; err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, fmt.Sprintf("%s %s %s", e.Action, e.ObjectID, deref(e.NamesJSON)))
		}
		want := `{"` + dpu + `":"MT7001A"}`
		sameLines(t, "the DPU's values' events", got, []string{
			"allocation.create vlans/100 " + want,
			"allocation.create mgmt/10.9.0.1 " + want,
			"allocation.create mgmt/10.9.0.2 ",
			"allocation.release vlans/100 " + want,
		})
	})
}

// Naming the events of a write costs one look-up whatever their number:
// the events of 30 machines (three each, hosts, DPUs and their values)
// are named by as many statements as those of one, two (the machines,
// then the ExpectedMachines of the hosts), plus one for machines that are
// gone (deleted_machines).
func TestAuditNamesOneLookUpPerWrite(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		var ids []string
		for i := range 30 {
			mac := fmt.Sprintf("02:00:00:00:80:%02x", i)
			f.emCreate(ExpectedMachineSpec{BmcMacAddress: mac, Metadata: &Metadata{Name: fmt.Sprintf("rack8-u%02d", i)}})
			serial := fmt.Sprintf("MT80%02dA", i)
			if _, err := f.a.Report(f.ctx, ReportSpec{BmcMacAddress: mac, ChassisSerialNumber: "CH-80", DPUs: []ReportDPU{{SerialNumber: serial}}}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, HostMachineID(mac), DPUMachineID(serial))
		}
		if _, err := f.a.DeleteMachine(f.ctx, ids[len(ids)-2], true); err != nil {
			t.Fatal(err)
		}
		var queries int
		counting := false
		if err := f.db.Callback().Query().After("gorm:query").Register("test:count_audit_names", func(*gorm.DB) {
			if counting {
				queries++
			}
		}); err != nil {
			t.Fatal(err)
		}
		lookUps := func(ids []string) int {
			t.Helper()
			queries = 0
			err := f.a.write(f.ctx, func(w *tx) error {
				for _, id := range ids {
					for _, doc := range []any{
						map[string]any{"machine_id": id},
						map[string]any{"owner_type": OwnerTypeMachine, "owner_id": id},
						map[string]any{"former_owner_type": OwnerTypeMachine, "former_owner_id": id},
					} {
						if err := w.audit("test.names", "machine", id, nil, doc); err != nil {
							return err
						}
					}
				}
				counting = true // the events are named after fn, and only then
				return nil
			})
			counting = false
			if err != nil {
				t.Fatal(err)
			}
			var evs []models.AuditEvent
			if err := f.db.Where("action = 'test.names'").Order("id DESC").Limit(3 * len(ids)).Find(&evs).Error; err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				if n := audit.DecodeNames(e.NamesJSON)[e.ObjectID]; n == "" {
					t.Fatalf("event of %s kept no name: %v", e.ObjectID, deref(e.NamesJSON))
				}
			}
			return queries
		}
		live := ids[:len(ids)-2]
		if one, all := lookUps(live[:1]), lookUps(live); one != 2 || all != 2 {
			t.Fatalf("naming the events of 1 machine took %d statements, of %d machines %d; want 2 for both", one, len(live), all)
		}
		if n := lookUps(ids); n != 3 {
			t.Fatalf("naming the events of %d machines, two of them deleted, took %d statements; want 3", len(ids), n)
		}
	})
}
