package allocator

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// docs/pools.md: an owner holds at most one value per pool; asking again
// returns the same value with created=false (200 at REST), and asking for
// a different value is 409 conflict.
func TestAllocateIdempotentPerOwner(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("lo-ip", "ipv4", 0, rng("10.0.0.1", "10.0.0.10", true), rng("10.0.0.100", "10.0.0.110", false))
		al, created, err := f.a.Allocate(f.ctx, "lo-ip", own("a"), "")
		if err != nil || !created || al.Value != "10.0.0.1" || al.State != "allocated" || *al.OwnerID != "a" {
			t.Fatalf("first allocation: %+v created=%t err=%v", al, created, err)
		}
		for i := 0; i < 3; i++ {
			again, created, err := f.a.Allocate(f.ctx, "lo-ip", own("a"), "")
			if err != nil || created || again.Value != "10.0.0.1" {
				t.Fatalf("repeat %d: %+v created=%t err=%v", i, again, created, err)
			}
		}
		// The same value requested explicitly is the held one: no error,
		// even though it lies in an auto range.
		if again, created, err := f.a.Allocate(f.ctx, "lo-ip", own("a"), "10.0.0.1"); err != nil || created || again.Value != "10.0.0.1" {
			t.Fatalf("requesting the held value: %+v created=%t err=%v", again, created, err)
		}
		before := f.snap()
		_, _, err = f.a.Allocate(f.ctx, "lo-ip", own("a"), "10.0.0.100")
		e := testkit.WantCode(t, err, fault.CodeConflict, "", "already holds 10.0.0.1", "10.0.0.100")
		if e.Field != "value" {
			t.Fatalf("field %q, want value", e.Field)
		}
		f.unchanged(before, "requesting a second value for one owner")
		if n := f.countRows(&models.Allocation{}, "owner_id = ?", "a"); n != 1 {
			t.Fatalf("owner a holds %d rows, want 1", n)
		}
		if n := f.countRows(&models.AuditEvent{}, "action = ?", "allocation.create"); n != 1 {
			t.Fatalf("%d allocation.create events, want 1 (repeats write nothing)", n)
		}
		// Other owner types are other owners.
		other, created, err := f.a.Allocate(f.ctx, "lo-ip", Owner{Type: "instance", ID: "a"}, "")
		if err != nil || !created || other.Value != "10.0.0.2" {
			t.Fatalf("owner instance/a: %+v created=%t err=%v", other, created, err)
		}
	})
}

// docs/pools.md, docs/api.md: a requested value must lie in an auto_assign=false
// range, be free, and not be declared for another DPU; otherwise 409
// not_available saying which. Malformed or wrong-family values are 422.
func TestAllocateRequestedValue(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("lo-ip", "ipv4", 0, rng("10.180.62.1", "10.180.62.199", true), rng("10.180.62.200", "10.180.62.255", false))
		f.alloc("lo-ip", "holder", "10.180.62.201")
		f.alloc("lo-ip", "gone", "10.180.62.202")
		f.quarantine("lo-ip", "10.180.62.202")
		f.declare("MT-1", "10.180.62.203", "")

		refusals := []struct {
			name, value string
			code        fault.Code
			msg         string
		}{
			{"not in pool", "10.9.9.9", fault.CodeNotAvailable, "is not in pool"},
			{"just past the pool", "10.180.63.0", fault.CodeNotAvailable, "is not in pool"},
			{"in an auto-assign range", "10.180.62.5", fault.CodeNotAvailable, "auto-assign range"},
			{"allocated to another owner", "10.180.62.201", fault.CodeNotAvailable, "allocated to machine/holder"},
			{"quarantined for another machine", "10.180.62.202", fault.CodeNotAvailable, "quarantined (former owner machine/gone)"},
			{"declared for another DPU", "10.180.62.203", fault.CodeNotAvailable, "declared for DPU MT-1"},
			{"wrong family", "fd00::1", fault.CodeInvalid, "not an IPv4 address"},
			{"malformed", "10.180.62.300", fault.CodeInvalid, "not an IP address"},
			{"IPv4-mapped IPv6", "::ffff:10.180.62.204", fault.CodeInvalid, "IPv4-mapped"},
			{"zoned", "fe80::1%eth0", fault.CodeInvalid, "zoned"},
			{"CIDR instead of address", "10.180.62.204/32", fault.CodeInvalid, "not an IP address"},
		}
		for _, c := range refusals {
			before := f.snap()
			_, _, err := f.a.Allocate(f.ctx, "lo-ip", own("newcomer"), c.value)
			e := testkit.WantCode(t, err, c.code, "", c.msg)
			if e.Field != "value" {
				t.Fatalf("%s: field %q, want value", c.name, e.Field)
			}
			f.unchanged(before, c.name)
		}

		// A free explicit value is granted (201) with its canonical text.
		al, created, err := f.a.Allocate(f.ctx, "lo-ip", own("newcomer"), " 10.180.62.204 ")
		if err != nil || !created || al.Value != "10.180.62.204" {
			t.Fatalf("free explicit value: %+v created=%t err=%v", al, created, err)
		}
		// The declared DPU itself gets its reserved value.
		al, created, err = f.a.Allocate(f.ctx, "lo-ip", own(DPUMachineID("MT-1")), "10.180.62.203")
		if err != nil || !created || al.Value != "10.180.62.203" {
			t.Fatalf("declared DPU takes its value: %+v created=%t err=%v", al, created, err)
		}
		// The former owner takes its quarantined value back.
		al, created, err = f.a.Allocate(f.ctx, "lo-ip", own("gone"), "10.180.62.202")
		if err != nil || !created || al.State != "allocated" || *al.OwnerID != "gone" || al.FormerOwnerID != nil {
			t.Fatalf("former owner reclaims: %+v created=%t err=%v", al, created, err)
		}
		f.checkRunEnds("lo-ip")
	})
}

