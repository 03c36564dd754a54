package poolfile

import (
	"context"
	"encoding/json"
	"math/big"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/console"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/docs/samples"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// site is one test's allocator on a fresh database.
type site struct {
	t   *testing.T
	db  *gorm.DB
	a   *allocator.Allocator
	ctx context.Context
}

// each runs fn once per database dialect, on a fresh database.
func each(t *testing.T, fn func(t *testing.T, f *site)) {
	t.Helper()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		a := allocator.New(db, allocator.Options{Now: clock.Now})
		fn(t, &site{t: t, db: db, a: a, ctx: audit.WithActor(context.Background(), "test", "req-1")})
	})
}

func rng(first, last string, auto bool) allocator.RangeSpec {
	return allocator.RangeSpec{First: first, Last: last, AutoAssign: &auto}
}

func (f *site) mkPool(name, typ string, ranges ...allocator.RangeSpec) {
	f.t.Helper()
	if _, err := f.a.CreatePool(f.ctx, allocator.PoolSpec{Name: name, Type: typ, Ranges: ranges}); err != nil {
		f.t.Fatalf("create pool %s: %v", name, err)
	}
}

func (f *site) alloc(pool, owner string) {
	f.t.Helper()
	if _, _, err := f.a.Allocate(f.ctx, pool, allocator.Owner{Type: "machine", ID: owner}, ""); err != nil {
		f.t.Fatalf("allocate %s for %s: %v", pool, owner, err)
	}
}

func (f *site) countRows(model any) int64 {
	f.t.Helper()
	var n int64
	if err := f.db.Model(model).Count(&n).Error; err != nil {
		f.t.Fatal(err)
	}
	return n
}

// snap is everything a refused load must leave untouched: pools, ranges,
// allocations and audit events.
func (f *site) snap() string {
	f.t.Helper()
	var out []string
	for _, m := range []any{&models.Pool{}, &models.PoolRange{}, &models.Allocation{}, &models.AuditEvent{}} {
		var rows []map[string]any
		if err := f.db.Model(m).Order("id").Find(&rows).Error; err != nil {
			f.t.Fatalf("dump: %v", err)
		}
		b, err := json.Marshal(rows)
		if err != nil {
			f.t.Fatalf("dump: %v", err)
		}
		out = append(out, string(b))
	}
	return strings.Join(out, "\n")
}

func (f *site) unchanged(before, what string) {
	f.t.Helper()
	if after := f.snap(); before != after {
		f.t.Fatalf("%s changed stored state:\nbefore %s\nafter  %s", what, before, after)
	}
}

// size counts the values of an inclusive range of a pool of type typ
// (ipv6prefix blocks of /plen).
func size(t *testing.T, typ string, plen int, first, last string) string {
	t.Helper()
	num := func(s string) *big.Int {
		if typ == "integer" {
			n, ok := new(big.Int).SetString(s, 10)
			if !ok {
				t.Fatalf("bound %q", s)
			}
			return n
		}
		if typ == "ipv6prefix" {
			s = strings.TrimSuffix(s, "/"+strconv.Itoa(plen))
		}
		return new(big.Int).SetBytes(netip.MustParseAddr(s).AsSlice())
	}
	n := new(big.Int).Sub(num(last), num(first))
	if typ == "ipv6prefix" {
		n.Rsh(n, uint(128-plen))
	}
	return n.Add(n, big.NewInt(1)).String()
}

