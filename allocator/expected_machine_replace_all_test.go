package allocator

// Replace-all of more records than one write chunk (emFlushRecords): the
// chunked, set-based write stores exactly what the file says, keeps the
// versions and audit events of record-by-record writes, and stays all or
// nothing when a chunk after the first fails.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/models"
)

// emBigFile is a replace-all file of the records idx: record i has BMC MAC
// i, DPU serial MT-i and the reserved IPv4 loopback of value(i) in
// 10.64.0.0/20; user(i) is its BMC user name.
func emBigFile(idx []int, value func(i int) int, user func(i int) string) []ExpectedMachineSpec {
	specs := make([]ExpectedMachineSpec, 0, len(idx))
	for _, i := range idx {
		v := fmt.Sprintf("10.64.%d.%d", value(i)>>8, value(i)&255)
		specs = append(specs, ExpectedMachineSpec{BmcMacAddress: fmt.Sprintf("0a:00:00:00:%02x:%02x", i>>8, i&255),
			BmcUsername: user(i), ChassisSerialNumber: fmt.Sprintf("C%d", i),
			ExpectedDPUs: emDPUs(ExpectedDPU{SerialNumber: fmt.Sprintf("MT-%d", i), LoopbackIP: &v})})
	}
	return specs
}

func emBigPools(f *fnd) {
	f.t.Helper()
	f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.64.0.0", "10.64.15.255", false), rng("10.80.0.0", "10.80.0.255", true))
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// emStoredDPUs maps each stored DPU serial to its record's BMC MAC and
// IPv4 loopback.
func (f *fnd) emStoredDPUs() map[string]string {
	f.t.Helper()
	var rows []struct {
		SerialNumber, BmcMacAddress string
		LoopbackIP                  *string
	}
	if err := f.db.Raw(`SELECT d.serial_number, e.bmc_mac_address, d.loopback_ip FROM expected_dpus d
 JOIN expected_machines e ON e.id = d.expected_machine_id`).Scan(&rows).Error; err != nil {
		f.t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.SerialNumber] = r.BmcMacAddress + " " + deref(r.LoopbackIP)
	}
	return out
}