// docs/pools.md: automatic allocation takes the lowest free value of the
// auto_assign ranges, skipping quarantined and declared values; released
// values in the middle are reused first; a full pool is pool_exhausted.
func TestAllocateLowestFreeAndGapReuse(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("vlan", "integer", 0, rng("100", "109", true), rng("200", "205", false))
		for i := 0; i < 10; i++ {
			if al := f.alloc("vlan", fmt.Sprint("o", i), ""); al.Value != fmt.Sprint(100+i) {
				t.Fatalf("allocation %d got %s, want %d", i, al.Value, 100+i)
			}
		}
		before := f.snap()
		_, _, err := f.a.Allocate(f.ctx, "vlan", own("late"), "")
		testkit.WantCode(t, err, fault.CodePoolExhausted, "", `"vlan"`)
		f.unchanged(before, "pool_exhausted")

		f.release("vlan", "107", "o7")
		f.release("vlan", "101", "o1")
		f.release("vlan", "103", "o3")
		f.checkRunEnds("vlan")
		for _, want := range []string{"101", "103", "107"} {
			if al := f.alloc("vlan", "gap-"+want, ""); al.Value != want {
				t.Fatalf("gap reuse got %s, want %s", al.Value, want)
			}
			f.checkRunEnds("vlan")
		}

		// A quarantined value is never picked automatically.
		f.release("vlan", "100", "o0")
		f.release("vlan", "105", "o5")
		f.alloc("vlan", "q", "")
		f.quarantine("vlan", "100")
		if al := f.alloc("vlan", "after-q", ""); al.Value != "105" {
			t.Fatalf("got %s, want 105 (100 is quarantined)", al.Value)
		}
		_, _, err = f.a.Allocate(f.ctx, "vlan", own("more"), "")
		testkit.WantCode(t, err, fault.CodePoolExhausted, "")
		if err := f.a.Unquarantine(f.ctx, "vlan", "100"); err != nil {
			t.Fatal(err)
		}
		if al := f.alloc("vlan", "more", ""); al.Value != "100" {
			t.Fatalf("after unquarantine got %s, want 100", al.Value)
		}

		// A range added later but lower is used first: lowest value, not
		// oldest range.
		if _, err := f.a.AddRange(f.ctx, "vlan", rng("50", "51", true)); err != nil {
			t.Fatal(err)
		}
		if al := f.alloc("vlan", "low", ""); al.Value != "50" {
			t.Fatalf("got %s, want 50", al.Value)
		}
		f.checkRunEnds("vlan")
	})
}

