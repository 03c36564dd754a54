package allocator

import (
	"strings"
	"testing"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// A new pool with a bad field is 422 invalid naming the field, and nothing
// is stored.
func TestCreatePoolRefusals(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("taken", "integer", 0, rng("1", "2", true))
		cases := []struct {
			name  string
			spec  PoolSpec
			code  fault.Code
			field string
			msg   string
		}{
			{"empty name", PoolSpec{Name: "", Type: "ipv4"}, fault.CodeInvalid, "name", "pool name"},
			{"name with a space", PoolSpec{Name: "lo ip", Type: "ipv4"}, fault.CodeInvalid, "name", `"lo ip"`},
			{"name starting with a dash", PoolSpec{Name: "-x", Type: "ipv4"}, fault.CodeInvalid, "name", `"-x"`},
			{"unknown type", PoolSpec{Name: "p", Type: "ipv5"}, fault.CodeInvalid, "type", `"ipv5"`},
			{"type in capitals", PoolSpec{Name: "p", Type: "IPv4"}, fault.CodeInvalid, "type", `"IPv4"`},
			{"ipv6prefix without delegate_prefix_len", PoolSpec{Name: "p", Type: "ipv6prefix"}, fault.CodeInvalid, "delegate_prefix_len", "got 0"},
			{"delegate_prefix_len 129", PoolSpec{Name: "p", Type: "ipv6prefix", DelegatePrefixLen: 129}, fault.CodeInvalid, "delegate_prefix_len", "got 129"},
			{"delegate_prefix_len on ipv4", PoolSpec{Name: "p", Type: "ipv4", DelegatePrefixLen: 24}, fault.CodeInvalid, "delegate_prefix_len", "only to ipv6prefix"},
			{"gateway of the wrong family", PoolSpec{Name: "p", Type: "ipv4", Gateway: "fd00::1"}, fault.CodeInvalid, "gateway", "IPv4"},
			{"gateway on an integer pool", PoolSpec{Name: "p", Type: "integer", Gateway: "10.0.0.1"}, fault.CodeInvalid, "gateway", "no gateway"},
			{"zoned gateway", PoolSpec{Name: "p", Type: "ipv6", Gateway: "fe80::1%eth0"}, fault.CodeInvalid, "gateway", "zoned"},
			{"malformed first", PoolSpec{Name: "p", Type: "ipv4", Ranges: []RangeSpec{rng("10.0.0.1", "10.0.0.9", true), rng("10.0.1", "10.0.1.9", true)}},
				fault.CodeInvalid, "ranges[1].first", `"10.0.1"`},
			{"reversed range", PoolSpec{Name: "p", Type: "ipv4", Ranges: []RangeSpec{rng("10.0.0.9", "10.0.0.1", true)}},
				fault.CodeInvalid, "ranges[0].last", "reversed"},
			{"wrong family in an ipv4 pool", PoolSpec{Name: "p", Type: "ipv4", Ranges: []RangeSpec{rng("fd00::1", "fd00::9", true)}},
				fault.CodeInvalid, "ranges[0].first", "not an IPv4 address"},
			{"wrong family in an ipv6 pool", PoolSpec{Name: "p", Type: "ipv6", Ranges: []RangeSpec{rng("fd00::1", "10.0.0.1", true)}},
				fault.CodeInvalid, "ranges[0].last", "not an IPv6 address"},
			{"IPv4-mapped IPv6", PoolSpec{Name: "p", Type: "ipv6", Ranges: []RangeSpec{rng("::ffff:10.0.0.1", "::ffff:10.0.0.9", true)}},
				fault.CodeInvalid, "ranges[0].first", "IPv4-mapped"},
			{"zoned IPv6", PoolSpec{Name: "p", Type: "ipv6", Ranges: []RangeSpec{rng("fe80::1%eth0", "fe80::9", true)}},
				fault.CodeInvalid, "ranges[0].first", "zoned"},
			{"negative integer", PoolSpec{Name: "p", Type: "integer", Ranges: []RangeSpec{rng("-1", "9", true)}},
				fault.CodeInvalid, "ranges[0].first", "non-negative integer"},
			{"integer above 64 bits", PoolSpec{Name: "p", Type: "integer", Ranges: []RangeSpec{rng("1", "18446744073709551616", true)}},
				fault.CodeInvalid, "ranges[0].last", "larger than the largest integer value"},
			{"unaligned ipv6prefix block", PoolSpec{Name: "p", Type: "ipv6prefix", DelegatePrefixLen: 96, Ranges: []RangeSpec{rng("fd00::1", "fd00::1:0:0", true)}},
				fault.CodeInvalid, "ranges[0].first", "host bits"},
			{"IPv6 range over the IPv4-mapped block", PoolSpec{Name: "p", Type: "ipv6", Ranges: []RangeSpec{rng("::", "ffff::", true)}},
				fault.CodeInvalid, "ranges[0]", "IPv4-mapped"},
			{"IPv6 range ending on the first IPv4-mapped address", PoolSpec{Name: "p", Type: "ipv6", Ranges: []RangeSpec{rng("::fffe:0:0", "::1:0:0:0", true)}},
				fault.CodeInvalid, "ranges[0]", "IPv4-mapped"},
			{"/96 blocks over the IPv4-mapped block", PoolSpec{Name: "p", Type: "ipv6prefix", DelegatePrefixLen: 96, Ranges: []RangeSpec{rng("::fffe:0:0/96", "::1:0:0:0/96", true)}},
				fault.CodeInvalid, "ranges[0]", "IPv4-mapped"},
			{"overlapping ranges in one request", PoolSpec{Name: "p", Type: "integer", Ranges: []RangeSpec{rng("1", "10", true), rng("10", "20", false)}},
				fault.CodeInvalid, "ranges[1]", "overlaps ranges[0]"},
			{"duplicate name", PoolSpec{Name: "taken", Type: "integer"}, fault.CodeConflict, "name", "already exists"},
		}
		for _, c := range cases {
			before := f.snap()
			_, err := f.a.CreatePool(f.ctx, c.spec)
			e := testkit.WantCode(t, err, c.code, "", c.msg)
			if e.Field != c.field {
				t.Fatalf("%s: field %q, want %q", c.name, e.Field, c.field)
			}
			f.unchanged(before, c.name)
		}
		// A pool may be created without ranges and grown later; its stats
		// are zeros, not missing.
		p := f.mkPool("empty", "ipv6", 0)
		if len(p.Ranges) != 0 || p.Ranges == nil || p.Stats.Auto.Size != "0" || p.Stats.Explicit.Free != "0" {
			t.Fatalf("empty pool: %+v", p)
		}
	})
}

