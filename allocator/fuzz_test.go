package allocator

// Fuzz targets for everything the allocator parses from clients: single
// values of each pool type and ranges of a pool spec (JSON API / console;
// NICo pool files are fuzzed in package poolfile). The property: no input
// panics, and every rejection is an *Error with a 4xx code naming a field
// where there is one; every acceptance round-trips.
//
// Run one for a while:
//
//	go test ./allocator -run '^$' -fuzz '^FuzzParseValue$' -fuzztime 10m -parallel 1

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/fault"
)

var fuzzSpaces = []space{
	newSpace(TypeIPv4, 0), newSpace(TypeIPv6, 0), newSpace(TypeInteger, 0),
	newSpace(TypeIPv6Prefix, 96), newSpace(TypeIPv6Prefix, 64), newSpace(TypeIPv6Prefix, 1),
	newSpace(TypeIPv6Prefix, 127), newSpace(TypeIPv6Prefix, 128),
}

// FuzzParseValue feeds one client-given value to every pool type's parser.
// An accepted value must format to a canonical text that parses back to the
// same value, lie within the type's value space and, for ipv6prefix pools,
// be aligned to the delegated block.
func FuzzParseValue(f *testing.F) {
	for _, s := range []string{"10.180.62.1", " 10.0.0.0 ", "255.255.255.255", "0.0.0.0", "fd00:180:62::c8",
		"FD00::1", "::ffff:10.0.0.1", "fe80::1%eth0", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
		"fd00:0:0:1::/96", "fd00::/64", "fd00::1/96", "0x10", "0XfA000", "18446744073709551615",
		"18446744073709551616", "-1", "", "1.2.3", "01.2.3.4", "1.2.3.4/32", "::1.2.3.4"} {
		for i := range fuzzSpaces {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, in string) {
		sp := fuzzSpaces[int(which)%len(fuzzSpaces)]
		v, err := sp.parse(in)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("%s: rejection of %q has no message", sp.typ, in)
			}
			return
		}
		if v.cmp(sp.max()) > 0 {
			t.Fatalf("%s/%d: %q parsed to %s beyond the value space", sp.typ, sp.plen, in, v.key())
		}
		text := sp.format(v)
		back, err := sp.parse(text)
		if err != nil {
			t.Fatalf("%s/%d: %q → canonical %q does not parse back: %v", sp.typ, sp.plen, in, text, err)
		}
		if back != v {
			t.Fatalf("%s/%d: %q → %q → %s, want %s", sp.typ, sp.plen, in, text, back.key(), v.key())
		}
		if k, err := parseKey(v.key()); err != nil || k != v {
			t.Fatalf("stored key %q of %q does not round-trip: %v", v.key(), in, err)
		}
		switch sp.typ {
		case TypeIPv4, TypeIPv6:
			a, err := CanonicalAddress(text)
			if err != nil || a.String() != text {
				t.Fatalf("%q: canonical %q is not RFC 5952 text (%v, %v)", in, text, a, err)
			}
			if a.Zone() != "" || a.Is4In6() {
				t.Fatalf("%q accepted as zoned or IPv4-mapped address %q", in, text)
			}
		case TypeIPv6Prefix:
			p, err := netip.ParsePrefix(text)
			if err != nil || p.Bits() != sp.plen || p.Masked() != p {
				t.Fatalf("%q: block %q is not an aligned /%d (%v)", in, text, sp.plen, err)
			}
		}
		if n, ok := sp.next(v); ok && n.cmp(v) <= 0 {
			t.Fatalf("next(%s) = %s does not increase", v.key(), n.key())
		}
		if p, ok := sp.prev(v); ok && p.cmp(v) >= 0 {
			t.Fatalf("prev(%s) = %s does not decrease", v.key(), p.key())
		}
	})
}

// FuzzRangeSpec feeds a pool spec with one or two ranges to the validation
// the JSON API and the console share. A rejection is 422 invalid naming a
// field of the spec; an accepted pool has ordered, non-overlapping ranges
// whose size is at least one.
func FuzzRangeSpec(f *testing.F) {
	f.Add(uint8(0), "10.180.62.1", "10.180.62.199", true, "10.180.62.200", "10.180.62.255", false, 0)
	f.Add(uint8(1), "fd00:180:62::1", "fd00:180:62::ffff", true, "fd00:180:62:1::", "fd00:180:62:1::ff", false, 0)
	f.Add(uint8(2), "100", "500", true, "0xFA000", "0xFA3FF", true, 0)
	f.Add(uint8(3), "fd00:10:ff01::/96", "fd00:10:ff01:0:ffff:ffff::/96", true, "", "", true, 96)
	f.Add(uint8(0), "10.0.0.9", "10.0.0.1", true, "10.0.0.1", "10.0.0.1", true, 0)
	f.Add(uint8(3), "fd00::/64", "fd00::/64", true, "fd00::1", "fd00::2", false, 129)
	types := []string{"ipv4", "ipv6", "integer", "ipv6prefix", "IPV4", ""}
	f.Fuzz(func(t *testing.T, typ uint8, first1, last1 string, auto1 bool, first2, last2 string, auto2 bool, plen int) {
		spec := PoolSpec{Name: "fuzz", Type: types[int(typ)%len(types)], DelegatePrefixLen: plen,
			Ranges: []RangeSpec{{First: first1, Last: last1, AutoAssign: &auto1}}}
		if first2 != "" || last2 != "" {
			spec.Ranges = append(spec.Ranges, RangeSpec{First: first2, Last: last2, AutoAssign: &auto2})
		}
		sp, ranges, err := validatePoolSpec(spec)
		if err != nil {
			requireClientError(t, err, spec)
			return
		}
		for i, r := range ranges {
			if r.first.cmp(r.last) > 0 {
				t.Fatalf("accepted reversed range %d of %+v", i, spec)
			}
			if sp.count(r.first, r.last).Sign() <= 0 {
				t.Fatalf("accepted empty range %d of %+v", i, spec)
			}
			for j := 0; j < i; j++ {
				if overlaps(r, ranges[j]) {
					t.Fatalf("accepted overlapping ranges %d and %d of %+v", j, i, spec)
				}
			}
		}
	})
}

func requireClientError(t *testing.T, err error, spec PoolSpec) {
	t.Helper()
	e, ok := fault.AsError(err)
	if !ok {
		t.Fatalf("%+v: rejection is not a *fault.Error: %T %v", spec, err, err)
	}
	if e.Code != fault.CodeInvalid {
		t.Fatalf("%+v: rejection code %s, want invalid: %v", spec, e.Code, e)
	}
	if e.Field == "" || !(e.Field == "name" || e.Field == "type" || e.Field == "delegate_prefix_len" ||
		e.Field == "gateway" || strings.HasPrefix(e.Field, "ranges[")) {
		t.Fatalf("%+v: rejection names field %q, want a field of the spec: %v", spec, e.Field, e)
	}
}