// Values declared by an ExpectedDpu are skipped by automatic allocation
// even if an operator later turned their range into an auto range.
func TestAllocateSkipsDeclaredValues(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("lo-ip", "ipv4", 0, rng("10.0.0.1", "10.0.0.3", true))
		f.declare("MT-A", "10.0.0.1", "")
		f.declare("MT-B", "10.0.0.2", "")
		if al := f.alloc("lo-ip", "x", ""); al.Value != "10.0.0.3" {
			t.Fatalf("got %s, want 10.0.0.3", al.Value)
		}
		_, _, err := f.a.Allocate(f.ctx, "lo-ip", own("y"), "")
		testkit.WantCode(t, err, fault.CodePoolExhausted, "")
	})
}

// Run ends must be right across adjacent ranges and at both ends of each
// value space (0 and the maximum), where next/prev have no neighbour.
func TestAllocateAtEdgesOfSpace(t *testing.T) {
	t.Parallel()
	cases := []struct {
		typ    string
		plen   int
		ranges []RangeSpec
		want   []string
	}{
		{"integer", 0, []RangeSpec{rng("0", "2", true)}, []string{"0", "1", "2"}},
		{"integer", 0, []RangeSpec{rng("18446744073709551613", "18446744073709551615", true)},
			[]string{"18446744073709551613", "18446744073709551614", "18446744073709551615"}},
		{"ipv4", 0, []RangeSpec{rng("0.0.0.0", "0.0.0.1", true), rng("255.255.255.254", "255.255.255.255", true)},
			[]string{"0.0.0.0", "0.0.0.1", "255.255.255.254", "255.255.255.255"}},
		{"ipv6", 0, []RangeSpec{rng("::", "::1", true), rng("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true)},
			[]string{"::", "::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}},
		{"ipv6prefix", 96, []RangeSpec{rng("::/96", "::1:0:0/96", true), rng("ffff:ffff:ffff:ffff:ffff:fffe::/96", "ffff:ffff:ffff:ffff:ffff:ffff::/96", true)},
			[]string{"::/96", "::1:0:0/96", "ffff:ffff:ffff:ffff:ffff:fffe::/96", "ffff:ffff:ffff:ffff:ffff:ffff::/96"}},
		// Adjacent ranges: a run crosses the boundary between them.
		{"integer", 0, []RangeSpec{rng("10", "12", true), rng("13", "14", false), rng("15", "16", true)},
			[]string{"10", "11", "12", "15", "16"}},
	}
	for _, c := range cases {
		t.Run(c.typ+"-"+c.want[0], func(t *testing.T) {
			fndEach(t, func(t *testing.T, f *fnd) {
				f.mkPool("p", c.typ, c.plen, c.ranges...)
				if c.typ == "integer" && c.want[0] == "10" {
					f.alloc("p", "explicit", "13") // joins 10..12 and 13 into one run
				}
				for i, w := range c.want {
					if al := f.alloc("p", fmt.Sprint("o", i), ""); al.Value != w {
						t.Fatalf("allocation %d got %s, want %s", i, al.Value, w)
					}
					f.checkRunEnds("p")
				}
				_, _, err := f.a.Allocate(f.ctx, "p", own("extra"), "")
				testkit.WantCode(t, err, fault.CodePoolExhausted, "")
				// Free the first and the last value and take them again in order.
				last := len(c.want) - 1
				f.release("p", c.want[last], fmt.Sprint("o", last))
				f.release("p", c.want[0], "o0")
				f.checkRunEnds("p")
				if al := f.alloc("p", "again-0", ""); al.Value != c.want[0] {
					t.Fatalf("got %s, want %s", al.Value, c.want[0])
				}
				if al := f.alloc("p", "again-1", ""); al.Value != c.want[last] {
					t.Fatalf("got %s, want %s", al.Value, c.want[last])
				}
				f.checkRunEnds("p")
			})
		})
	}
}

// ipv6prefix pools hand out /96 blocks carved from a /64, stepping by one
// block; values are CIDR text, and requests must be aligned /96 blocks.
func TestIPv6PrefixBlocks(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		spec := PoolSpec{Name: "endpoint-v6", Type: "ipv6prefix", DelegatePrefixLen: 96}
		vals, err := NewPoolValues(spec)
		if err != nil {
			t.Fatal(err)
		}
		r, err := vals.PrefixRange("fd00:10:ff01::/64")
		if err != nil {
			t.Fatal(err)
		}
		spec.Ranges = []RangeSpec{r}
		res, err := f.a.LoadPools(f.ctx, []PoolSpec{spec})
		if err != nil || len(res.Created) != 1 {
			t.Fatalf("load: %+v %v", res, err)
		}
		if c := res.Created[0]; c.First != "fd00:10:ff01::/96" || c.Last != "fd00:10:ff01:0:ffff:ffff::/96" {
			t.Fatalf("range %+v", c)
		}
		p, err := f.a.GetPool(f.ctx, "endpoint-v6")
		if err != nil {
			t.Fatal(err)
		}
		if p.Stats.Auto.Size != "4294967296" || p.Ranges[0].Size != "4294967296" {
			t.Fatalf("a /64 has 2^32 /96 blocks, stats say %+v", p.Stats.Auto)
		}
		for i, want := range []string{"fd00:10:ff01::/96", "fd00:10:ff01::1:0:0/96", "fd00:10:ff01::2:0:0/96"} {
			if al := f.alloc("endpoint-v6", fmt.Sprint("pod", i), ""); al.Value != want {
				t.Fatalf("block %d = %s, want %s", i, al.Value, want)
			}
		}
		f.release("endpoint-v6", "fd00:10:ff01::1:0:0/96", "pod1")
		if al := f.alloc("endpoint-v6", "pod9", ""); al.Value != "fd00:10:ff01::1:0:0/96" {
			t.Fatalf("gap reuse got %s", al.Value)
		}
		f.checkRunEnds("endpoint-v6")
		for _, bad := range []struct{ v, msg string }{
			{"fd00:10:ff01::1/96", "host bits"},
			{"fd00:10:ff01::/64", "not a /96 block"},
			{"10.0.0.0/96", "not an IPv6 prefix"},
			{"::ffff:10.0.0.0/96", "not an IPv6 prefix"},
		} {
			_, _, err := f.a.Allocate(f.ctx, "endpoint-v6", own("bad"), bad.v)
			testkit.WantCode(t, err, fault.CodeInvalid, "", bad.msg)
		}
		// A well-formed block of the auto range cannot be requested.
		_, _, err = f.a.Allocate(f.ctx, "endpoint-v6", own("bad"), "fd00:10:ff01::9:0:0/96")
		testkit.WantCode(t, err, fault.CodeNotAvailable, "", "auto-assign range")
		// The address inside a block finds that block.
		info, err := f.a.LookupAddress(f.ctx, "fd00:10:ff01::2:0:7")
		if err != nil {
			t.Fatal(err)
		}
		if !hasEntry(info, "allocation", "endpoint-v6", "fd00:10:ff01::2:0:0/96") {
			t.Fatalf("lookup of an address inside a block: %+v", info.Entries)
		}
	})
}

// docs/pools.md: only the owner releases; another owner is 409 not_owner
// and nothing changes; releasing a free value is a no-op success.
func TestRelease(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("vlan", "integer", 0, rng("1", "10", true))
		f.alloc("vlan", "a", "")
		f.alloc("vlan", "b", "")
		f.quarantine("vlan", "2")

		before := f.snap()
		err := f.a.Release(f.ctx, "vlan", "1", own("b"))
		testkit.WantCode(t, err, fault.CodeNotOwner, "", "held by machine/a", "not machine/b")
		err = f.a.Release(f.ctx, "vlan", "1", Owner{Type: "instance", ID: "a"})
		testkit.WantCode(t, err, fault.CodeNotOwner, "")
		err = f.a.Release(f.ctx, "vlan", "2", own("b"))
		testkit.WantCode(t, err, fault.CodeNotOwner, "", "quarantined")
		testkit.WantCode(t, f.a.Release(f.ctx, "vlan", "x1", own("a")), fault.CodeInvalid, "")
		testkit.WantCode(t, f.a.Release(f.ctx, "vlan", "1", Owner{Type: "Machine", ID: "a"}), fault.CodeInvalid, "")
		testkit.WantCode(t, f.a.Release(f.ctx, "vlan", "1", Owner{Type: "machine", ID: ""}), fault.CodeInvalid, "")
		testkit.WantCode(t, f.a.Release(f.ctx, "nope", "1", own("a")), fault.CodeNotFound, "")
		// A free value, and a value outside the pool, are no-ops.
		if err := f.a.Release(f.ctx, "vlan", "7", own("a")); err != nil {
			t.Fatalf("releasing a free value: %v", err)
		}
		if err := f.a.Release(f.ctx, "vlan", "700", own("a")); err != nil {
			t.Fatalf("releasing a value outside the pool: %v", err)
		}
		f.unchanged(before, "refused and no-op releases")

		f.release("vlan", "1", "a")
		if n := f.countRows(&models.Allocation{}, "value = ?", "1"); n != 0 {
			t.Fatalf("value 1 still has %d rows", n)
		}
		if n := f.countRows(&models.AuditEvent{}, "action = ? AND object_id = ?", "allocation.release", "vlan/1"); n != 1 {
			t.Fatalf("%d release events, want 1", n)
		}
		// Releasing again is a no-op.
		if err := f.a.Release(f.ctx, "vlan", "1", own("a")); err != nil {
			t.Fatal(err)
		}
	})
}