// docs/pools.md: ranges of one pool never overlap; a range may be added at
// any time (growth).
func TestAddRange(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("lo-ip", "ipv4", 0, rng("10.0.0.10", "10.0.0.19", true))
		for _, c := range []struct {
			r    RangeSpec
			code fault.Code
			msg  string
		}{
			{rng("10.0.0.19", "10.0.0.25", true), fault.CodeConflict, "overlaps range"},
			{rng("10.0.0.0", "10.0.0.10", false), fault.CodeConflict, "10.0.0.10..10.0.0.19"},
			{rng("10.0.0.12", "10.0.0.13", true), fault.CodeConflict, "overlaps"},
			{rng("10.0.0.0", "10.0.1.0", true), fault.CodeConflict, "overlaps"},
			{rng("10.0.0.30", "10.0.0.20", true), fault.CodeInvalid, "reversed"},
			{rng("fd00::1", "fd00::2", true), fault.CodeInvalid, "not an IPv4 address"},
		} {
			before := f.snap()
			_, err := f.a.AddRange(f.ctx, "lo-ip", c.r)
			testkit.WantCode(t, err, c.code, "", c.msg)
			f.unchanged(before, "refused range "+c.r.First+".."+c.r.Last)
		}
		_, err := f.a.AddRange(f.ctx, "nope", rng("1.1.1.1", "1.1.1.2", true))
		testkit.WantCode(t, err, fault.CodeNotFound, "")

		// Adjacent ranges on both sides are fine.
		lo, err := f.a.AddRange(f.ctx, "lo-ip", rng("10.0.0.0", "10.0.0.9", false))
		if err != nil || lo.Size != "10" || lo.AutoAssign {
			t.Fatalf("adjacent below: %+v %v", lo, err)
		}
		hi, err := f.a.AddRange(f.ctx, "lo-ip", RangeSpec{First: "10.0.0.20", Last: "10.0.0.20"})
		if err != nil || hi.Size != "1" || !hi.AutoAssign {
			t.Fatalf("adjacent above, auto_assign defaulting to true: %+v %v", hi, err)
		}
		got, err := f.a.GetRange(f.ctx, "lo-ip", hi.ID)
		if err != nil || got.First != "10.0.0.20" {
			t.Fatalf("read back: %+v %v", got, err)
		}
		_, err = f.a.GetRange(f.ctx, "lo-ip", "999")
		testkit.WantCode(t, err, fault.CodeNotFound, "")
		if n := f.countRows(&models.AuditEvent{}, "action = ?", "pool.range.add"); n != 2 {
			t.Fatalf("%d range add events, want 2", n)
		}
	})
}

