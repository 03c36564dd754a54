package allocator

import (
	"strings"
	"testing"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
)

// A merge updates the records whose BMC MAC is stored (they keep their
// ids), creates the others and leaves records absent from the file alone;
// it is validated against the state it leaves, so two records may swap
// their reservations.
func TestImportMergeKeepsIdsAndSwaps(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		a := f.emCreate(emSpec("0a:00:00:00:00:01", emDPU4("MA", "10.180.62.200", "")))
		b := f.emCreate(emSpec("0a:00:00:00:00:02", emDPU4("MB", "10.180.62.201", "")))
		c := f.emCreate(emSpec("0a:00:00:00:00:03", emDPU4("MC", "10.180.62.202", "")))
		res, err := f.a.ImportExpectedMachines(f.ctx, []ExpectedMachineSpec{
			emSpec("0A-00-00-00-00-01", emDPU4("MA", "10.180.62.201", "")), // swaps with b
			emSpec("0a:00:00:00:00:02", emDPU4("MB", "10.180.62.200", "")),
			emSpec("0a:00:00:00:00:04", emDPU4("MD", "10.180.62.203", "fd00:180:62:1::3")),
			emSpec("0a:00:00:00:00:03", emDPU4("MC", "10.180.62.202", "")), // as stored
		}, ImportMerge)
		if err != nil {
			t.Fatal(err)
		}
		if res.Created != 1 || res.Updated != 2 || res.Unchanged != 1 || len(res.Items) != 4 {
			t.Fatalf("result %+v", res)
		}
		wantOutcomes := []string{ImportUpdated, ImportUpdated, ImportCreated, ImportUnchanged}
		for i, r := range res.Records {
			if r.Index != i || r.Outcome != wantOutcomes[i] || r.ID != res.Items[i].ID {
				t.Fatalf("record %d: %+v, want outcome %s", i, r, wantOutcomes[i])
			}
		}
		if res.Items[0].ID != a.ID || res.Items[1].ID != b.ID || res.Items[3].ID != c.ID || res.Items[3].Version != c.Version {
			t.Fatalf("merge changed ids or versions: %+v", res.Items)
		}
		got, err := f.a.GetExpectedMachine(f.ctx, a.ID)
		if err != nil || *got.ExpectedDPUs[0].LoopbackIP != "10.180.62.201" {
			t.Fatalf("a after the swap: %+v, %v", got, err)
		}
		// A record absent from a merge stays.
		if _, err := f.a.ImportExpectedMachines(f.ctx, []ExpectedMachineSpec{emSpec("0a:00:00:00:00:05")}, ImportMerge); err != nil {
			t.Fatal(err)
		}
		page, err := f.a.ListExpectedMachines(f.ctx, ExpectedMachineFilter{})
		if err != nil || len(page.Items) != 5 {
			t.Fatalf("after a second merge: %d records, %v; want 5", len(page.Items), err)
		}
	})
}

// A refused import (merge or replace) writes nothing and lists every
// problem of every record in one pass: malformed parts (422) and, for the
// well-formed parts of the same records, collisions with stored state
// (409), each under expected_machines[i]; records that do not decode are
// failed records too. The error is the first problem.
func TestImportRefusedListsEveryProblem(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		f.emCreate(emSpec("0a:00:00:00:00:09", emDPU4("HELD", "10.180.62.250", "")))
		file := `{"expected_machines":[
		  {"bmc_mac_address":"0a:00:00:00:00:01","expected_dpus":[{"serial_number":"M1","loopback_ip":"10.180.62.200"}]},
		  {"bmc_mac_address":"not-a-mac","expected_dpus":[{"serial_number":"M2","loopback_ip":"10.180.62.5"},
		                                                 {"serial_number":"M3","loopback_ip":"10.180.62.250"}]},
		  {"bmc_mac_address":"0a:00:00:00:00:03","expected_dpus":"not-a-list"}]}`
		for _, mode := range []ImportMode{ImportMerge, ImportReplace} {
			before := f.emSnap()
			res, err := f.a.ImportExpectedMachinesFile(f.ctx, []byte(file), mode)
			testkit.WantCode(t, err, fault.CodeInvalid, "expected_machines[1].bmc_mac_address")
			if f.emSnap() != before {
				t.Fatalf("%s: a refused import changed the database", mode)
			}
			if res == nil || len(res.Records) != 3 || res.Failed() != 2 {
				t.Fatalf("%s: result %+v", mode, res)
			}
			if res.Records[0].Outcome != ImportSkipped || len(res.Records[0].Problems) != 0 {
				t.Fatalf("%s: the valid record: %+v", mode, res.Records[0])
			}
			var fields []string
			for _, p := range res.Records[1].Problems {
				fields = append(fields, string(p.Code)+" "+p.Field)
			}
			want := []string{
				"invalid expected_machines[1].bmc_mac_address",
				"invalid expected_machines[1].expected_dpus[0].loopback_ip",
			}
			if mode == ImportMerge {
				// Replace-all removes the stored record, so its value is free.
				want = append(want, "not_available expected_machines[1].expected_dpus[1].loopback_ip")
			}
			if strings.Join(fields, ", ") != strings.Join(want, ", ") {
				t.Fatalf("%s: problems of record 1:\n %v\nwant\n %v", mode, fields, want)
			}
			if p := res.Records[2].Problems; len(p) != 1 || p[0].Field != "expected_machines[2].expected_dpus" {
				t.Fatalf("%s: problems of the record that does not decode: %+v", mode, p)
			}
		}
		if _, err := f.a.ImportExpectedMachines(f.ctx, nil, ImportMode("upsert")); err == nil {
			t.Fatal("an unknown mode is accepted")
		} else {
			testkit.WantCode(t, err, fault.CodeInvalid, "mode")
		}
	})
}

// Replace through the import is the replace-all: absent records go, and
// every record of the file is reported as replaced with its id.
func TestImportReplace(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		a := f.emCreate(emSpec("0a:00:00:00:00:01", emDPU4("MA", "10.180.62.200", "")))
		f.emCreate(emSpec("0a:00:00:00:00:02"))
		res, err := f.a.ImportExpectedMachines(f.ctx, []ExpectedMachineSpec{emSpec("0a:00:00:00:00:01"), emSpec("0a:00:00:00:00:03")}, ImportReplace)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) != 2 || res.Records[0].Outcome != ImportReplaced || res.Records[0].ID != a.ID {
			t.Fatalf("result %+v", res.Records)
		}
		page, _ := f.a.ListExpectedMachines(f.ctx, ExpectedMachineFilter{})
		if len(page.Items) != 2 {
			t.Fatalf("%d records after replace, want 2", len(page.Items))
		}
	})
}
