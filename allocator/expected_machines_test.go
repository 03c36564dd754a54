package allocator

// Tests of ExpectedMachines and their loopback reservations (docs/reservations.md,
// §5, §10). Helpers start with "em" so other test files stay free to name
// theirs. Every test runs on SQLite and PostgreSQL (fndEach).

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// emPools creates lo-ip and lo-ip-v6 as in the demo site: auto ranges below
// explicit (auto_assign=false) ranges.
func emPools(f *fnd) {
	f.t.Helper()
	f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.180.62.1", "10.180.62.199", true), rng("10.180.62.200", "10.180.62.255", false))
	f.mkPool(PoolLoopbackV6, "ipv6", 0, rng("fd00:180:62::1", "fd00:180:62::ffff", true), rng("fd00:180:62:1::", "fd00:180:62:1::ff", false))
}

func sp(s string) *string { return &s }

func emDPUs(d ...ExpectedDPU) *[]ExpectedDPU { return &d }

func emDPU4(serial, v4, v6 string) ExpectedDPU {
	d := ExpectedDPU{SerialNumber: serial}
	if v4 != "" {
		d.LoopbackIP = &v4
	}
	if v6 != "" {
		d.LoopbackIPv6 = &v6
	}
	return d
}

func emSpec(mac string, dpus ...ExpectedDPU) ExpectedMachineSpec {
	return ExpectedMachineSpec{BmcMacAddress: mac, BmcUsername: "root", BmcPassword: sp("s3cret-" + mac),
		ChassisSerialNumber: "CHS-" + mac, Metadata: &Metadata{Name: "host-" + mac}, ExpectedDPUs: emDPUs(dpus...)}
}

func (f *fnd) emCreate(spec ExpectedMachineSpec) *ExpectedMachine {
	f.t.Helper()
	em, err := f.a.CreateExpectedMachine(f.ctx, spec)
	if err != nil {
		f.t.Fatalf("create %s: %v", spec.BmcMacAddress, err)
	}
	return em
}

// emSnap is everything a refused ExpectedMachine change must leave alone.
func (f *fnd) emSnap() string {
	f.t.Helper()
	var out []string
	for _, m := range []struct {
		model any
		order string
	}{{&models.ExpectedMachine{}, "id"}, {&models.ExpectedDPU{}, "id"}, {&models.Allocation{}, "id"}, {&models.AuditEvent{}, "id"}} {
		var rows []map[string]any
		if err := f.db.Model(m.model).Order(m.order).Find(&rows).Error; err != nil {
			f.t.Fatal(err)
		}
		b, _ := json.Marshal(rows)
		out = append(out, string(b))
	}
	return strings.Join(out, "\n")
}