// NICo pool-file semantics (docs/pools.md): `end` is exclusive, a prefix is
// auto_assign, host bits are ignored, an IPv4 prefix keeps its network
// address and drops its broadcast address, integers may be 0x hex.
func TestParsePoolFileSemantics(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, toml  string
		first, last string
		size        string
		auto        bool
	}{
		{"integer end is exclusive", `[pools.p]
type = "integer"
ranges = [{ start = "100", end = "110" }]`, "100", "109", "10", true},
		{"unquoted integers", `[pools.p]
type = "integer"
ranges = [{ start = 100, end = 110, auto_assign = false }]`, "100", "109", "10", false},
		{"hex bounds", `[pools.p]
type = "integer"
ranges = [{ start = "0xFA000", end = "0xfa400" }]`, "1024000", "1025023", "1024", true},
		{"IPv4 /24 keeps .0, drops .255", `[pools.p]
type = "ipv4"
prefix = "10.180.62.0/24"`, "10.180.62.0", "10.180.62.254", "255", true},
		{"host bits ignored", `[pools.p]
type = "ipv4"
prefix = "10.180.62.1/26"`, "10.180.62.0", "10.180.62.62", "63", true},
		{"IPv4 /31 keeps both", `[pools.p]
type = "ipv4"
prefix = "10.0.0.4/31"`, "10.0.0.4", "10.0.0.5", "2", true},
		{"IPv4 /32 is one address", `[pools.p]
type = "ipv4"
prefix = "10.0.0.4/32"`, "10.0.0.4", "10.0.0.4", "1", true},
		{"IPv6 prefix keeps every address", `[pools.p]
type = "ipv6"
prefix = "fd00::5/126"`, "fd00::4", "fd00::7", "4", true},
		{"IPv6 range end exclusive", `[pools.p]
type = "ipv6"
ranges = [{ start = "fd00:180:62::1", end = "fd00:180:62::1:0" }]`, "fd00:180:62::1", "fd00:180:62::ffff", "65535", true},
		{"IPv4 range end exclusive across an octet", `[pools.p]
type = "ipv4"
ranges = [{ start = "10.180.62.200", end = "10.180.63.0", auto_assign = false }]`, "10.180.62.200", "10.180.62.255", "56", false},
		{"ipv6prefix from a /64", `[pools.p]
type = "ipv6prefix"
prefix = "fd00:10:ff01::/64"
delegate_prefix_len = 96`, "fd00:10:ff01::/96", "fd00:10:ff01:0:ffff:ffff::/96", "4294967296", true},
		{"ipv6prefix ranges", `[pools.p]
type = "ipv6prefix"
delegate_prefix_len = 96
ranges = [{ start = "fd00::/96", end = "fd00::4:0:0/96" }]`, "fd00::/96", "fd00::3:0:0/96", "4", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pools, err := Parse([]byte(c.toml))
			if err != nil {
				t.Fatal(err)
			}
			if len(pools) != 1 || len(pools[0].Ranges) != 1 {
				t.Fatalf("parsed %+v", pools)
			}
			r := pools[0].Ranges[0]
			size := size(t, pools[0].Type, pools[0].DelegatePrefixLen, r.First, r.Last)
			if r.First != c.first || r.Last != c.last || size != c.size || *r.AutoAssign != c.auto {
				t.Fatalf("got %s..%s size %s auto %t, want %s..%s size %s auto %t", r.First, r.Last, size, *r.AutoAssign,
					c.first, c.last, c.size, c.auto)
			}
		})
	}
}

