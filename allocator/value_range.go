package allocator

import (
	"net/netip"
	"strings"

	"github.com/ipledger/ipledger/fault"
)

// Key ranges of values inside an address prefix: the search's prefix
// look-up and the allocations filter (one value or a prefix) read them.

// ones is the number with the low n bits set (n ≤ 128).
func ones(n int) u128 {
	switch {
	case n <= 0:
		return u128{}
	case n >= 128:
		return u128{^uint64(0), ^uint64(0)}
	case n >= 64:
		return u128{^uint64(0) >> (128 - n), ^uint64(0)}
	}
	return u128{0, ^uint64(0) >> (64 - n)}
}

// prefixKeys is the key range of the values of space sp inside prefix p:
// addresses of an ipv4 or ipv6 pool, block starts of an ipv6prefix pool
// (the one block holding p when p is narrower than a block). ok is false
// when p is of another family than the pool.
func prefixKeys(sp space, p netip.Prefix) (first, last u128, ok bool) {
	p = p.Masked()
	a := p.Addr()
	switch {
	case sp.typ == TypeIPv4 && a.Is4():
		first = fromAddr(a)
		h := ones(32 - p.Bits())
		return first, u128{0, first.lo | h.lo}, true
	case sp.typ == TypeIPv6 && a.Is6():
		first = fromAddr(a)
		h := ones(128 - p.Bits())
		return first, u128{first.hi | h.hi, first.lo | h.lo}, true
	case sp.typ == TypeIPv6Prefix && a.Is6():
		if p.Bits() >= sp.plen {
			b := fromAddr(netip.PrefixFrom(a, sp.plen).Masked().Addr())
			return b, b, true
		}
		first = fromAddr(a)
		h := ones(128 - p.Bits())
		return first, u128{first.hi | h.hi, first.lo | h.lo}, true
	}
	return u128{}, u128{}, false
}

// valueKeyRange is the key range a pool's allocations filter selects: one
// value in the pool's own spelling, or every value inside an address
// prefix (10.180.62.0/24, fd00:180:62::/64). An empty text selects all.
func valueKeyRange(sp space, v string) (first, last string, err error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", "", nil
	}
	if strings.Contains(v, "/") && sp.typ != TypeInteger {
		p, perr := netip.ParsePrefix(v)
		if perr == nil && p.Addr().Zone() == "" && !p.Addr().Is4In6() {
			if f, l, ok := prefixKeys(sp, p); ok {
				return f.key(), l.key(), nil
			}
			return "", "", fault.Errf(fault.CodeInvalid, "value", "%s is not of this pool's family (%s)", v, sp.typ)
		}
		if sp.typ != TypeIPv6Prefix {
			return "", "", fault.Errf(fault.CodeInvalid, "value", "%q is not an address prefix", v)
		}
	}
	if sp.typ == TypeIPv6Prefix {
		if a, aerr := parseAddr(v); aerr == nil && a.Is6() {
			k := fromAddr(netip.PrefixFrom(a, sp.plen).Masked().Addr()).key()
			return k, k, nil
		}
	}
	k, perr := sp.parse(v)
	if perr != nil {
		return "", "", fault.Errf(fault.CodeInvalid, "value", "%v", perr)
	}
	return k.key(), k.key(), nil
}