// Every validation rule of docs/reservations.md with its code and field path
// (§5 "Which code when"): malformed, wrong family, outside the pool, in an
// auto-assign range or duplicated inside the request is 422 invalid; a
// collision with other stored state is 409 (conflict for MACs and serials,
// not_available for values). A refused create changes nothing.
func TestExpectedMachineValidationRules(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		f.emCreate(emSpec("0a:00:00:00:00:01", emDPU4("MT-A1", "10.180.62.210", "fd00:180:62:1::10")))
		f.alloc(PoolLoopbackV4, DPUMachineID("MT-OTHER"), "10.180.62.220")
		f.alloc(PoolLoopbackV4, DPUMachineID("MT-NEW"), "10.180.62.221")
		f.alloc(PoolLoopbackV4, DPUMachineID("MT-GONE"), "10.180.62.230")
		f.quarantine(PoolLoopbackV4, "10.180.62.230")
		f.alloc(PoolLoopbackV6, DPUMachineID("MT-OTHER"), "fd00:180:62:1::20")
		const mac = "0a:00:00:00:00:02"
		long := strings.Repeat("M", 65)
		cases := []struct {
			name  string
			spec  ExpectedMachineSpec
			code  fault.Code
			field string
		}{
			{"MAC missing", emSpec(""), fault.CodeInvalid, "bmc_mac_address"},
			{"MAC malformed", emSpec("0a:00:00:00:00"), fault.CodeInvalid, "bmc_mac_address"},
			{"MAC mixed separators", emSpec("0a:00-00:00:00:02"), fault.CodeInvalid, "bmc_mac_address"},
			{"serial empty", emSpec(mac, emDPU4("  ", "", "")), fault.CodeInvalid, "expected_dpus[0].serial_number"},
			{"serial with a space", emSpec(mac, emDPU4("MT 1", "", "")), fault.CodeInvalid, "expected_dpus[0].serial_number"},
			{"serial 65 characters", emSpec(mac, emDPU4(long, "", "")), fault.CodeInvalid, "expected_dpus[0].serial_number"},
			{"serial twice in the record names the later", emSpec(mac, emDPU4("MT-1", "", ""), emDPU4(" MT-1 ", "", "")), fault.CodeInvalid, "expected_dpus[1].serial_number"},
			{"loopback_ip malformed", emSpec(mac, emDPU4("MT-1", "10.180.62", "")), fault.CodeInvalid, "expected_dpus[0].loopback_ip"},
			{"loopback_ip of the wrong family", emSpec(mac, emDPU4("MT-1", "fd00:180:62:1::1", "")), fault.CodeInvalid, "expected_dpus[0].loopback_ip"},
			{"loopback_ip_v6 of the wrong family", emSpec(mac, emDPU4("MT-1", "", "10.180.62.201")), fault.CodeInvalid, "expected_dpus[0].loopback_ip_v6"},
			{"loopback_ip_v6 IPv4-mapped", emSpec(mac, emDPU4("MT-1", "", "::ffff:10.180.62.201")), fault.CodeInvalid, "expected_dpus[0].loopback_ip_v6"},
			{"loopback_ip_v6 zoned", emSpec(mac, emDPU4("MT-1", "", "fe80::1%eth0")), fault.CodeInvalid, "expected_dpus[0].loopback_ip_v6"},
			{"loopback_ip outside lo-ip", emSpec(mac, emDPU4("MT-1", "10.99.0.1", "")), fault.CodeInvalid, "expected_dpus[0].loopback_ip"},
			{"loopback_ip in an auto-assign range", emSpec(mac, emDPU4("MT-1", "10.180.62.5", "")), fault.CodeInvalid, "expected_dpus[0].loopback_ip"},
			{"loopback_ip_v6 outside lo-ip-v6", emSpec(mac, emDPU4("MT-1", "", "fd00:1::1")), fault.CodeInvalid, "expected_dpus[0].loopback_ip_v6"},
			{"loopback_ip_v6 in an auto-assign range", emSpec(mac, emDPU4("MT-1", "", "fd00:180:62::5")), fault.CodeInvalid, "expected_dpus[0].loopback_ip_v6"},
			{"loopback_ip twice in the record", emSpec(mac, emDPU4("MT-1", "10.180.62.201", ""), emDPU4("MT-2", "10.180.62.201", "")), fault.CodeInvalid, "expected_dpus[1].loopback_ip"},
			{"loopback_ip_v6 twice in the record (other spelling)", emSpec(mac, emDPU4("MT-1", "", "fd00:180:62:1::1"), emDPU4("MT-2", "", "FD00:180:62:1:0::1")), fault.CodeInvalid, "expected_dpus[1].loopback_ip_v6"},
			{"label key twice", ExpectedMachineSpec{BmcMacAddress: mac, Metadata: &Metadata{Labels: []Label{{"env", "a"}, {"env", "b"}}}}, fault.CodeInvalid, "metadata.labels[1].key"},
			{"label key empty", ExpectedMachineSpec{BmcMacAddress: mac, Metadata: &Metadata{Labels: []Label{{" ", "a"}}}}, fault.CodeInvalid, "metadata.labels[0].key"},
			{"malformed before colliding", emSpec(mac, emDPU4("MT-A1", "10.180.62.210", ""), emDPU4("MT-2", "10.180.62.5", "")), fault.CodeInvalid, "expected_dpus[1].loopback_ip"},
			{"BMC MAC of another ExpectedMachine (other spelling)", emSpec("0A-00-00-00-00-01"), fault.CodeConflict, "bmc_mac_address"},
			{"serial declared by another ExpectedMachine", emSpec(mac, emDPU4("MT-A1", "", "")), fault.CodeConflict, "expected_dpus[0].serial_number"},
			{"loopback_ip declared by another ExpectedDpu", emSpec(mac, emDPU4("MT-1", "10.180.62.210", "")), fault.CodeNotAvailable, "expected_dpus[0].loopback_ip"},
			{"loopback_ip_v6 declared by another ExpectedDpu", emSpec(mac, emDPU4("MT-1", "", "fd00:180:62:1::10")), fault.CodeNotAvailable, "expected_dpus[0].loopback_ip_v6"},
			{"loopback_ip allocated to another owner", emSpec(mac, emDPU4("MT-1", "10.180.62.220", "")), fault.CodeNotAvailable, "expected_dpus[0].loopback_ip"},
			{"loopback_ip_v6 allocated to another owner", emSpec(mac, emDPU4("MT-1", "", "fd00:180:62:1::20")), fault.CodeNotAvailable, "expected_dpus[0].loopback_ip_v6"},
			{"loopback_ip quarantined for another machine", emSpec(mac, emDPU4("MT-1", "10.180.62.230", "")), fault.CodeNotAvailable, "expected_dpus[0].loopback_ip"},
		}
		for _, c := range cases {
			before := f.emSnap()
			_, err := f.a.CreateExpectedMachine(f.ctx, c.spec)
			if err == nil {
				t.Fatalf("%s: accepted", c.name)
			}
			e, _ := fault.AsError(err)
			if e == nil || e.Code != c.code || e.Field != c.field {
				t.Fatalf("%s: got %v, want %s on %s", c.name, err, c.code, c.field)
			}
			if e.Code.Status() != map[fault.Code]int{fault.CodeInvalid: 422, fault.CodeConflict: 409, fault.CodeNotAvailable: 409}[c.code] {
				t.Fatalf("%s: status %d", c.name, e.Code.Status())
			}
			// The console's as-you-type validation gives the same answer.
			if verr := f.a.ValidateExpectedMachine(f.ctx, "", c.spec); verr == nil || verr.Error() != err.Error() {
				t.Fatalf("%s: ValidateExpectedMachine says %v, the write said %v", c.name, verr, err)
			}
			if after := f.emSnap(); after != before {
				t.Fatalf("%s: a refused create changed stored state", c.name)
			}
		}
		// Values held by the DPU with that very serial may be reserved for
		// it: allocated to it, or quarantined for it.
		f.alloc(PoolLoopbackV4, DPUMachineID("MT-NEW2"), "10.180.62.231")
		f.quarantine(PoolLoopbackV4, "10.180.62.231")
		ok := emSpec(mac, emDPU4("MT-NEW", "10.180.62.221", ""), emDPU4("MT-NEW2", "10.180.62.231", "fd00:180:62:1::21"))
		if err := f.a.ValidateExpectedMachine(f.ctx, "", ok); err != nil {
			t.Fatalf("validate: %v", err)
		}
		em := f.emCreate(ok)
		if len(em.ExpectedDPUs) != 2 || *em.ExpectedDPUs[1].LoopbackIPv6 != "fd00:180:62:1::21" || em.ExpectedDPUs[0].LoopbackIPv6 != nil {
			t.Fatalf("created %+v", em.ExpectedDPUs)
		}
		// Once declared, the value is refused to any other requester.
		_, _, err := f.a.Allocate(f.ctx, PoolLoopbackV4, own("someone"), "10.180.62.210")
		testkit.WantCode(t, err, fault.CodeNotAvailable, "", "declared for DPU MT-A1")
	})
}