// The sample site configuration loads with exactly its five pools and
// their ranges; [networks.*] and top-level keys are ignored; a second
// load is a no-op.
func TestLoadSampleSiteConfig(t *testing.T) {
	t.Parallel()
	data := []byte(samples.SiteConfig)
	each(t, func(t *testing.T, f *site) {
		res, err := Load(f.ctx, f.a, data)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Drift) != 0 {
			t.Fatalf("drift on a fresh database: %+v", res.Drift)
		}
		pools, err := f.a.ListPools(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range pools {
			s := p.Name + " " + string(p.Type)
			if p.DelegatePrefixLen != 0 {
				s += "/" + strconv.Itoa(p.DelegatePrefixLen)
			}
			for _, r := range p.Ranges {
				s += " [" + r.First + ".." + r.Last + " auto=" + map[bool]string{true: "t", false: "f"}[r.AutoAssign] + " n=" + r.Size + "]"
			}
			got = append(got, s)
		}
		want := []string{
			"endpoint-v6 ipv6prefix/96 [fd00:10:ff01::/96..fd00:10:ff01:0:ffff:ffff::/96 auto=t n=4294967296]",
			"lo-ip ipv4 [10.180.62.1..10.180.62.199 auto=t n=199] [10.180.62.200..10.180.62.255 auto=f n=56]",
			"lo-ip-v6 ipv6 [fd00:180:62::1..fd00:180:62::ffff auto=t n=65535] [fd00:180:62:1::..fd00:180:62:1::ff auto=f n=256]",
			"vlan-id integer [100..500 auto=t n=401]",
			"vni integer [1024000..1025023 auto=t n=1024]",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("pools\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if len(res.Created) != 7 {
			t.Fatalf("created %d ranges, want 7: %+v", len(res.Created), res.Created)
		}
		before := f.snap()
		res, err = Load(f.ctx, f.a, data)
		if err != nil || len(res.Created) != 0 || len(res.Drift) != 0 || res.Created == nil || res.Drift == nil {
			t.Fatalf("second load: %+v %v", res, err)
		}
		f.unchanged(before, "loading the same file twice")
	})
}

// The NICo grow format: pools are top-level tables, recognised by a pool
// type; other tables are ignored.
func TestLoadGrowFormat(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *site) {
		f.mkPool("lo-ip-v6", "ipv6", rng("fd00:180:62::1", "fd00:180:62::ffff", true))
		res, err := Load(f.ctx, f.a, []byte(`
[lo-ip-v6]
type = "ipv6"
ranges = [
  { start = "fd00:180:62::1", end = "fd00:180:62::1:0" },
  { start = "fd00:180:62:1::", end = "fd00:180:62:1::100", auto_assign = false },
]

[vlan-id]
type = "integer"
ranges = [{ start = "100", end = "0x1f5" }]

[admin]
type = "admin"
prefix = "172.20.0.0/24"
`))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Drift) != 0 || len(res.Created) != 2 ||
			res.Created[0] != (allocator.CreatedRange{Pool: "lo-ip-v6", First: "fd00:180:62:1::", Last: "fd00:180:62:1::ff"}) ||
			res.Created[1] != (allocator.CreatedRange{Pool: "vlan-id", First: "100", Last: "500"}) {
			t.Fatalf("grow: %+v", res)
		}
		if _, err := f.a.GetPool(f.ctx, "admin"); err == nil {
			t.Fatal("a table whose type is not a pool type became a pool")
		}
	})
}

// Loading is additive: a range that overlaps a stored one differently is
// drift — reported, never applied, never fatal — while the rest of the
// file is applied.
func TestLoadDrift(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *site) {
		f.mkPool("lo-ip", "ipv4", rng("10.0.0.1", "10.0.0.99", true), rng("10.0.0.100", "10.0.0.199", false))
		f.mkPool("vni", "integer", rng("1", "9", true))
		f.alloc("lo-ip", "a")
		beforeRanges := f.countRows(&models.PoolRange{})
		res, err := Load(f.ctx, f.a, []byte(`
[pools.lo-ip]
type = "ipv4"
ranges = [
  { start = "10.0.0.1", end = "10.0.0.50" },                       # overlaps differently: drift
  { start = "10.0.0.100", end = "10.0.0.200" },                    # same bounds, other auto_assign: drift
  { start = "10.0.1.0", end = "10.0.1.10", auto_assign = false },  # disjoint: created
]
[pools.vni]
type = "ipv6"                                                      # other type: drift
prefix = "fd00::/64"
[pools.new]
type = "integer"
ranges = [{ start = "5", end = "6" }]
`))
		if err != nil {
			t.Fatalf("drift must not be fatal: %v", err)
		}
		if len(res.Drift) != 3 {
			t.Fatalf("drift %+v", res.Drift)
		}
		for i, want := range []string{"overlaps stored range 10.0.0.1..10.0.0.99", "auto_assign=true) overlaps stored range 10.0.0.100..10.0.0.199 (auto_assign=false)", "stored pool is integer"} {
			if !strings.Contains(res.Drift[i].Message, want) {
				t.Fatalf("drift[%d] %q does not say %q", i, res.Drift[i].Message, want)
			}
		}
		if len(res.Created) != 2 || res.Created[0] != (allocator.CreatedRange{Pool: "lo-ip", First: "10.0.1.0", Last: "10.0.1.9"}) || res.Created[1] != (allocator.CreatedRange{Pool: "new", First: "5", Last: "5"}) {
			t.Fatalf("created %+v", res.Created)
		}
		if n := f.countRows(&models.PoolRange{}); n != beforeRanges+2 {
			t.Fatalf("%d ranges, want %d", n, beforeRanges+2)
		}
		p, _ := f.a.GetPool(f.ctx, "lo-ip")
		if p.Ranges[0].Last != "10.0.0.99" || p.Ranges[1].AutoAssign {
			t.Fatalf("drift was applied: %+v", p.Ranges)
		}
		d, err := console.New(f.a, f.db).PoolFileDrift(f.ctx)
		if err != nil || len(d) != 3 {
			t.Fatalf("stored drift %+v %v", d, err)
		}
		// A clean load clears the banner.
		if _, err := Load(f.ctx, f.a, []byte("[pools.new]\ntype = \"integer\"\nranges = [{ start = \"5\", end = \"6\" }]\n")); err != nil {
			t.Fatal(err)
		}
		if d, _ := console.New(f.a, f.db).PoolFileDrift(f.ctx); len(d) != 0 {
			t.Fatalf("drift after a clean load: %+v", d)
		}
	})
}