// Quarantine (force delete) takes a value from its owner and holds it;
// only unquarantine frees it.
func TestQuarantineAndUnquarantine(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("vlan", "integer", 0, rng("1", "3", true))
		f.alloc("vlan", "a", "")
		f.alloc("vlan", "b", "")
		f.quarantine("vlan", "1")
		al, err := f.a.GetAllocation(f.ctx, "vlan", "1")
		if err != nil {
			t.Fatal(err)
		}
		if al.State != "quarantined" || al.OwnerID != nil || *al.FormerOwnerID != "a" || *al.QuarantineReason != "force delete" || al.QuarantinedAt == nil {
			t.Fatalf("quarantined row: %+v", al)
		}
		// The former owner no longer holds anything: it gets a new value.
		if got := f.alloc("vlan", "a", ""); got.Value != "3" {
			t.Fatalf("former owner got %s, want 3", got.Value)
		}
		page, err := f.a.ListAllocations(f.ctx, "vlan", AllocationFilter{State: "quarantined"})
		if err != nil || len(page.Items) != 1 || page.Items[0].Value != "1" {
			t.Fatalf("quarantined list: %+v %v", page, err)
		}
		p, _ := f.a.GetPool(f.ctx, "vlan")
		if p.Stats.Auto.Quarantined != "1" || p.Stats.Auto.Allocated != "2" || p.Stats.Auto.Free != "0" {
			t.Fatalf("stats %+v", p.Stats.Auto)
		}
		before := f.snap()
		testkit.WantCode(t, f.a.Unquarantine(f.ctx, "vlan", "2"), fault.CodeConflict, "", "allocated to machine/b")
		testkit.WantCode(t, f.a.Unquarantine(f.ctx, "vlan", "x"), fault.CodeInvalid, "")
		testkit.WantCode(t, f.a.Unquarantine(f.ctx, "nope", "1"), fault.CodeNotFound, "")
		f.unchanged(before, "refused unquarantine")
		if err := f.a.Unquarantine(f.ctx, "vlan", "1"); err != nil {
			t.Fatal(err)
		}
		testkit.WantCode(t, f.a.Unquarantine(f.ctx, "vlan", "1"), fault.CodeNotFound, "")
		if got := f.alloc("vlan", "c", ""); got.Value != "1" {
			t.Fatalf("after unquarantine got %s, want 1", got.Value)
		}
		for _, action := range []string{"allocation.quarantine", "allocation.unquarantine"} {
			if n := f.countRows(&models.AuditEvent{}, "action = ?", action); n != 1 {
				t.Fatalf("%d %s events", n, action)
			}
		}
		f.checkRunEnds("vlan")
	})
}