// A reservation for a family whose pool does not exist is rejected (422
// naming the field); the other family stays usable.
func TestExpectedMachineMissingFamilyPool(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.180.62.200", "10.180.62.255", false))
		_, err := f.a.CreateExpectedMachine(f.ctx, emSpec("0a:00:00:00:00:02", emDPU4("MT-1", "10.180.62.201", "fd00:180:62:1::1")))
		testkit.WantCode(t, err, fault.CodeInvalid, "expected_dpus[0].loopback_ip_v6")
		testkit.WantCode(t, err, fault.CodeInvalid, "", `pool "lo-ip-v6" does not exist`)
		em := f.emCreate(emSpec("0a:00:00:00:00:02", emDPU4("MT-1", "10.180.62.201", "")))
		if *em.ExpectedDPUs[0].LoopbackIP != "10.180.62.201" {
			t.Fatalf("%+v", em)
		}
		// A pool of the wrong type under the loopback name is refused too.
		f.mkPool(PoolLoopbackV6, "ipv4", 0, rng("10.1.0.0", "10.1.0.10", false))
		_, err = f.a.CreateExpectedMachine(f.ctx, emSpec("0a:00:00:00:00:03", emDPU4("MT-3", "", "fd00::1")))
		testkit.WantCode(t, err, fault.CodeInvalid, "expected_dpus[0].loopback_ip_v6")
	})
}

// The JSON shape of docs/api.md: normalised MAC, empty metadata shape,
// expected_dpus never null, bmc_password never returned.
func TestExpectedMachineShape(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		em := f.emCreate(ExpectedMachineSpec{BmcMacAddress: "1A-1B-1C-1D-1E-1F", BmcPassword: sp("pw")})
		b, _ := json.Marshal(em)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if m["bmc_mac_address"] != "1a:1b:1c:1d:1e:1f" || m["bmc_password_set"] != true || m["version"] != float64(1) {
			t.Fatalf("shape %s", b)
		}
		if _, ok := m["bmc_password"]; ok || strings.Contains(string(b), `"pw"`) {
			t.Fatalf("password returned: %s", b)
		}
		for _, want := range []string{`"metadata":{"name":"","description":"","labels":[]}`, `"expected_dpus":[]`,
			`"fallback_dpu_serial_numbers":[]`, `"sku_id":null`} {
			if !strings.Contains(string(b), want) {
				t.Fatalf("%s lacks %s", b, want)
			}
		}
		for _, key := range []string{em.ID, "1A:1B:1C:1D:1E:1F", "1a-1b-1c-1d-1e-1f"} {
			got, err := f.a.GetExpectedMachine(f.ctx, key)
			if err != nil || got.ID != em.ID {
				t.Fatalf("get %s: %+v %v", key, got, err)
			}
		}
		_, err := f.a.GetExpectedMachine(f.ctx, "0a:00:00:00:00:99")
		testkit.WantCode(t, err, fault.CodeNotFound, "")
		_, err = f.a.GetExpectedMachine(f.ctx, "no-such-id")
		testkit.WantCode(t, err, fault.CodeNotFound, "")
	})
}

// Compatibility with older clients (docs/reservations.md): a client that knows
// neither expected_dpus nor bmc_password GETs a record, drops those two
// fields from the JSON and PUTs it back: the reservations and the password
// survive. [] clears the list; PATCH null clears it too; PUT resets other
// absent fields.
func TestExpectedMachineOlderClientRoundTrip(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		em := f.emCreate(emSpec("0a:00:00:00:00:01", emDPU4("MT-1", "10.180.62.201", "fd00:180:62:1::1"), emDPU4("MT-2", "10.180.62.202", "")))
		b, _ := json.Marshal(em)
		var doc map[string]any
		_ = json.Unmarshal(b, &doc)
		delete(doc, "expected_dpus")
		delete(doc, "bmc_password")
		doc["chassis_serial_number"] = "CHS-NEW"
		b, _ = json.Marshal(doc)
		spec, err := DecodeExpectedMachineSpec(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.a.ReplaceExpectedMachine(f.ctx, em.ID, spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.ChassisSerialNumber != "CHS-NEW" || got.Version != 2 || len(got.ExpectedDPUs) != 2 || *got.ExpectedDPUs[0].LoopbackIP != "10.180.62.201" || !got.BmcPasswordSet {
			t.Fatalf("after older-client PUT: %+v", got)
		}
		var row models.ExpectedMachine
		f.db.Where("id = ?", em.ID).Take(&row)
		if row.BmcPassword != "s3cret-0a:00:00:00:00:01" {
			t.Fatalf("password lost: %q", row.BmcPassword)
		}
		// A client that models the password as a plain string sends "": kept.
		spec.BmcPassword = sp("")
		if got, err = f.a.ReplaceExpectedMachine(f.ctx, em.ID, spec, nil); err != nil || !got.BmcPasswordSet {
			t.Fatalf("PUT with empty password: %+v %v", got, err)
		}
		// PUT resets absent fields (metadata, sku) except the two above.
		got, err = f.a.ReplaceExpectedMachine(f.ctx, em.ID, ExpectedMachineSpec{BmcMacAddress: "0a:00:00:00:00:01"}, nil)
		if err != nil || got.ChassisSerialNumber != "" || got.Metadata.Name != "" || got.BmcUsername != "" || len(got.ExpectedDPUs) != 2 || !got.BmcPasswordSet {
			t.Fatalf("PUT with only the MAC: %+v %v", got, err)
		}
		// [] clears.
		got, err = f.a.ReplaceExpectedMachine(f.ctx, em.ID, ExpectedMachineSpec{BmcMacAddress: "0a:00:00:00:00:01", ExpectedDPUs: emDPUs()}, nil)
		if err != nil || len(got.ExpectedDPUs) != 0 || f.countRows(&models.ExpectedDPU{}, "1=1") != 0 {
			t.Fatalf("PUT []: %+v %v", got, err)
		}
		// The freed values can be declared by another machine now.
		f.emCreate(emSpec("0a:00:00:00:00:02", emDPU4("MT-9", "10.180.62.201", "")))
	})
}