func TestReplaceAllAcrossChunks(t *testing.T) {
	t.Parallel()
	n := emFlushRecords + 150
	fndEach(t, func(t *testing.T, f *fnd) {
		emBigPools(f)
		root := func(int) string { return "root" }
		first, err := f.a.ReplaceAllExpectedMachines(f.ctx, emBigFile(seq(n), func(i int) int { return i }, root))
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]string{}
		for _, em := range first {
			ids[em.BmcMacAddress] = em.ID
		}
		events0 := f.countRows(&models.AuditEvent{}, "1=1")

		// The last 10 records go; the first n-500 pass their reservation
		// on to the previous record (so values move between records and
		// across chunks); the others keep their DPU list; every 7th record
		// changes its user name too.
		keep := seq(n - 10)
		moved := n - 500
		value := func(i int) int {
			if i < moved {
				return (i + 1) % moved
			}
			return i
		}
		user := func(i int) string {
			if i%7 == 0 {
				return "admin"
			}
			return "root"
		}
		items, err := f.a.ReplaceAllExpectedMachines(f.ctx, emBigFile(keep, value, user))
		if err != nil {
			t.Fatal(err)
		}
		changed := 0
		for i, em := range items {
			want := int64(1)
			if i < moved || i%7 == 0 {
				want, changed = 2, changed+1
			}
			if em.ID != ids[em.BmcMacAddress] || em.Version != want || em.BmcUsername != user(i) {
				t.Fatalf("item %d: %+v, want id %s version %d", i, em, ids[em.BmcMacAddress], want)
			}
		}
		dpus := f.emStoredDPUs()
		if len(dpus) != len(keep) {
			t.Fatalf("%d DPU rows, want %d", len(dpus), len(keep))
		}
		for _, i := range keep {
			v := value(i)
			want := fmt.Sprintf("0a:00:00:00:%02x:%02x 10.64.%d.%d", i>>8, i&255, v>>8, v&255)
			if got := dpus[fmt.Sprintf("MT-%d", i)]; got != want {
				t.Fatalf("DPU MT-%d: %q, want %q", i, got, want)
			}
		}
		var stored []models.ExpectedMachine
		if err := f.db.Order("bmc_mac_address").Find(&stored).Error; err != nil {
			t.Fatal(err)
		}
		for i, st := range stored {
			if st.Version != items[i].Version || st.BmcUsername != user(i) || st.ChassisSerialNumber != fmt.Sprintf("C%d", i) ||
				!st.UpdatedAt.Equal(f.clock.Now()) {
				t.Fatalf("row %d: %+v, want version %d", i, st, items[i].Version)
			}
		}

		// One event per deleted record, then per updated record in list
		// order, then the summary; each says what changed.
		var evs []models.AuditEvent
		if err := f.db.Where("id > (SELECT MIN(id) FROM audit_events) + ?", events0-1).Order("id").Find(&evs).Error; err != nil {
			t.Fatal(err)
		}
		if len(evs) != 10+changed+1 {
			t.Fatalf("%d events, want %d", len(evs), 10+changed+1)
		}
		for k, ev := range evs[:10] {
			if ev.Action != "expected_machine.delete" || ev.ObjectID != ids[fmt.Sprintf("0a:00:00:00:%02x:%02x", (n-10+k)>>8, (n-10+k)&255)] ||
				ev.AfterJSON != nil || !strings.Contains(*ev.BeforeJSON, fmt.Sprintf(`"serial_number":"MT-%d"`, n-10+k)) {
				t.Fatalf("delete event %d: %+v", k, ev)
			}
		}
		k := 10
		for i, em := range items {
			if em.Version == 1 {
				continue
			}
			ev := evs[k]
			k++
			var before, after ExpectedMachine
			if ev.Action != "expected_machine.update" || ev.ObjectID != em.ID ||
				json.Unmarshal([]byte(*ev.BeforeJSON), &before) != nil || json.Unmarshal([]byte(*ev.AfterJSON), &after) != nil {
				t.Fatalf("update event of record %d: %+v", i, ev)
			}
			if before.Version != 1 || after.Version != 2 || *before.ExpectedDPUs[0].LoopbackIP != fmt.Sprintf("10.64.%d.%d", i>>8, i&255) ||
				*after.ExpectedDPUs[0].LoopbackIP != *em.ExpectedDPUs[0].LoopbackIP || after.BmcUsername != user(i) {
				t.Fatalf("update event of record %d: before %+v after %+v", i, before, after)
			}
		}
		if last := evs[len(evs)-1]; last.Action != "expected_machine.replace_all" ||
			!strings.Contains(*last.AfterJSON, fmt.Sprintf(`"updated":%d`, changed)) || !strings.Contains(*last.AfterJSON, `"deleted":10`) {
			t.Fatalf("summary event: %+v", last)
		}

		// The same file again changes nothing; a file that moves every
		// reservation rewrites every DPU row.
		events1 := f.countRows(&models.AuditEvent{}, "1=1")
		again, err := f.a.ReplaceAllExpectedMachines(f.ctx, emBigFile(keep, value, user))
		if err != nil {
			t.Fatal(err)
		}
		for i := range again {
			if again[i].Version != items[i].Version {
				t.Fatalf("re-import changed record %d: %+v", i, again[i])
			}
		}
		if got := f.countRows(&models.AuditEvent{}, "1=1"); got != events1+1 {
			t.Fatalf("re-import wrote %d events, want 1", got-events1)
		}
		all := func(i int) int { return (i + 3) % len(keep) }
		if _, err := f.a.ReplaceAllExpectedMachines(f.ctx, emBigFile(keep, all, user)); err != nil {
			t.Fatal(err)
		}
		dpus = f.emStoredDPUs()
		for _, i := range keep {
			v := all(i)
			want := fmt.Sprintf("0a:00:00:00:%02x:%02x 10.64.%d.%d", i>>8, i&255, v>>8, v&255)
			if got := dpus[fmt.Sprintf("MT-%d", i)]; got != want || len(dpus) != len(keep) {
				t.Fatalf("every value moved: DPU MT-%d %q, want %q (%d rows)", i, got, want, len(dpus))
			}
		}
	})
}

// A write that fails after earlier chunks were written leaves nothing of
// them: a trigger of the test refuses one DPU row of the last chunk.
func TestReplaceAllFailingLateChunkChangesNothing(t *testing.T) {
	t.Parallel()
	n := emFlushRecords + 150
	fndEach(t, func(t *testing.T, f *fnd) {
		emBigPools(f)
		root := func(int) string { return "root" }
		if _, err := f.a.ReplaceAllExpectedMachines(f.ctx, emBigFile(seq(300), func(i int) int { return i }, root)); err != nil {
			t.Fatal(err)
		}
		bad := fmt.Sprintf("MT-%d", n-5)
		if f.a.dialect == models.Postgres {
			for _, q := range []string{
				`CREATE FUNCTION em_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.serial_number = '` + bad + `' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$`,
				`CREATE TRIGGER em_test_refuse BEFORE INSERT ON expected_dpus FOR EACH ROW EXECUTE FUNCTION em_test_refuse()`,
			} {
				if err := f.db.Exec(q).Error; err != nil {
					t.Fatal(err)
				}
			}
		} else if err := f.db.Exec(`CREATE TRIGGER em_test_refuse BEFORE INSERT ON expected_dpus
 WHEN NEW.serial_number = '` + bad + `' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`).Error; err != nil {
			t.Fatal(err)
		}
		before := f.emSnap()
		_, err := f.a.ReplaceAllExpectedMachines(f.ctx, emBigFile(seq(n), func(i int) int { return (i + 1) % n }, root))
		if err == nil || !strings.Contains(err.Error(), "refused by the test") {
			t.Fatalf("replace-all: %v, want the trigger's refusal", err)
		}
		if f.emSnap() != before {
			t.Fatal("a replace-all that failed in its last chunk changed state")
		}
	})
}