// docs/api.md: quarantine hold expiry takes effect at once for every
// read and allocation, before any write cleans the row up.
func TestQuarantineHoldExpiry(t *testing.T) {
	t.Parallel()
	for _, d := range []models.Dialect{models.SQLite, models.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			db := dbtest.Open(t, d)
			f := newFnd(t, db, time.Hour)
			f.mkPool("lo-ip", "ipv4", 0, rng("10.0.0.1", "10.0.0.2", true), rng("10.0.0.10", "10.0.0.11", false))
			f.alloc("lo-ip", "a", "")
			f.alloc("lo-ip", "b", "")
			f.alloc("lo-ip", "c", "10.0.0.10")
			f.declare("MT-C", "10.0.0.10", "")
			f.quarantine("lo-ip", "10.0.0.1")
			f.quarantine("lo-ip", "10.0.0.10")

			f.clock.Advance(59 * time.Minute)
			_, _, err := f.a.Allocate(f.ctx, "lo-ip", own("d"), "")
			testkit.WantCode(t, err, fault.CodePoolExhausted, "")
			p, _ := f.a.GetPool(f.ctx, "lo-ip")
			if p.Stats.Auto.Quarantined != "1" || p.Stats.Explicit.Quarantined != "1" || p.Stats.Explicit.Reserved != "0" {
				t.Fatalf("within the hold: %+v", p.Stats)
			}

			f.clock.Advance(2 * time.Minute)
			// Reads see the expiry before any write purges the rows.
			p, _ = f.a.GetPool(f.ctx, "lo-ip")
			if p.Stats.Auto.Quarantined != "0" || p.Stats.Auto.Free != "1" {
				t.Fatalf("auto stats after the hold: %+v", p.Stats.Auto)
			}
			if p.Stats.Explicit.Quarantined != "0" || p.Stats.Explicit.Reserved != "1" || p.Stats.Explicit.Free != "1" {
				t.Fatalf("explicit stats after the hold (10.0.0.10 is declared again): %+v", p.Stats.Explicit)
			}
			if _, err := f.a.GetAllocation(f.ctx, "lo-ip", "10.0.0.1"); err == nil {
				t.Fatal("an expired quarantine is still readable")
			}
			page, _ := f.a.ListAllocations(f.ctx, "lo-ip", AllocationFilter{})
			if len(page.Items) != 1 || page.Items[0].Value != "10.0.0.2" {
				t.Fatalf("list after the hold: %+v", page.Items)
			}
			info, _ := f.a.LookupAddress(f.ctx, "10.0.0.1")
			if hasEntry(info, "quarantine", "lo-ip", "10.0.0.1") {
				t.Fatalf("lookup still shows the quarantine: %+v", info.Entries)
			}
			// An expired quarantine does not block removing its range.
			ranges := p.Ranges
			if err := f.a.RemoveRange(f.ctx, "lo-ip", ranges[1].ID); err == nil {
				t.Fatal("range with a declared value was removed")
			} else {
				e := testkit.WantCode(t, err, fault.CodeConflict, "", "declared for DPU MT-C")
				if strings.Contains(e.Message, "quarantined") {
					t.Fatalf("expired quarantine named as blocker: %s", e.Message)
				}
			}
			// And allocation takes the value at once.
			if al := f.alloc("lo-ip", "d", ""); al.Value != "10.0.0.1" {
				t.Fatalf("got %s, want the expired quarantine 10.0.0.1", al.Value)
			}
			if n := f.countRows(&models.AuditEvent{}, "action = ?", "allocation.quarantine_expired"); n != 2 {
				t.Fatalf("%d expiry events, want 2", n)
			}
			f.checkRunEnds("lo-ip")
		})
	}
}

