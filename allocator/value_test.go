package allocator

import (
	"strings"
	"testing"
	"time"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// Keys are 32 hex digits whose byte order is numeric order, across the
// 64-bit boundary too.
func TestValueKeysSortNumerically(t *testing.T) {
	t.Parallel()
	vals := []u128{{0, 0}, {0, 1}, {0, 255}, {0, 256}, {0, 1<<32 - 1}, {0, 1 << 32}, {0, ^uint64(0)}, {1, 0}, {1, 1}, {^uint64(0), ^uint64(0)}}
	for i := range vals {
		k := vals[i].key()
		if len(k) != 32 || strings.ToLower(k) != k {
			t.Fatalf("key %q", k)
		}
		back, err := parseKey(k)
		if err != nil || back != vals[i] {
			t.Fatalf("round trip %v → %q → %v %v", vals[i], k, back, err)
		}
		if i > 0 && !(vals[i-1].key() < k) || i > 0 && vals[i-1].cmp(vals[i]) >= 0 {
			t.Fatalf("%v does not sort below %v", vals[i-1], vals[i])
		}
	}
	for _, bad := range []string{"", "00", strings.Repeat("g", 32), strings.Repeat("0", 34)} {
		if _, err := parseKey(bad); err == nil {
			t.Fatalf("parseKey(%q) accepted", bad)
		}
	}
}

func TestU128Arithmetic(t *testing.T) {
	t.Parallel()
	max := u128{^uint64(0), ^uint64(0)}
	if s, over := max.add(u128{0, 1}); !over || s != (u128{}) {
		t.Fatalf("max+1 = %v overflow=%t", s, over)
	}
	if s, over := (u128{0, ^uint64(0)}).add(u128{0, 1}); over || s != (u128{1, 0}) {
		t.Fatalf("carry into the high word: %v %t", s, over)
	}
	if d, under := (u128{}).sub(u128{0, 1}); !under || d != max {
		t.Fatalf("0-1 = %v underflow=%t", d, under)
	}
	if d, under := (u128{1, 0}).sub(u128{0, 1}); under || d != (u128{0, ^uint64(0)}) {
		t.Fatalf("borrow from the high word: %v %t", d, under)
	}
	if got := (u128{1, 0}).shr(64); got != (u128{0, 1}) {
		t.Fatalf("shr 64: %v", got)
	}
	if got := (u128{1, 0}).shr(1); got != (u128{0, 1 << 63}) {
		t.Fatalf("shr 1 across words: %v", got)
	}
	if got := max.big().String(); got != "340282366920938463463374607431768211455" {
		t.Fatalf("big %s", got)
	}
}

// next/prev/max/count at both ends of every value space.
func TestSpaceEdges(t *testing.T) {
	t.Parallel()
	cases := []struct {
		sp         space
		max        string
		firstCount string
	}{
		{newSpace(TypeIPv4, 0), "255.255.255.255", "4294967296"},
		{newSpace(TypeIPv6, 0), "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "340282366920938463463374607431768211456"},
		{newSpace(TypeInteger, 0), "18446744073709551615", "18446744073709551616"},
		{newSpace(TypeIPv6Prefix, 96), "ffff:ffff:ffff:ffff:ffff:ffff::/96", "79228162514264337593543950336"},
		{newSpace(TypeIPv6Prefix, 64), "ffff:ffff:ffff:ffff::/64", "18446744073709551616"},
		{newSpace(TypeIPv6Prefix, 1), "8000::/1", "2"},
		{newSpace(TypeIPv6Prefix, 128), "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128", "340282366920938463463374607431768211456"},
	}
	for _, c := range cases {
		m := c.sp.max()
		if got := c.sp.format(m); got != c.max {
			t.Fatalf("%s/%d max %s, want %s", c.sp.typ, c.sp.plen, got, c.max)
		}
		if _, ok := c.sp.next(m); ok {
			t.Fatalf("%s/%d: next of max exists", c.sp.typ, c.sp.plen)
		}
		if _, ok := c.sp.prev(u128{}); ok {
			t.Fatalf("%s/%d: prev of 0 exists", c.sp.typ, c.sp.plen)
		}
		p, ok := c.sp.prev(m)
		if !ok {
			t.Fatalf("%s/%d: no prev of max", c.sp.typ, c.sp.plen)
		}
		if n, ok := c.sp.next(p); !ok || n != m {
			t.Fatalf("%s/%d: next(prev(max)) = %v", c.sp.typ, c.sp.plen, n)
		}
		if got := c.sp.count(u128{}, m).String(); got != c.firstCount {
			t.Fatalf("%s/%d: whole space has %s values, want %s", c.sp.typ, c.sp.plen, got, c.firstCount)
		}
		// Parse(format(v)) is the identity at both ends.
		for _, v := range []u128{{}, m} {
			back, err := c.sp.parse(c.sp.format(v))
			if err != nil || back != v {
				t.Fatalf("%s/%d: parse(format(%v)) = %v %v", c.sp.typ, c.sp.plen, v, back, err)
			}
		}
	}
}

func TestParseValue(t *testing.T) {
	t.Parallel()
	v4, v6, in, pf := newSpace(TypeIPv4, 0), newSpace(TypeIPv6, 0), newSpace(TypeInteger, 0), newSpace(TypeIPv6Prefix, 96)
	ok := []struct {
		sp       space
		in, want string
	}{
		{v4, " 10.0.0.1 ", "10.0.0.1"},
		{v6, "FD00:0:0:0::1", "fd00::1"},
		{v6, "2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"},
		{in, "0x10", "16"},
		{in, "0XfA000", "1024000"},
		{in, "007", "7"},
		{pf, "fd00:10::1:0:0/96", "fd00:10::1:0:0/96"},
		{pf, "fd00:10::1:0:0", "fd00:10::1:0:0/96"},
	}
	for _, c := range ok {
		v, err := c.sp.parse(c.in)
		if err != nil || c.sp.format(v) != c.want {
			t.Fatalf("%s %q: %s %v", c.sp.typ, c.in, c.sp.format(v), err)
		}
	}
	bad := []struct {
		sp      space
		in, msg string
	}{
		{v4, "", "empty"},
		{v4, "10.0.0.01", "not an IP address"},
		{v4, "fd00::1", "not an IPv4"},
		{v4, "::ffff:10.0.0.1", "IPv4-mapped"},
		{v6, "10.0.0.1", "not an IPv6"},
		{v6, "fe80::1%eth0", "zoned"},
		{v6, "::ffff:10.0.0.1", "IPv4-mapped"},
		{in, "-1", "non-negative"},
		{in, "1.5", "non-negative"},
		{in, "0x", "non-negative"},
		{in, "18446744073709551616", "larger than the largest integer value, 18446744073709551615"},
		{in, "0x10000000000000000", "larger than the largest"},
		{in, "99999999999999999999999", "larger than the largest"},
		{pf, "fd00:10::1/96", "host bits"},
		{pf, "fd00:10::/64", "not a /96"},
		{pf, "10.0.0.0/96", "not an IPv6 prefix"},
		{pf, "fe80::%eth0/96", "not an IPv6 prefix"},
	}
	for _, c := range bad {
		_, err := c.sp.parse(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Fatalf("%s %q: error %v, want one mentioning %q", c.sp.typ, c.in, err, c.msg)
		}
	}
}

// A clock in another zone is stored as UTC (SQLite compares times as
// text), so hold expiry works whatever the caller's zone.
func TestAllocatorClockIsUTC(t *testing.T) {
	t.Parallel()
	zone := time.FixedZone("UTC+5", 5*3600)
	a := New(dbtest.Open(t, models.SQLite), Options{Now: func() time.Time { return time.Date(2026, 1, 1, 5, 0, 0, 0, zone) }})
	if got := a.now(); got.Location() != time.UTC || got.Hour() != 0 {
		t.Fatalf("now %v", got)
	}
}