// Garbage is 400 bad_request; a wrong field is 422 naming it by its path
// in the file; either way nothing is written, not even the valid pools
// before the bad one.
func TestLoadPoolFileRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, toml string
		code       fault.Code
		field      string
	}{
		{"garbage", "this is [not toml", fault.CodeBadRequest, ""},
		{"binary", "\x00\x01\x02", fault.CodeBadRequest, ""},
		{"end below start", `[pools.lo-ip]
type = "ipv4"
ranges = [{ start = "10.0.0.1", end = "10.0.0.9" }, { start = "10.0.1.9", end = "10.0.1.1" }]`, fault.CodeInvalid, "pools.lo-ip.ranges[1].end"},
		{"empty range", `[pools.lo-ip]
type = "ipv4"
ranges = [{ start = "10.0.0.1", end = "10.0.0.1" }]`, fault.CodeInvalid, "pools.lo-ip.ranges[0].end"},
		{"malformed start", `[pools.lo-ip]
type = "ipv4"
ranges = [{ start = "10.0.0", end = "10.0.0.9" }]`, fault.CodeInvalid, "pools.lo-ip.ranges[0].start"},
		{"wrong family", `[pools.lo-ip]
type = "ipv4"
ranges = [{ start = "10.0.0.1", end = "fd00::9" }]`, fault.CodeInvalid, "pools.lo-ip.ranges[0].end"},
		{"zoned", `[pools.v6]
type = "ipv6"
ranges = [{ start = "fe80::1%eth0", end = "fe80::9" }]`, fault.CodeInvalid, "pools.v6.ranges[0].start"},
		{"IPv4-mapped", `[pools.v6]
type = "ipv6"
ranges = [{ start = "::ffff:10.0.0.1", end = "::ffff:10.0.0.9" }]`, fault.CodeInvalid, "pools.v6.ranges[0].start"},
		{"auto_assign not a boolean", `[pools.lo-ip]
type = "ipv4"
ranges = [{ start = "10.0.0.1", end = "10.0.0.9", auto_assign = "yes" }]`, fault.CodeInvalid, "pools.lo-ip.ranges[0].auto_assign"},
		{"start missing", `[pools.lo-ip]
type = "ipv4"
ranges = [{ end = "10.0.0.9" }]`, fault.CodeInvalid, "pools.lo-ip.ranges[0].start"},
		{"negative integer", `[pools.vlan]
type = "integer"
ranges = [{ start = -1, end = 9 }]`, fault.CodeInvalid, "pools.vlan.ranges[0].start"},
		{"overlap inside the file", `[pools.vlan]
type = "integer"
ranges = [{ start = 1, end = 10 }, { start = 9, end = 20 }]`, fault.CodeInvalid, "pools.vlan.ranges[1]"},
		{"unknown type", `[pools.vlan]
type = "vlan"
ranges = [{ start = 1, end = 10 }]`, fault.CodeInvalid, "pools.vlan.type"},
		{"both prefix and ranges", `[pools.lo-ip]
type = "ipv4"
prefix = "10.0.0.0/24"
ranges = [{ start = "10.0.0.1", end = "10.0.0.9" }]`, fault.CodeInvalid, "pools.lo-ip"},
		{"neither prefix nor ranges", `[pools.lo-ip]
type = "ipv4"`, fault.CodeInvalid, "pools.lo-ip"},
		{"malformed prefix", `[pools.lo-ip]
type = "ipv4"
prefix = "10.0.0.0/33"`, fault.CodeInvalid, "pools.lo-ip.prefix"},
		{"prefix of the wrong family", `[pools.lo-ip]
type = "ipv4"
prefix = "fd00::/64"`, fault.CodeInvalid, "pools.lo-ip.prefix"},
		{"prefix on an integer pool", `[pools.vlan]
type = "integer"
prefix = "10.0.0.0/24"`, fault.CodeInvalid, "pools.vlan.prefix"},
		{"ipv6prefix without delegate_prefix_len", `[pools.ep]
type = "ipv6prefix"
prefix = "fd00::/64"`, fault.CodeInvalid, "pools.ep.delegate_prefix_len"},
		{"prefix smaller than a block", `[pools.ep]
type = "ipv6prefix"
prefix = "fd00::/112"
delegate_prefix_len = 96`, fault.CodeInvalid, "pools.ep.prefix"},
		{"IPv6 prefix over the IPv4-mapped block", `[pools.v6]
type = "ipv6"
prefix = "::/80"`, fault.CodeInvalid, "pools.v6.prefix"},
		{"IPv6 range ending in the IPv4-mapped block", `[pools.v6]
type = "ipv6"
ranges = [{ start = "::fffe:0:0", end = "::1:0:0:0" }]`, fault.CodeInvalid, "pools.v6.ranges[0]"},
		{"ranges not a list of tables", `[pools.vlan]
type = "integer"
ranges = ["1-10"]`, fault.CodeInvalid, "pools.vlan.ranges"},
		{"pools not a table", `pools = 3`, fault.CodeInvalid, "pools"},
		{"bad pool name", `[pools."lo ip"]
type = "ipv4"
prefix = "10.0.0.0/24"`, fault.CodeInvalid, "pools.lo ip.name"},
	}
	each(t, func(t *testing.T, f *site) {
		f.mkPool("stored", "integer", rng("1", "2", true))
		for _, c := range cases {
			// A valid pool before the bad one must not be created either.
			data := "[pools.aaa-valid]\ntype = \"integer\"\nranges = [{ start = 1, end = 5 }]\n\n" + c.toml
			if strings.HasPrefix(c.toml, "pools =") {
				data = c.toml // a top-level key must come before any table
			}
			before := f.snap()
			_, err := Load(f.ctx, f.a, []byte(data))
			if err == nil {
				t.Fatalf("%s: loaded", c.name)
			}
			e := testkit.WantCode(t, err, c.code, "")
			if e.Field != c.field {
				t.Fatalf("%s: field %q, want %q (%s)", c.name, e.Field, c.field, e.Message)
			}
			f.unchanged(before, c.name)
		}
	})
}

// A pool file saved with a UTF-8 byte order mark (some editors write one)
// loads like the same file without it; a key given twice in a table is a
// TOML error, 400, and nothing is loaded.
func TestPoolFileByteOrderMark(t *testing.T) {
	file := "[pools.lo-ip]\ntype = \"ipv4\"\nprefix = \"10.180.62.0/26\"\n"
	pools, err := Parse(append([]byte("\xEF\xBB\xBF"), file...))
	if err != nil || len(pools) != 1 || pools[0].Name != "lo-ip" {
		t.Fatalf("with a BOM: %+v %v", pools, err)
	}
	_, err = Parse([]byte(file + "type = \"ipv6\"\n"))
	if e, ok := fault.AsError(err); !ok || e.Code != fault.CodeBadRequest {
		t.Fatalf("a key given twice: %v", err)
	}
}