// Keyset pagination walks every allocation exactly once in numeric value
// order, with filters, whatever the page size.
func TestListAllocationsKeyset(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("vni", "integer", 0, rng("1", "200", true))
		var want []string
		for i := 0; i < 120; i++ {
			want = append(want, f.alloc("vni", fmt.Sprint("o", i), "").Value)
		}
		for _, v := range []string{"5", "50", "100"} {
			f.quarantine("vni", v)
		}
		for _, limit := range []int{1, 7, 10, 119, 120, 1000} {
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 200 {
					t.Fatal("pagination does not end")
				}
				page, err := f.a.ListAllocations(f.ctx, "vni", AllocationFilter{Limit: limit, Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range page.Items {
					got = append(got, it.Value)
				}
				if page.NextCursor == "" {
					break
				}
				if len(page.Items) != limit {
					t.Fatalf("limit %d: a non-final page has %d items", limit, len(page.Items))
				}
				cursor = page.NextCursor
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("limit %d: got %v", limit, got)
			}
		}
		page, _ := f.a.ListAllocations(f.ctx, "vni", AllocationFilter{State: "quarantined", Limit: 2})
		if len(page.Items) != 2 || page.Items[0].Value != "5" || page.Items[1].Value != "50" || page.NextCursor == "" {
			t.Fatalf("quarantined page 1: %+v", page)
		}
		page, _ = f.a.ListAllocations(f.ctx, "vni", AllocationFilter{State: "quarantined", Limit: 2, Cursor: page.NextCursor})
		if len(page.Items) != 1 || page.Items[0].Value != "100" || page.NextCursor != "" {
			t.Fatalf("quarantined page 2: %+v", page)
		}
		page, _ = f.a.ListAllocations(f.ctx, "vni", AllocationFilter{OwnerType: "machine", OwnerID: "o42"})
		if len(page.Items) != 1 || page.Items[0].Value != "43" {
			t.Fatalf("owner filter: %+v", page)
		}
		_, err := f.a.ListAllocations(f.ctx, "vni", AllocationFilter{State: "free"})
		testkit.WantCode(t, err, fault.CodeInvalid, "", "unknown state")
		_, err = f.a.ListAllocations(f.ctx, "vni", AllocationFilter{Cursor: "zz"})
		testkit.WantCode(t, err, fault.CodeInvalid, "", "cursor")
		_, err = f.a.ListAllocations(f.ctx, "nope", AllocationFilter{})
		testkit.WantCode(t, err, fault.CodeNotFound, "")
	})
}