// PATCH is a JSON merge patch: absent members keep, objects merge, arrays
// replace, null resets; expected_dpus null clears; bmc_password null clears.
func TestExpectedMachinePatch(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		spec := emSpec("0a:00:00:00:00:01", emDPU4("MT-1", "10.180.62.201", ""))
		spec.Metadata = &Metadata{Name: "r1", Description: "d", Labels: []Label{{"env", "prod"}}}
		spec.FallbackDPUSerialNumbers = []string{"FB-1"}
		em := f.emCreate(spec)
		got, err := f.a.PatchExpectedMachine(f.ctx, em.BmcMacAddress, []byte(`{"metadata":{"name":"r2"},"sku_id":"sku-1"}`), nil)
		if err != nil || got.Metadata.Name != "r2" || got.Metadata.Description != "d" || len(got.Metadata.Labels) != 1 ||
			deref(got.SkuID) != "sku-1" || len(got.ExpectedDPUs) != 1 || got.FallbackDPUSerialNumbers[0] != "FB-1" || !got.BmcPasswordSet || got.Version != 2 {
			t.Fatalf("merge: %+v %v", got, err)
		}
		got, err = f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{"expected_dpus":[{"serial_number":"MT-1","loopback_ip_v6":"fd00:180:62:1::1"}]}`), txn.IfMatch{2})
		if err != nil || got.ExpectedDPUs[0].LoopbackIP != nil || *got.ExpectedDPUs[0].LoopbackIPv6 != "fd00:180:62:1::1" {
			t.Fatalf("replace dpus: %+v %v", got, err)
		}
		before := f.emSnap()
		_, err = f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{"chassis_serial_number":"x"}`), txn.IfMatch{2})
		testkit.WantCode(t, err, fault.CodeStaleVersion, "")
		_, err = f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{"expected_dpus":[{"serial_number":"MT-1","loopback_ip":"10.180.62.1"}]}`), nil)
		testkit.WantCode(t, err, fault.CodeInvalid, "expected_dpus[0].loopback_ip")
		_, err = f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{"expected_dpus":[{"serial_number":"MT-1","loopback_ip":7}]}`), nil)
		testkit.WantCode(t, err, fault.CodeInvalid, "expected_dpus[0].loopback_ip")
		_, err = f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`[1]`), nil)
		testkit.WantCode(t, err, fault.CodeBadRequest, "")
		if f.emSnap() != before {
			t.Fatal("refused patches changed stored state")
		}
		got, err = f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{"expected_dpus":null,"metadata":{"labels":null}}`), txn.IfMatch{3})
		if err != nil || len(got.ExpectedDPUs) != 0 || len(got.Metadata.Labels) != 0 || got.Metadata.Name != "r2" {
			t.Fatalf("null clears: %+v %v", got, err)
		}
		got, err = f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{"bmc_password":null}`), nil)
		if err != nil || got.BmcPasswordSet {
			t.Fatalf("password null: %+v %v", got, err)
		}
		got, err = f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{"bmc_password":"new-pw"}`), nil)
		if err != nil || !got.BmcPasswordSet {
			t.Fatalf("password set: %+v %v", got, err)
		}
		// An empty patch changes nothing and keeps the version.
		v := got.Version
		if got, err = f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{}`), nil); err != nil || got.Version != v {
			t.Fatalf("empty patch: %+v %v", got, err)
		}
	})
}

// If-Match: a stale version is 412 on PUT, PATCH and DELETE and changes
// nothing; the current version or no precondition proceeds.
func TestExpectedMachineIfMatch(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		em := f.emCreate(emSpec("0a:00:00:00:00:01"))
		before := f.emSnap()
		_, err := f.a.ReplaceExpectedMachine(f.ctx, em.ID, emSpec("0a:00:00:00:00:01"), txn.IfMatch{7})
		testkit.WantCode(t, err, fault.CodeStaleVersion, "")
		testkit.WantCode(t, f.a.DeleteExpectedMachine(f.ctx, em.ID, txn.IfMatch{-1}), fault.CodeStaleVersion, "")
		if f.emSnap() != before {
			t.Fatal("stale writes changed state")
		}
		s := emSpec("0a:00:00:00:00:01")
		s.ChassisSerialNumber = "C2"
		if got, err := f.a.ReplaceExpectedMachine(f.ctx, em.ID, s, txn.IfMatch{1}); err != nil || got.Version != 2 {
			t.Fatalf("PUT with current version: %+v %v", got, err)
		}
		if err := f.a.DeleteExpectedMachine(f.ctx, em.ID, txn.IfMatch{2}); err != nil {
			t.Fatal(err)
		}
		testkit.WantCode(t, f.a.DeleteExpectedMachine(f.ctx, em.ID, nil), fault.CodeNotFound, "")
	})
}

// Concurrent creates reserving the same value (and the same serial) from
// 10 goroutines: exactly one wins, every other gets 409 naming the field.
func TestExpectedMachineConcurrentReservations(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		race := func(name string, mk func(i int) ExpectedMachineSpec, code fault.Code, field string) {
			var wg sync.WaitGroup
			errs := make([]error, 10)
			for i := 0; i < 10; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					_, errs[i] = f.a.CreateExpectedMachine(f.ctx, mk(i))
				}(i)
			}
			wg.Wait()
			wins := 0
			for _, err := range errs {
				if err == nil {
					wins++
					continue
				}
				testkit.WantCode(t, err, code, field)
			}
			if wins != 1 {
				t.Fatalf("%s: %d winners, want exactly 1", name, wins)
			}
		}
		race("same loopback_ip", func(i int) ExpectedMachineSpec {
			return emSpec(fmt.Sprintf("0a:00:00:00:01:%02x", i), emDPU4(fmt.Sprintf("MT-V4-%d", i), "10.180.62.250", ""))
		}, fault.CodeNotAvailable, "expected_dpus[0].loopback_ip")
		race("same loopback_ip_v6", func(i int) ExpectedMachineSpec {
			return emSpec(fmt.Sprintf("0a:00:00:00:02:%02x", i), emDPU4(fmt.Sprintf("MT-V6-%d", i), "", "fd00:180:62:1::fa"))
		}, fault.CodeNotAvailable, "expected_dpus[0].loopback_ip_v6")
		race("same serial", func(i int) ExpectedMachineSpec {
			return emSpec(fmt.Sprintf("0a:00:00:00:03:%02x", i), emDPU4("MT-SAME", "", ""))
		}, fault.CodeConflict, "expected_dpus[0].serial_number")
		race("same BMC MAC", func(i int) ExpectedMachineSpec { return emSpec("0a:00:00:00:04:01") }, fault.CodeConflict, "bmc_mac_address")
		if n := f.countRows(&models.ExpectedDPU{}, "loopback_ip = ?", "10.180.62.250"); n != 1 {
			t.Fatalf("%d rows declare 10.180.62.250", n)
		}
	})
}

