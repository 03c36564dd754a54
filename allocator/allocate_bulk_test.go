package allocator

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

func bulkOf(owners ...string) []BulkItem {
	out := make([]BulkItem, len(owners))
	for i, o := range owners {
		id, val, _ := strings.Cut(o, "=")
		out[i] = BulkItem{Owner: own(id), Value: val}
	}
	return out
}

// docs/api.md bulk allocation: the automatic items of a list get exactly
// the lowest free values, in list order, that one-by-one allocation would
// have given (the brute-force oracle), skipping held, quarantined and
// declared values across several ranges; requested items get their
// values; run-end flags stay exact; one audit event per new allocation.
func TestAllocateBulkMatchesOracle(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.0", "10.0.0.40", true), rng("10.0.0.41", "10.0.0.60", false),
			rng("10.0.1.0", "10.0.1.255", true))
		rnd := rand.New(rand.NewSource(7))
		for i := 0; i < 25; i++ {
			f.alloc(PoolLoopbackV4, fmt.Sprintf("pre-%d", i), "")
		}
		for i := 0; i < 25; i += 1 + rnd.Intn(4) {
			f.release(PoolLoopbackV4, fmt.Sprintf("10.0.0.%d", i), fmt.Sprintf("pre-%d", i))
		}
		f.alloc(PoolLoopbackV4, "q", "")
		f.quarantine(PoolLoopbackV4, f.alloc(PoolLoopbackV4, "q", "").Value)
		f.declare("MT-D", f.oracleFree(PoolLoopbackV4)[1], "")
		f.alloc(PoolLoopbackV4, "explicit", "10.0.0.45")

		want := f.oracleFree(PoolLoopbackV4)
		var items []BulkItem
		for i := 0; i < 80; i++ {
			items = append(items, BulkItem{Owner: own(fmt.Sprintf("new-%d", i))})
		}
		// A requested value, an owner that already holds one, and the same
		// owner asking for the value it holds.
		items = append(items[:10], append([]BulkItem{{Owner: own("req"), Value: "10.0.0.50"}, {Owner: own("pre-24")},
			{Owner: own("explicit"), Value: "10.0.0.45"}}, items[10:]...)...)
		out, created, err := f.a.AllocateBulk(f.ctx, PoolLoopbackV4, items)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for i, it := range items {
			if out[i].OwnerID == nil || *out[i].OwnerID != it.Owner.ID {
				t.Fatalf("item %d: answer %+v is not for owner %s (request order)", i, out[i], it.Owner)
			}
			switch {
			case it.Owner.ID == "req":
				if out[i].Value != "10.0.0.50" || !created[i] {
					t.Fatalf("requested: %+v created=%t", out[i], created[i])
				}
			case it.Owner.ID == "explicit":
				if out[i].Value != "10.0.0.45" || created[i] {
					t.Fatalf("held explicit: %+v created=%t", out[i], created[i])
				}
			case it.Owner.ID == "pre-24":
				if out[i].Value != "10.0.0.24" || created[i] {
					t.Fatalf("held: %+v created=%t", out[i], created[i])
				}
			default:
				if out[i].Value != want[k] || !created[i] {
					t.Fatalf("automatic item %d (%s): got %s, the oracle says %s (created=%t)", i, it.Owner, out[i].Value, want[k], created[i])
				}
				k++
			}
		}
		f.checkRunEnds(PoolLoopbackV4)
		if n := f.countRows(&models.AuditEvent{}, "action = ? AND object_id LIKE ?", "allocation.create", PoolLoopbackV4+"/%"); n != 25+1+1+80+1 { // pre-*, q, explicit, new-*, req
			t.Fatalf("%d allocation.create events, want one per allocation made", n)
		}
		// Again: the same answers, nothing created, nothing written.
		before := f.snap()
		again, created, err := f.a.AllocateBulk(f.ctx, PoolLoopbackV4, items)
		if err != nil {
			t.Fatal(err)
		}
		for i := range items {
			if again[i].Value != out[i].Value || created[i] {
				t.Fatalf("repeat item %d: %s created=%t, first time %s", i, again[i].Value, created[i], out[i].Value)
			}
		}
		f.unchanged(before, "repeating a bulk allocation")
	})
}