// docs/pools.md: a range may be removed, shrunk, or flipped from
// auto_assign=false to true only if that leaves no allocation, quarantine
// or declared reservation where it would break its rule; otherwise 409
// conflict naming the blocking values.
func TestUpdateAndRemoveRangeRefusals(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		p := f.mkPool("lo-ip", "ipv4", 0, rng("10.0.0.1", "10.0.0.99", true), rng("10.0.0.100", "10.0.0.199", false))
		auto, expl := p.Ranges[0].ID, p.Ranges[1].ID
		f.alloc("lo-ip", "a", "")              // 10.0.0.1
		f.alloc("lo-ip", "b", "10.0.0.150")    // explicit
		f.alloc("lo-ip", "gone", "10.0.0.160") // quarantined below
		f.quarantine("lo-ip", "10.0.0.160")    //
		f.declare("MT-7", "10.0.0.170", "")    // declared, not allocated
		upd := func(first, last *string, auto *bool) RangeUpdate {
			return RangeUpdate{First: first, Last: last, AutoAssign: auto}
		}
		s := func(v string) *string { return &v }

		refusals := []struct {
			name string
			id   string
			u    RangeUpdate
			code fault.Code
			msgs []string
		}{
			{"shrink the auto range past an allocation", auto, upd(s("10.0.0.2"), nil, nil), fault.CodeConflict,
				[]string{"10.0.0.1 (allocated to machine/a)"}},
			{"shrink the explicit range from the top", expl, upd(nil, s("10.0.0.149"), nil), fault.CodeConflict,
				[]string{"10.0.0.150 (allocated to machine/b)", "10.0.0.160 (quarantined, former owner machine/gone)", "10.0.0.170 (declared for DPU MT-7)"}},
			{"shrink past only the declaration", expl, upd(nil, s("10.0.0.169"), nil), fault.CodeConflict,
				[]string{"10.0.0.170 (declared for DPU MT-7)"}},
			{"flip explicit to auto", expl, upd(nil, nil, bptr(true)), fault.CodeConflict,
				[]string{"cannot become auto_assign", "10.0.0.150", "10.0.0.160", "10.0.0.170"}},
			{"grow into the neighbour", auto, upd(nil, s("10.0.0.100"), nil), fault.CodeConflict, []string{"overlap"}},
			{"reversed bounds", auto, upd(s("10.0.0.50"), s("10.0.0.40"), nil), fault.CodeInvalid, []string{"reversed"}},
			{"wrong family", auto, upd(nil, s("fd00::1"), nil), fault.CodeInvalid, []string{"not an IPv4 address"}},
			{"stale version", auto, RangeUpdate{AutoAssign: bptr(false), Version: func() *int64 { v := int64(7); return &v }()}, fault.CodeStaleVersion, []string{"version 1, not 7"}},
			{"unknown range", "999", upd(nil, nil, bptr(false)), fault.CodeNotFound, nil},
			{"non-numeric range id", "abc", upd(nil, nil, bptr(false)), fault.CodeNotFound, nil},
		}
		for _, c := range refusals {
			before := f.snap()
			_, err := f.a.UpdateRange(f.ctx, "lo-ip", c.id, c.u)
			testkit.WantCode(t, err, c.code, "", c.msgs...)
			f.unchanged(before, c.name)
		}
		for _, id := range []string{auto, expl} {
			before := f.snap()
			err := f.a.RemoveRange(f.ctx, "lo-ip", id)
			testkit.WantCode(t, err, fault.CodeConflict, "", "still holds values")
			f.unchanged(before, "removing a range in use")
		}

		// What is allowed: shrinking to exactly the held values, flipping
		// auto to explicit, and growing into free space.
		r, err := f.a.UpdateRange(f.ctx, "lo-ip", expl, upd(s("10.0.0.150"), s("10.0.0.170"), nil))
		if err != nil || r.Size != "21" || r.Version != 2 {
			t.Fatalf("shrink to the held values: %+v %v", r, err)
		}
		r, err = f.a.UpdateRange(f.ctx, "lo-ip", auto, RangeUpdate{AutoAssign: bptr(false), Version: func() *int64 { v := int64(1); return &v }()})
		if err != nil || r.AutoAssign || r.Version != 2 {
			t.Fatalf("flip auto to explicit: %+v %v", r, err)
		}
		// 10.0.0.1 is now in an explicit range and stays with its owner.
		if al, _ := f.a.GetAllocation(f.ctx, "lo-ip", "10.0.0.1"); al == nil || *al.OwnerID != "a" {
			t.Fatalf("allocation after flip: %+v", al)
		}
		r, err = f.a.UpdateRange(f.ctx, "lo-ip", expl, upd(nil, s("10.0.0.255"), nil))
		if err != nil || r.Last != "10.0.0.255" {
			t.Fatalf("grow: %+v %v", r, err)
		}
		// Once the values are gone, flip and removal succeed.
		f.release("lo-ip", "10.0.0.1", "a")
		r, err = f.a.UpdateRange(f.ctx, "lo-ip", auto, upd(nil, nil, bptr(true)))
		if err != nil || !r.AutoAssign {
			t.Fatalf("flip empty range to auto: %+v %v", r, err)
		}
		if err := f.a.RemoveRange(f.ctx, "lo-ip", auto); err != nil {
			t.Fatalf("remove empty range: %v", err)
		}
		testkit.WantCode(t, f.a.RemoveRange(f.ctx, "lo-ip", auto), fault.CodeNotFound, "")
		p, _ = f.a.GetPool(f.ctx, "lo-ip")
		if len(p.Ranges) != 1 || p.Ranges[0].ID != expl {
			t.Fatalf("ranges after removal: %+v", p.Ranges)
		}
	})
}