// Without the loopback pools there is no pool lock to queue on: the unique
// constraints alone decide, and their violations are still 409 with the
// field, never 500.
func TestExpectedMachineConcurrentSerialWithoutPools(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		var wg sync.WaitGroup
		errs := make([]error, 10)
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, errs[i] = f.a.CreateExpectedMachine(f.ctx, emSpec(fmt.Sprintf("0a:00:00:00:05:%02x", i), emDPU4("MT-RACE", "", "")))
			}(i)
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			if err == nil {
				wins++
			} else {
				testkit.WantCode(t, err, fault.CodeConflict, "expected_dpus[0].serial_number")
			}
		}
		if wins != 1 {
			t.Fatalf("%d winners", wins)
		}
	})
}

// The database itself refuses two ExpectedDpus with one serial, one
// loopback_ip or one loopback_ip_v6, whatever code writes them.
func TestExpectedDPUUniqueConstraints(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.declare("MT-1", "10.180.62.201", "fd00:180:62:1::1")
		em := models.ExpectedMachine{ID: "em-x", BmcMacAddress: "0a:00:00:00:00:09", FallbackDPUSerialNumbers: "[]", MetadataLabels: "[]", Version: 1,
			CreatedAt: f.clock.Now(), UpdatedAt: f.clock.Now()}
		if err := f.db.Create(&em).Error; err != nil {
			t.Fatal(err)
		}
		k4 := fromAddr(mustAddr(t, "10.180.62.201")).key()
		k6 := fromAddr(mustAddr(t, "fd00:180:62:1::1")).key()
		for name, d := range map[string]models.ExpectedDPU{
			"serial":         {ExpectedMachineID: "em-x", SerialNumber: "MT-1"},
			"loopback_ip":    {ExpectedMachineID: "em-x", SerialNumber: "MT-2", LoopbackIP: sp("10.180.62.201"), LoopbackIPKey: &k4},
			"loopback_ip_v6": {ExpectedMachineID: "em-x", SerialNumber: "MT-3", LoopbackIPv6: sp("fd00:180:62:1::1"), LoopbackIPv6Key: &k6},
			"v4 key":         {ExpectedMachineID: "em-x", SerialNumber: "MT-4", LoopbackIP: sp("10.180.62.201 "), LoopbackIPKey: &k4},
		} {
			err := f.db.Create(&d).Error
			if !database.IsUniqueViolation(err) {
				t.Fatalf("%s: duplicate accepted or wrong error: %v", name, err)
			}
			mapped := emConstraintError(err, "expected_dpus[0]", "bmc_mac_address")
			if e, ok := fault.AsError(mapped); !ok || e.Code.Status() != 409 || !strings.HasPrefix(e.Field, "expected_dpus[0].") {
				t.Fatalf("%s: maps to %v", name, mapped)
			}
		}
	})
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := parseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Replace-all: the NICo file as is; atomic; validated against the final
// state (two records may swap reservations); existing BMC MACs keep their
// id; absent records are deleted; one bad record changes nothing and the
// error names the record index and field.
func TestExpectedMachineReplaceAll(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		a := f.emCreate(emSpec("0a:00:00:00:00:01", emDPU4("MT-A", "10.180.62.201", "fd00:180:62:1::1")))
		b := f.emCreate(emSpec("0a:00:00:00:00:02", emDPU4("MT-B", "10.180.62.202", "")))
		f.emCreate(emSpec("0a:00:00:00:00:03"))
		f.alloc(PoolLoopbackV4, "someone", "10.180.62.240")
		file := func(s string) []ExpectedMachineSpec {
			t.Helper()
			specs, err := ParseExpectedMachinesFile([]byte(s))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			return specs
		}
		bad := []struct {
			name, body string
			code       fault.Code
			field      string
		}{
			{"malformed value in record 2", `{"expected_machines":[{"bmc_mac_address":"0a:00:00:00:00:01"},{"bmc_mac_address":"0a:00:00:00:00:02"},
				{"bmc_mac_address":"0a:00:00:00:00:09","expected_dpus":[{"serial_number":"MT-9","loopback_ip":"10.180.62.1"}]}]}`, fault.CodeInvalid, "expected_machines[2].expected_dpus[0].loopback_ip"},
			{"same value in two records names the later", `{"expected_machines":[{"bmc_mac_address":"0a:00:00:00:00:08","expected_dpus":[{"serial_number":"MT-8","loopback_ip":"10.180.62.209"}]},
				{"bmc_mac_address":"0a:00:00:00:00:09","expected_dpus":[{"serial_number":"MT-9","loopback_ip":"10.180.62.209"}]}]}`, fault.CodeInvalid, "expected_machines[1].expected_dpus[0].loopback_ip"},
			{"same serial in two records", `{"expected_machines":[{"bmc_mac_address":"0a:00:00:00:00:08","expected_dpus":[{"serial_number":"MT-8"}]},
				{"bmc_mac_address":"0a:00:00:00:00:09","expected_dpus":[{"serial_number":"MT-8"}]}]}`, fault.CodeInvalid, "expected_machines[1].expected_dpus[0].serial_number"},
			{"same MAC twice", `{"expected_machines":[{"bmc_mac_address":"0a:00:00:00:00:08"},{"bmc_mac_address":"0A-00-00-00-00-08"}]}`, fault.CodeInvalid, "expected_machines[1].bmc_mac_address"},
			{"value allocated to another owner", `{"expected_machines":[{"bmc_mac_address":"0a:00:00:00:00:08","expected_dpus":[{"serial_number":"MT-8","loopback_ip":"10.180.62.240"}]}]}`, fault.CodeNotAvailable, "expected_machines[0].expected_dpus[0].loopback_ip"},
			{"collides with reservations a record keeps", `{"expected_machines":[{"bmc_mac_address":"0a:00:00:00:00:01"},
				{"bmc_mac_address":"0a:00:00:00:00:08","expected_dpus":[{"serial_number":"MT-8","loopback_ip":"10.180.62.201"}]}]}`, fault.CodeNotAvailable, "expected_machines[1].expected_dpus[0].loopback_ip"},
			{"wrong JSON type names the record", `{"expected_machines":[{"bmc_mac_address":"0a:00:00:00:00:01"},{"bmc_mac_address":"0a:00:00:00:00:02","expected_dpus":[{"serial_number":5}]}]}`, fault.CodeInvalid, "expected_machines[1].expected_dpus[0].serial_number"},
		}
		for _, c := range bad {
			before := f.emSnap()
			specs, err := ParseExpectedMachinesFile([]byte(c.body))
			if err == nil {
				_, err = f.a.ReplaceAllExpectedMachines(f.ctx, specs)
			}
			if e, ok := fault.AsError(err); !ok || e.Code != c.code || e.Field != c.field {
				t.Fatalf("%s: got %v, want %s on %s", c.name, err, c.code, c.field)
			}
			if f.emSnap() != before {
				t.Fatalf("%s: refused replace-all changed state", c.name)
			}
		}
		_, err := ParseExpectedMachinesFile([]byte(`{"machines":[]}`))
		testkit.WantCode(t, err, fault.CodeInvalid, "expected_machines")
		_, err = ParseExpectedMachinesFile([]byte(`{"expected_machines":`))
		testkit.WantCode(t, err, fault.CodeBadRequest, "")

		// Swap A's and B's IPv4 reservations, drop record 3, keep A's
		// password (absent), add a new record.
		items, err := f.a.ReplaceAllExpectedMachines(f.ctx, file(`{"expected_machines":[
			{"bmc_mac_address":"0A:00:00:00:00:02","bmc_username":"admin","bmc_password":"pw-b","expected_dpus":[{"serial_number":"MT-B","loopback_ip":"10.180.62.201"}]},
			{"bmc_mac_address":"0a:00:00:00:00:01","bmc_username":"admin","expected_dpus":[{"serial_number":"MT-A","loopback_ip":"10.180.62.202","loopback_ip_v6":"fd00:180:62:1::1"}]},
			{"bmc_mac_address":"0a:00:00:00:00:07","fallback_dpu_serial_numbers":["FB-7"]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != 3 || items[0].ID != b.ID || items[1].ID != a.ID || *items[0].ExpectedDPUs[0].LoopbackIP != "10.180.62.201" ||
			*items[1].ExpectedDPUs[0].LoopbackIP != "10.180.62.202" || !items[1].BmcPasswordSet || items[2].Version != 1 {
			t.Fatalf("after replace-all: %+v", items)
		}
		if n := f.countRows(&models.ExpectedMachine{}, "1=1"); n != 3 {
			t.Fatalf("%d records, want 3 (record 3 deleted)", n)
		}
		// A record that leaves expected_dpus out keeps its reservations; an
		// identical re-import changes nothing (same versions).
		items, err = f.a.ReplaceAllExpectedMachines(f.ctx, file(`{"expected_machines":[
			{"bmc_mac_address":"0a:00:00:00:00:02","bmc_username":"admin"},
			{"bmc_mac_address":"0a:00:00:00:00:01","bmc_username":"admin","expected_dpus":[{"serial_number":"MT-A","loopback_ip":"10.180.62.202","loopback_ip_v6":"fd00:180:62:1::1"}]},
			{"bmc_mac_address":"0a:00:00:00:00:07","fallback_dpu_serial_numbers":["FB-7"]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if len(items[0].ExpectedDPUs) != 1 || *items[0].ExpectedDPUs[0].LoopbackIP != "10.180.62.201" || items[1].Version != 2 || items[2].Version != 1 {
			t.Fatalf("keep/unchanged: %+v", items)
		}
		// An empty list removes everything.
		if items, err = f.a.ReplaceAllExpectedMachines(f.ctx, file(`{"expected_machines":[]}`)); err != nil || len(items) != 0 ||
			f.countRows(&models.ExpectedDPU{}, "1=1") != 0 {
			t.Fatalf("empty: %v %v", items, err)
		}
	})
}

// Every change leaves an audit event with before/after, and the BMC
// password appears in none of them.
func TestExpectedMachineAuditRedactsPassword(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		spec := emSpec("0a:00:00:00:00:01", emDPU4("MT-1", "10.180.62.201", ""))
		spec.BmcPassword = sp("very-secret-pw-1")
		em := f.emCreate(spec)
		if _, err := f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{"bmc_password":"very-secret-pw-2"}`), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := f.a.ReplaceAllExpectedMachines(f.ctx, []ExpectedMachineSpec{{BmcMacAddress: "0a:00:00:00:00:02", BmcPassword: sp("very-secret-pw-3")}}); err != nil {
			t.Fatal(err)
		}
		page, err := audit.ListEvents(f.ctx, f.a.DB(), audit.EventFilter{Action: "expected_machine."})
		if err != nil {
			t.Fatal(err)
		}
		actions := map[string]int{}
		for _, e := range page.Items {
			actions[e.Action]++
			raw := string(e.Before) + string(e.After)
			if strings.Contains(raw, "very-secret") {
				t.Fatalf("event %s carries the password: %s", e.Action, raw)
			}
		}
		if actions["expected_machine.create"] != 2 || actions["expected_machine.update"] != 1 || actions["expected_machine.delete"] != 1 || actions["expected_machine.replace_all"] != 1 {
			t.Fatalf("actions %v", actions)
		}
		var upd audit.Event
		for _, e := range page.Items {
			if e.Action == "expected_machine.update" {
				upd = e
			}
		}
		if !strings.Contains(string(upd.After), `"bmc_password_changed":true`) || !strings.Contains(string(upd.Before), `"bmc_password_set":true`) ||
			!strings.Contains(string(upd.Before), `"10.180.62.201"`) || upd.Actor != "test" || upd.RequestID != "req-1" {
			t.Fatalf("update event %+v / %s / %s", upd, upd.Before, upd.After)
		}
	})
}

// List filters (BMC MAC, serial — chassis, expected or fallback DPU —,
// label, free text) and keyset pagination.
func TestExpectedMachineListFilters(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		for i := 1; i <= 5; i++ {
			s := emSpec(fmt.Sprintf("0a:00:00:00:00:%02x", i), emDPU4(fmt.Sprintf("MT-%d", i), "", ""))
			s.Metadata.Labels = []Label{{"rack", fmt.Sprintf("r%d", i%2)}}
			s.FallbackDPUSerialNumbers = []string{fmt.Sprintf("FB_%d", i)}
			f.emCreate(s)
		}
		list := func(flt ExpectedMachineFilter) []string {
			t.Helper()
			p, err := f.a.ListExpectedMachines(f.ctx, flt)
			if err != nil {
				t.Fatal(err)
			}
			var macs []string
			for _, em := range p.Items {
				macs = append(macs, em.BmcMacAddress[len(em.BmcMacAddress)-2:])
			}
			return macs
		}
		for name, c := range map[string]struct {
			f    ExpectedMachineFilter
			want string
		}{
			"all":           {ExpectedMachineFilter{}, "[01 02 03 04 05]"},
			"mac":           {ExpectedMachineFilter{BmcMacAddress: "0A-00-00-00-00-03"}, "[03]"},
			"dpu serial":    {ExpectedMachineFilter{SerialNumber: "MT-4"}, "[04]"},
			"chassis":       {ExpectedMachineFilter{SerialNumber: "CHS-0a:00:00:00:00:02"}, "[02]"},
			"fallback":      {ExpectedMachineFilter{SerialNumber: "FB_5"}, "[05]"},
			"no partial":    {ExpectedMachineFilter{SerialNumber: "MT-"}, "[]"},
			"label key":     {ExpectedMachineFilter{Label: "rack"}, "[01 02 03 04 05]"},
			"label k=v":     {ExpectedMachineFilter{Label: "rack=r0"}, "[02 04]"},
			"label case":    {ExpectedMachineFilter{Label: "rack=R0"}, "[]"},
			"search":        {ExpectedMachineFilter{Search: "mt-3"}, "[03]"},
			"first page":    {ExpectedMachineFilter{Limit: 2}, "[01 02]"},
			"after cursor":  {ExpectedMachineFilter{Limit: 2, Cursor: "0a:00:00:00:00:02"}, "[03 04]"},
			"search by mac": {ExpectedMachineFilter{Search: "00:05"}, "[05]"},
		} {
			if got := fmt.Sprint(list(c.f)); got != c.want {
				t.Fatalf("%s: %s, want %s", name, got, c.want)
			}
		}
		p, _ := f.a.ListExpectedMachines(f.ctx, ExpectedMachineFilter{Limit: 2, Cursor: "0a:00:00:00:00:04"})
		if len(p.Items) != 1 || p.NextCursor != "" {
			t.Fatalf("last page %+v", p)
		}
		p, _ = f.a.ListExpectedMachines(f.ctx, ExpectedMachineFilter{Limit: 2})
		if p.NextCursor != "0a:00:00:00:00:02" {
			t.Fatalf("cursor %q", p.NextCursor)
		}
		_, err := f.a.ListExpectedMachines(f.ctx, ExpectedMachineFilter{BmcMacAddress: "nope"})
		testkit.WantCode(t, err, fault.CodeInvalid, "bmc_mac_address")
		_, err = f.a.ListExpectedMachines(f.ctx, ExpectedMachineFilter{Cursor: "nope"})
		testkit.WantCode(t, err, fault.CodeInvalid, "cursor")
	})
}

// ExpectedMachineProblems lists every problem (for a form), in field
// order; for an existing record its own reservations do not collide.
func TestExpectedMachineProblemsForForms(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		em := f.emCreate(emSpec("0a:00:00:00:00:01", emDPU4("MT-1", "10.180.62.201", "")))
		ps, err := f.a.ExpectedMachineProblems(f.ctx, "", ExpectedMachineSpec{BmcMacAddress: "x",
			ExpectedDPUs: emDPUs(emDPU4("", "1.2.3", ""), emDPU4("MT-2", "", "10.0.0.1"))})
		if err != nil {
			t.Fatal(err)
		}
		var fields []string
		for _, p := range ps {
			fields = append(fields, p.Field)
		}
		if fmt.Sprint(fields) != "[bmc_mac_address expected_dpus[0].serial_number expected_dpus[0].loopback_ip expected_dpus[1].loopback_ip_v6]" {
			t.Fatalf("fields %v", fields)
		}
		// Editing the record itself: its own values and serials are fine,
		// and values may move between its DPUs.
		s := emSpec("0a:00:00:00:00:01", emDPU4("MT-0", "10.180.62.201", ""), emDPU4("MT-1", "10.180.62.202", ""))
		if err := f.a.ValidateExpectedMachine(f.ctx, em.ID, s); err != nil {
			t.Fatal(err)
		}
		if _, err := f.a.ReplaceExpectedMachine(f.ctx, em.ID, s, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// Writers of one record without If-Match queue on the record's row lock:
// every one succeeds (none answers 412), each moves the version once, even
// without the loopback pools whose locks would otherwise serialize them.
func TestExpectedMachineConcurrentUnconditionalWrites(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		em := f.emCreate(emSpec("0a:00:00:00:06:01"))
		var wg sync.WaitGroup
		errs := make([]error, 10)
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				if i%2 == 0 {
					_, errs[i] = f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(fmt.Sprintf(`{"chassis_serial_number":"C-%d"}`, i)), nil)
				} else {
					s := emSpec("0a:00:00:00:06:01")
					s.ChassisSerialNumber = fmt.Sprintf("C-%d", i)
					_, errs[i] = f.a.ReplaceExpectedMachine(f.ctx, em.ID, s, nil)
				}
			}(i)
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("writer %d: %v", i, err)
			}
		}
		got, err := f.a.GetExpectedMachine(f.ctx, em.ID)
		if err != nil || got.Version != 11 {
			t.Fatalf("after 10 writes: %+v %v", got, err)
		}
		// Moving the record to a BMC MAC another record uses is 409.
		f.emCreate(emSpec("0a:00:00:00:06:02"))
		_, err = f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{"bmc_mac_address":"0A:00:00:00:06:02"}`), nil)
		testkit.WantCode(t, err, fault.CodeConflict, "bmc_mac_address")
		got, err = f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{"bmc_mac_address":"0A:00:00:00:06:03"}`), nil)
		if err != nil || got.ID != em.ID || got.BmcMacAddress != "0a:00:00:00:06:03" {
			t.Fatalf("MAC change: %+v %v", got, err)
		}
	})
}

// A PATCH that does not touch expected_dpus keeps them as they are, even
// when a stored reservation has since become unavailable (§4 lifecycle:
// "reserved value unexpectedly unavailable"); a write that does carry the
// list is validated again and refused.
func TestExpectedMachinePatchKeepsUntouchedReservations(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		em := f.emCreate(emSpec("0a:00:00:00:08:01", emDPU4("MT-81", "10.180.62.205", "")))
		var row models.ExpectedDPU
		if err := f.db.Where("serial_number = ?", "MT-81").Take(&row).Error; err != nil {
			t.Fatal(err)
		}
		f.db.Delete(&row)
		f.alloc(PoolLoopbackV4, "someone-else", "10.180.62.205")
		if err := f.db.Create(&row).Error; err != nil {
			t.Fatal(err)
		}
		got, err := f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{"metadata":{"name":"renamed"}}`), nil)
		if err != nil || got.Metadata.Name != "renamed" || *got.ExpectedDPUs[0].LoopbackIP != "10.180.62.205" {
			t.Fatalf("rename: %+v %v", got, err)
		}
		_, err = f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{"expected_dpus":[{"serial_number":"MT-81","loopback_ip":"10.180.62.205"}]}`), nil)
		testkit.WantCode(t, err, fault.CodeNotAvailable, "expected_dpus[0].loopback_ip")
		// Clearing it is always possible.
		if got, err = f.a.PatchExpectedMachine(f.ctx, em.ID, []byte(`{"expected_dpus":null}`), nil); err != nil || len(got.ExpectedDPUs) != 0 {
			t.Fatalf("clear: %+v %v", got, err)
		}
	})
}

// A host name with an invisible or control character (a bidirectional
// override, a zero-width space, a newline) is refused naming the field and
// the value, on create and patch; nothing changes. The console shows a host
// by this name and a force delete is confirmed by typing it.
func TestExpectedMachineNameRefusesInvisibleCharacters(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.emCreate(emSpec("0a:00:00:00:00:01"))
		before := f.emSnap()
		for _, name := range []string{"r01\u202eu10", "r01-u1\u200b0", "r01\nu10", "\ufeffr01-u10"} {
			spec := emSpec("0a:00:00:00:00:02")
			spec.Metadata.Name = name
			_, err := f.a.CreateExpectedMachine(f.ctx, spec)
			testkit.WantCode(t, err, fault.CodeInvalid, "metadata.name")
			if e, _ := fault.AsError(err); !strings.Contains(e.Message, strconv.Quote(name)) {
				t.Errorf("create %q: message %q does not name the value", name, e.Message)
			}
			body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": name}})
			_, err = f.a.PatchExpectedMachine(f.ctx, "0a:00:00:00:00:01", body, nil)
			testkit.WantCode(t, err, fault.CodeInvalid, "metadata.name")
		}
		if after := f.emSnap(); after != before {
			t.Fatalf("refused names changed the ExpectedMachines:\n%s\n%s", before, after)
		}
		spec := emSpec("0a:00:00:00:00:03")
		spec.Metadata.Name = "rack-ünïcode-名前"
		f.emCreate(spec)
	})
}

// The visible-text rule covers every text an operator reads a host by:
// chassis serial, SKU, label keys and values, the description (where tabs
// and line breaks are kept) and a report's chassis serial. Each refusal
// names the field and the value and changes nothing.
func TestVisibleTextOnEveryHostField(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.emCreate(emSpec("0a:00:00:00:00:01"))
		before := f.emSnap()
		const zw = "CHS\u200b-7"
		for field, set := range map[string]func(*ExpectedMachineSpec){
			"chassis_serial_number":    func(s *ExpectedMachineSpec) { s.ChassisSerialNumber = zw },
			"sku_id":                   func(s *ExpectedMachineSpec) { s.SkuID = sp(zw) },
			"metadata.labels[0].key":   func(s *ExpectedMachineSpec) { s.Metadata.Labels = []Label{{Key: zw, Value: "x"}} },
			"metadata.labels[0].value": func(s *ExpectedMachineSpec) { s.Metadata.Labels = []Label{{Key: "rack", Value: "r\u202e7"}} },
			"metadata.description":     func(s *ExpectedMachineSpec) { s.Metadata.Description = "line one\nline\u2066two" },
		} {
			spec := emSpec("0a:00:00:00:00:02")
			set(&spec)
			_, err := f.a.CreateExpectedMachine(f.ctx, spec)
			testkit.WantCode(t, err, fault.CodeInvalid, field)
		}
		_, err := f.a.Report(f.ctx, ReportSpec{BmcMacAddress: "0a:00:00:00:00:01", ChassisSerialNumber: zw})
		testkit.WantCode(t, err, fault.CodeInvalid, "chassis_serial_number")
		if after := f.emSnap(); after != before {
			t.Fatalf("refused texts changed the ExpectedMachines:\n%s\n%s", before, after)
		}
		spec := emSpec("0a:00:00:00:00:03")
		spec.Metadata.Description = "two lines\n\tindented"
		spec.Metadata.Labels = []Label{{Key: "Raum", Value: "Zürich 3"}}
		f.emCreate(spec)
	})
}

// A NUL or other control character in the BMC credentials is refused
// alike on both databases (PostgreSQL text cannot hold a NUL at all), with
// a 422 naming the field, never echoing the password, and nothing stored.
func TestBmcCredentialsRefuseControlCharacters(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.emCreate(emSpec("0a:00:00:00:00:01"))
		before := f.emSnap()
		for field, set := range map[string]func(*ExpectedMachineSpec){
			"bmc_username": func(s *ExpectedMachineSpec) { s.BmcUsername = "ad\x00min" },
			"bmc_password": func(s *ExpectedMachineSpec) { s.BmcPassword = sp("s3cret\x00pw") },
		} {
			spec := emSpec("0a:00:00:00:00:02")
			set(&spec)
			_, err := f.a.CreateExpectedMachine(f.ctx, spec)
			testkit.WantCode(t, err, fault.CodeInvalid, field)
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the refusal repeats the password: %v", err)
			}
		}
		if after := f.emSnap(); after != before {
			t.Fatalf("refused credentials changed the ExpectedMachines:\n%s\n%s", before, after)
		}
		spec := emSpec("0a:00:00:00:00:03")
		spec.BmcUsername, spec.BmcPassword = "Zürich-admin", sp("pä ss;w0rd!")
		f.emCreate(spec)
	})
}