// The same batch against one-by-one Allocate calls on a twin pool
// (integer pools may overlap), over random holes: identical values.
func TestAllocateBulkEqualsOneByOne(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		for _, name := range []string{"vlan-a", "vlan-b"} {
			f.mkPool(name, "integer", 0, rng("1", "30", true), rng("31", "40", false), rng("100", "400", true))
		}
		rnd := rand.New(rand.NewSource(11))
		for _, name := range []string{"vlan-a", "vlan-b"} {
			for i := 0; i < 60; i++ {
				f.alloc(name, fmt.Sprintf("pre-%d", i), "")
			}
		}
		for i := 0; i < 60; i++ {
			if rnd.Intn(3) == 0 {
				for _, name := range []string{"vlan-a", "vlan-b"} {
					var al models.Allocation
					f.db.Joins("JOIN pools ON pools.id = allocations.pool_id").Where("pools.name = ? AND owner_id = ?", name, fmt.Sprintf("pre-%d", i)).Take(&al)
					f.release(name, al.Value, fmt.Sprintf("pre-%d", i))
				}
			}
		}
		var items []BulkItem
		for i := 0; i < 200; i++ {
			it := BulkItem{Owner: own(fmt.Sprintf("o-%d", i))}
			if i%50 == 7 {
				it.Value = fmt.Sprint(31 + i/50)
			}
			if i%40 == 3 {
				it.Owner = own(fmt.Sprintf("pre-%d", i/4))
			}
			items = append(items, it)
		}
		out, _, err := f.a.AllocateBulk(f.ctx, "vlan-a", items)
		if err != nil {
			t.Fatal(err)
		}
		for i, it := range items {
			one, _, err := f.a.Allocate(f.ctx, "vlan-b", it.Owner, it.Value)
			if err != nil {
				t.Fatalf("one by one, item %d: %v", i, err)
			}
			if one.Value != out[i].Value {
				t.Fatalf("item %d (%s): batch %s, one by one %s", i, it.Owner, out[i].Value, one.Value)
			}
		}
		f.checkRunEnds("vlan-a")
		f.checkRunEnds("vlan-b")
	})
}