// GET /api/v1/addresses/{value}: every pool membership, allocation,
// quarantine and reservation of one value, across pools.
func TestLookupAcrossPools(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("lo-ip", "ipv4", 0, rng("10.0.0.1", "10.0.0.9", true), rng("10.0.0.10", "10.0.0.19", false))
		f.mkPool("mgmt", "ipv4", 0, rng("10.0.1.0", "10.0.1.255", true))
		f.mkPool("lo-ip-v6", "ipv6", 0, rng("fd00::1", "fd00::ff", false))
		f.mkPool("vlan", "integer", 0, rng("10", "20", true))
		f.declare("MT-9", "10.0.0.12", "fd00::12")
		f.alloc("mgmt", "host-1", "")
		f.alloc("mgmt", "host-2", "")
		f.alloc("lo-ip", "gone", "10.0.0.11")
		f.quarantine("lo-ip", "10.0.0.11")

		info, err := f.a.LookupAddress(f.ctx, "10.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Entries) != 1 || !hasEntry(info, "pool_member", "lo-ip", "10.0.0.1") {
			t.Fatalf("10.0.0.1: %+v", info.Entries)
		}
		info, _ = f.a.LookupAddress(f.ctx, "10.0.1.0")
		if len(info.Entries) != 2 || !hasEntry(info, "pool_member", "mgmt", "10.0.1.0") || !hasEntry(info, "allocation", "mgmt", "10.0.1.0") {
			t.Fatalf("10.0.1.0: %+v", info.Entries)
		}
		info, _ = f.a.LookupAddress(f.ctx, "10.0.0.11")
		if !hasEntry(info, "quarantine", "lo-ip", "10.0.0.11") {
			t.Fatalf("10.0.0.11: %+v", info.Entries)
		}
		info, _ = f.a.LookupAddress(f.ctx, "10.0.0.12")
		if len(info.Entries) != 2 || !hasEntry(info, "reservation", "lo-ip", "10.0.0.12") || info.Entries[1].SerialNumber != "MT-9" || info.Entries[1].ExpectedMachineID != "em-MT-9" {
			t.Fatalf("10.0.0.12: %+v", info.Entries)
		}
		info, _ = f.a.LookupAddress(f.ctx, "FD00:0::12")
		if info.Value != "fd00::12" || !hasEntry(info, "reservation", "lo-ip-v6", "fd00::12") || !hasEntry(info, "pool_member", "lo-ip-v6", "fd00::12") {
			t.Fatalf("fd00::12: %+v", info)
		}
		info, _ = f.a.LookupAddress(f.ctx, "15")
		if len(info.Entries) != 1 || !hasEntry(info, "pool_member", "vlan", "15") {
			t.Fatalf("15: %+v", info.Entries)
		}
		info, err = f.a.LookupAddress(f.ctx, "192.0.2.1")
		if err != nil || info.Entries == nil || len(info.Entries) != 0 {
			t.Fatalf("unheld value: %+v %v", info, err)
		}
		// An address with its host prefix is the plain address.
		for in, want := range map[string][2]string{"10.0.0.12/32": {"lo-ip", "10.0.0.12"}, "FD00:0::12/128": {"lo-ip-v6", "fd00::12"}} {
			info, err := f.a.LookupAddress(f.ctx, in)
			if err != nil || info.Value != want[1] || !hasEntry(info, "reservation", want[0], want[1]) {
				t.Fatalf("%s: %+v %v", in, info, err)
			}
		}
		for _, bad := range []string{"garbage", "10.0.0.256", "fe80::1%eth0", "::ffff:10.0.0.1", "10.0.0.0/8",
			"10.0.0.12/31", "fd00::12/127", "fd00::/64", "::ffff:10.0.0.1/128", "fe80::1%eth0/128"} {
			_, err := f.a.LookupAddress(f.ctx, bad)
			testkit.WantCode(t, err, fault.CodeInvalid, "")
		}
	})
}