// Stats are decimal strings that do not overflow: an IPv6 /64 pool has
// 18446744073709551616 values and the whole IPv6 space 2^128; free =
// size − allocated − quarantined − reserved, per kind of range.
func TestPoolStatsLargeSizes(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("lo-ip-v6", "ipv6", 0,
			rng("fd00:180:62::", "fd00:180:62:0:ffff:ffff:ffff:ffff", true),
			rng("fd00:180:62:1::", "fd00:180:62:1::ff", false))
		f.alloc("lo-ip-v6", "a", "")
		f.alloc("lo-ip-v6", "b", "")
		f.alloc("lo-ip-v6", "c", "")
		f.quarantine("lo-ip-v6", "fd00:180:62::1")
		f.alloc("lo-ip-v6", "d", "fd00:180:62:1::5")
		f.declare("MT-5", "", "fd00:180:62:1::6")
		f.declare("MT-D", "", "fd00:180:62:1::5") // declared and allocated: counts as allocated only
		p, err := f.a.GetPool(f.ctx, "lo-ip-v6")
		if err != nil {
			t.Fatal(err)
		}
		want := PoolStats{
			Auto:     Counts{Size: "18446744073709551616", Allocated: "2", Free: "18446744073709551613", Quarantined: "1", Reserved: "0"},
			Explicit: Counts{Size: "256", Allocated: "1", Free: "254", Quarantined: "0", Reserved: "1"},
		}
		if p.Stats != want {
			t.Fatalf("stats\n got %+v\nwant %+v", p.Stats, want)
		}
		if p.Ranges[0].Size != "18446744073709551616" || p.Ranges[0].Stats.Quarantined != "1" || p.Ranges[1].Stats.Reserved != "1" {
			t.Fatalf("per-range stats: %+v", p.Ranges)
		}
		if u := p.Stats.Used(); u <= 0 || u >= 1e-9 {
			t.Fatalf("used share %g", u)
		}
	})
}