// All or nothing: every refusal names the item's field, the first item in
// list order that one-by-one allocation would refuse is the one reported,
// and nothing is written.
func TestAllocateBulkRefusals(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.5", true), rng("10.0.0.100", "10.0.0.110", false))
		f.alloc(PoolLoopbackV4, "holder", "10.0.0.101")
		f.alloc(PoolLoopbackV4, "gone", "10.0.0.102")
		f.quarantine(PoolLoopbackV4, "10.0.0.102")
		f.declare("MT-1", "10.0.0.103", "")
		before := f.snap()
		many := make([]BulkItem, MaxBulkAllocations+1)
		for i := range many {
			many[i] = BulkItem{Owner: own(fmt.Sprint(i))}
		}
		cases := []struct {
			name  string
			items []BulkItem
			code  fault.Code
			field string
			msg   string
		}{
			{"empty list", nil, fault.CodeInvalid, "allocations", "at least one"},
			{"too many", many, fault.CodeInvalid, "allocations", "at most 10000"},
			{"bad owner type", []BulkItem{{Owner: own("a")}, {Owner: Owner{Type: "Machine", ID: "b"}}}, fault.CodeInvalid, "allocations[1].owner_type", "must match"},
			{"empty owner id", []BulkItem{{Owner: own("")}}, fault.CodeInvalid, "allocations[0].owner_id", "1 to 128"},
			{"owner twice: the later one", bulkOf("a", "b", "a"), fault.CodeInvalid, "allocations[2].owner_id", "already listed at allocations[0]"},
			{"value twice: the later one", bulkOf("a=10.0.0.104", "b=10.0.0.104"), fault.CodeInvalid, "allocations[1].value", "already requested by allocations[0]"},
			{"malformed value", bulkOf("a", "b=10.0.0.300"), fault.CodeInvalid, "allocations[1].value", "not an IP address"},
			{"wrong family", bulkOf("a=fd00::1"), fault.CodeInvalid, "allocations[0].value", "not an IPv4"},
			{"allocated to another", bulkOf("a", "b=10.0.0.101"), fault.CodeNotAvailable, "allocations[1].value", "allocated to machine/holder"},
			{"quarantined for another", bulkOf("a=10.0.0.102"), fault.CodeNotAvailable, "allocations[0].value", "quarantined (former owner machine/gone)"},
			{"declared for a DPU", bulkOf("a=10.0.0.103"), fault.CodeNotAvailable, "allocations[0].value", "declared for DPU MT-1"},
			{"not in pool", bulkOf("a=10.9.9.9"), fault.CodeNotAvailable, "allocations[0].value", "not in pool"},
			{"auto-assign range", bulkOf("a=10.0.0.2"), fault.CodeNotAvailable, "allocations[0].value", "auto-assign range"},
			{"held, other value asked", bulkOf("a", "holder=10.0.0.104"), fault.CodeConflict, "allocations[1].value", "already holds 10.0.0.101"},
			{"first refusal in list order", bulkOf("a", "b=10.0.0.103", "c=10.0.0.101"), fault.CodeNotAvailable, "allocations[1].value", "declared for DPU"},
			{"exhausted", bulkOf("a", "b", "c", "d", "e", "f", "g"), fault.CodePoolExhausted, "allocations[5].value", "no free value"},
		}
		for _, c := range cases {
			_, _, err := f.a.AllocateBulk(f.ctx, PoolLoopbackV4, c.items)
			e := testkit.WantCode(t, err, c.code, "", c.msg)
			if e.Field != c.field {
				t.Fatalf("%s: field %q, want %q (%s)", c.name, e.Field, c.field, e.Message)
			}
			f.unchanged(before, c.name)
		}
		_, _, err := f.a.AllocateBulk(f.ctx, "nope", bulkOf("a"))
		testkit.WantCode(t, err, fault.CodeNotFound, "")
		// The five auto values fit exactly.
		out, _, err := f.a.AllocateBulk(f.ctx, PoolLoopbackV4, bulkOf("a", "b", "c", "d", "e"))
		if err != nil || out[4].Value != "10.0.0.5" {
			t.Fatalf("exact fit: %+v %v", out, err)
		}
	})
}

// A requested value quarantined for the same owner goes back to it (as
// Allocate does), and a DPU's own declared value is requestable by it.
func TestAllocateBulkReclaimsOwnQuarantine(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool(PoolLoopbackV4, "ipv4", 0, rng("10.0.0.1", "10.0.0.5", true), rng("10.0.0.100", "10.0.0.110", false))
		f.alloc(PoolLoopbackV4, "back", "10.0.0.100")
		f.quarantine(PoolLoopbackV4, "10.0.0.100")
		f.declare("MT-7", "10.0.0.101", "")
		dpu := DPUMachineID("MT-7")
		out, created, err := f.a.AllocateBulk(f.ctx, PoolLoopbackV4, []BulkItem{{Owner: own("back"), Value: "10.0.0.100"},
			{Owner: own(dpu), Value: "10.0.0.101"}, {Owner: own("x")}, {Owner: own("y"), Value: "10.0.0.102"}})
		if err != nil {
			t.Fatal(err)
		}
		if out[0].Value != "10.0.0.100" || out[0].State != "allocated" || !created[0] || out[1].Value != "10.0.0.101" || out[2].Value != "10.0.0.1" || out[3].Value != "10.0.0.102" {
			t.Fatalf("got %+v", out)
		}
		if n := f.countRows(&models.Allocation{}, "state = ?", models.StateQuarantined); n != 0 {
			t.Fatalf("%d quarantines left, want the reclaimed one gone", n)
		}
		f.checkRunEnds(PoolLoopbackV4)
	})
}