// Property test of the gap search: random allocations (automatic and
// requested), releases, quarantines and unquarantines over adjacent auto
// and explicit ranges; after every step the run_end flags must be exact
// and every automatic allocation must return the brute-force lowest free
// value. It runs on every path an allocator can be forced to take.
func TestAllocateRandomizedAgainstModel(t *testing.T) {
	t.Parallel()
	fndEachPath(t, func(t *testing.T, f *fnd) {
		f.mkPool("p", "integer", 0, rng("0", "9", true), rng("10", "19", false), rng("20", "34", true), rng("35", "39", true))
		isAuto := func(v int) bool { return v < 10 || v >= 20 }
		held := map[int]string{} // value → owner ("" for quarantined)
		owners := map[string]int{}
		r := rand.New(rand.NewSource(7))
		steps := 250
		if testing.Short() {
			steps = 60
		}
		for step := 0; step < steps; step++ {
			switch op := r.Intn(10); {
			case op < 4:
				o := fmt.Sprint("o", r.Intn(60))
				lowest := -1
				for v := 0; v < 40; v++ {
					if _, ok := held[v]; !ok && isAuto(v) {
						lowest = v
						break
					}
				}
				al, created, err := f.a.Allocate(f.ctx, "p", own(o), "")
				switch {
				case hasOwner(owners, o):
					if err != nil || created || al.Value != fmt.Sprint(owners[o]) {
						t.Fatalf("step %d: repeat for %s: %+v %t %v", step, o, al, created, err)
					}
				case lowest < 0:
					testkit.WantCode(t, err, fault.CodePoolExhausted, "")
				default:
					if err != nil || al.Value != fmt.Sprint(lowest) {
						t.Fatalf("step %d: got %+v %v, want %d", step, al, err, lowest)
					}
					held[lowest], owners[o] = o, lowest
				}
			case op < 5:
				o := fmt.Sprint("x", r.Intn(60))
				v := 10 + r.Intn(10)
				al, created, err := f.a.Allocate(f.ctx, "p", own(o), fmt.Sprint(v))
				if hasOwner(owners, o) && owners[o] == v {
					// Asking again for the value one holds: idempotent.
					if err != nil || created || al.Value != fmt.Sprint(v) {
						t.Fatalf("step %d: %s asking again for %d: %+v %t %v", step, o, v, al, created, err)
					}
				} else if _, taken := held[v]; taken || hasOwner(owners, o) {
					if err == nil {
						t.Fatalf("step %d: requested %d for %s succeeded", step, v, o)
					}
				} else if err != nil {
					t.Fatalf("step %d: requested %d for %s: %v", step, v, o, err)
				} else {
					held[v], owners[o] = o, v
				}
			case op < 8:
				for v, o := range held {
					if o != "" {
						f.release("p", fmt.Sprint(v), o)
						delete(held, v)
						delete(owners, o)
						break
					}
				}
			case op < 9:
				for v, o := range held {
					if o != "" {
						f.quarantine("p", fmt.Sprint(v))
						held[v] = ""
						delete(owners, o)
						break
					}
				}
			default:
				for v, o := range held {
					if o == "" {
						if err := f.a.Unquarantine(f.ctx, "p", fmt.Sprint(v)); err != nil {
							t.Fatal(err)
						}
						delete(held, v)
						break
					}
				}
			}
			f.checkRunEnds("p")
		}
		var rows []models.Allocation
		f.db.Order("value_key").Find(&rows)
		var got, want []string
		for _, r := range rows {
			got = append(got, r.Value)
		}
		for v := range held {
			want = append(want, fmt.Sprint(v))
		}
		sort.Slice(want, func(i, j int) bool {
			return len(want[i]) < len(want[j]) || len(want[i]) == len(want[j]) && want[i] < want[j]
		})
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("stored %v, model %v", got, want)
		}
	})
}

func hasOwner(owners map[string]int, o string) bool { _, ok := owners[o]; return ok }

func hasEntry(info *AddressInfo, kind, pool, value string) bool {
	for _, e := range info.Entries {
		if e.Kind == kind && e.Pool == pool && e.Value == value {
			return true
		}
	}
	return false
}