// A pool of the whole IPv6 space (which no other IPv6 pool may then
// overlap) and one of the whole 64-bit integer space count exactly.
func TestPoolStatsWholeSpaces(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		f.mkPool("everything", "ipv6", 0, rng("::", "::fffe:ffff:ffff", true), rng("::1:0:0:0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true))
		f.alloc("everything", "x", "")
		p, _ := f.a.GetPool(f.ctx, "everything")
		// 2^128 values minus the 2^32 IPv4-mapped ones.
		if p.Stats.Auto.Size != "340282366920938463463374607427473244160" || p.Stats.Auto.Free != "340282366920938463463374607427473244159" {
			t.Fatalf("whole IPv6 space: %+v", p.Stats.Auto)
		}
		f.mkPool("asn", "integer", 0, rng("0", "18446744073709551615", true))
		p, _ = f.a.GetPool(f.ctx, "asn")
		if p.Stats.Auto.Size != "18446744073709551616" {
			t.Fatalf("whole 64-bit integer space: %+v", p.Stats.Auto)
		}
		pools, err := f.a.ListPools(f.ctx)
		if err != nil || len(pools) != 2 || pools[0].Name != "asn" || pools[1].Name != "everything" {
			t.Fatalf("list: %d pools %v", len(pools), err)
		}
	})
}

// The pool gateway is stored canonically and shown.
func TestPoolGateway(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		p, err := f.a.CreatePool(f.ctx, PoolSpec{Name: "ep", Type: "ipv6prefix", DelegatePrefixLen: 96, Gateway: " FD00:10::1 ",
			Ranges: []RangeSpec{rng("fd00:10::/96", "fd00:10::ffff:0:0/96", true)}})
		if err != nil || p.Gateway != "fd00:10::1" || p.DelegatePrefixLen != 96 || p.Ranges[0].Size != "65536" {
			t.Fatalf("%+v %v", p, err)
		}
		if !strings.HasPrefix(p.Ranges[0].First, "fd00:10::/96") {
			t.Fatalf("first %q", p.Ranges[0].First)
		}
	})
}

// Pools page by name: limit and next_cursor walk every pool once, the last
// page has no cursor, and a cursor naming no pool is 422.
func TestListPoolsPage(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		for _, n := range []string{"vlan", "asn", "lo-ip", "vni", "lo-ip-v6"} {
			f.mkPool(n, "integer", 0, rng("1", "10", true))
		}
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			page, err := f.a.ListPoolsPage(f.ctx, PoolFilter{Limit: 2, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Items) > 2 || pages > 3 {
				t.Fatalf("page %d: %d items", pages, len(page.Items))
			}
			for _, p := range page.Items {
				got = append(got, p.Name)
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		if strings.Join(got, ",") != "asn,lo-ip,lo-ip-v6,vlan,vni" {
			t.Fatalf("pages walked %v", got)
		}
		_, err := f.a.ListPoolsPage(f.ctx, PoolFilter{Cursor: "nope"})
		testkit.WantCode(t, err, fault.CodeInvalid, "cursor")
	})
}
