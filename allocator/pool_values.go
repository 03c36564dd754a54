package allocator

import (
	"net/netip"
	"strings"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// PoolValues is the value arithmetic of one pool, for the readers of
// formats that write a range otherwise than the API does (package
// poolfile: an exclusive end, a CIDR prefix), and for the database's
// consistency check (package dbcheck), which holds stored values to it.
// It gives back inclusive RangeSpecs in canonical text, as CreatePool
// takes them.
type PoolValues struct{ sp space }

// PoolValuesOf is the value arithmetic of a stored pool (its type and
// delegate_prefix_len), unchecked.
func PoolValuesOf(p *models.Pool) PoolValues { return PoolValues{sp: spaceOf(p)} }

// StoredForm reports whether a stored sort key and canonical text name
// the same value of the pool (ARCHITECTURE.md "Storage"): key is the 32
// lower-case hexadecimal digits of a value of the pool's type (an
// ipv6prefix block aligned to the pool's prefix length) and text that
// value in canonical form. Among keys StoredForm accepts, byte order is
// value order.
func (v PoolValues) StoredForm(key, text string) bool {
	sp := v.sp
	n, err := parseKey(key)
	if err != nil || n.key() != key || n.cmp(sp.max()) > 0 {
		return false
	}
	if sp.typ == TypeIPv6Prefix {
		if st, _ := sp.step().sub(u128{0, 1}); n.hi&st.hi != 0 || n.lo&st.lo != 0 {
			return false
		}
	}
	return sp.format(n) == text
}

// NextKey is the sort key of the pool's value after the one key names;
// false after the type's last value or for a key that does not parse.
func (v PoolValues) NextKey(key string) (string, bool) {
	n, err := parseKey(key)
	if err != nil {
		return "", false
	}
	next, ok := v.sp.next(n)
	if !ok {
		return "", false
	}
	return next.key(), true
}

// NewPoolValues checks spec as CreatePool does — name, type,
// delegate_prefix_len, gateway and ranges; 422 invalid naming the field —
// and returns the arithmetic of the pool's values.
func NewPoolValues(spec PoolSpec) (PoolValues, error) {
	sp, _, err := validatePoolSpec(spec)
	if err != nil {
		return PoolValues{}, err
	}
	return PoolValues{sp: sp}, nil
}

// ExclusiveRange is the range of the values from start up to, not
// including, end (NICo's form). 422 invalid names "start" or "end" when
// that bound is wrong, no field when the range as a whole is (it holds
// IPv4-mapped IPv6 addresses).
func (v PoolValues) ExclusiveRange(start, end string) (RangeSpec, error) {
	sp := v.sp
	first, err := sp.parse(start)
	if err != nil {
		return RangeSpec{}, fault.Errf(fault.CodeInvalid, "start", "%v", err)
	}
	excl, err := sp.parse(end)
	if err != nil {
		return RangeSpec{}, fault.Errf(fault.CodeInvalid, "end", "%v", err)
	}
	if excl.cmp(first) <= 0 {
		return RangeSpec{}, fault.Errf(fault.CodeInvalid, "end", "end %q must be above start %q (end is exclusive)", end, start)
	}
	last, ok := sp.prev(excl)
	if !ok {
		return RangeSpec{}, fault.Errf(fault.CodeInvalid, "end", "end %q leaves an empty range", end)
	}
	if sp.holdsMapped(first, last) {
		return RangeSpec{}, fault.Errf(fault.CodeInvalid, "", "range %s..%s (end exclusive) includes IPv4-mapped IPv6 addresses (::ffff:0:0/96), which are rejected everywhere", start, end)
	}
	return RangeSpec{First: sp.format(first), Last: sp.format(last)}, nil
}

// PrefixRange is the range of values a CIDR prefix gives the pool, as
// NICo gives them: host bits are ignored; an IPv4 prefix includes its
// network address and excludes its broadcast address (a /31 or /32 keeps
// all its addresses); an ipv6prefix pool gets every block of the prefix.
// 422 invalid without a field when the prefix is wrong for the pool.
func (v PoolValues) PrefixRange(prefix string) (RangeSpec, error) {
	sp := v.sp
	p, err := netip.ParsePrefix(strings.TrimSpace(prefix))
	if err != nil || p.Addr().Zone() != "" {
		return RangeSpec{}, fault.Errf(fault.CodeInvalid, "", "%q is not a CIDR prefix", prefix)
	}
	p = p.Masked()
	switch sp.typ {
	case TypeIPv4:
		if !p.Addr().Is4() {
			return RangeSpec{}, fault.Errf(fault.CodeInvalid, "", "%q is not an IPv4 prefix", prefix)
		}
	case TypeIPv6, TypeIPv6Prefix:
		if !p.Addr().Is6() || p.Addr().Is4In6() {
			return RangeSpec{}, fault.Errf(fault.CodeInvalid, "", "%q is not an IPv6 prefix", prefix)
		}
	default:
		return RangeSpec{}, fault.Errf(fault.CodeInvalid, "", "an integer pool takes ranges, not a prefix")
	}
	first := fromAddr(p.Addr())
	hostBits := uint(p.Addr().BitLen() - p.Bits())
	// last = first + 2^hostBits - 1
	var span u128
	if hostBits >= 128 {
		span = u128{^uint64(0), ^uint64(0)}
	} else if hostBits >= 64 {
		span = u128{(1 << (hostBits - 64)) - 1, ^uint64(0)}
	} else {
		span = u128{0, (1 << hostBits) - 1}
	}
	last, _ := first.add(span)
	switch sp.typ {
	case TypeIPv4:
		if p.Bits() < 31 {
			last, _ = last.sub(u128{0, 1}) // the broadcast address is not a pool value
		}
	case TypeIPv6Prefix:
		if p.Bits() > sp.plen {
			return RangeSpec{}, fault.Errf(fault.CodeInvalid, "", "prefix %s is smaller than one /%d block", p, sp.plen)
		}
		last, _ = last.sub(sp.step())
		last, _ = last.add(u128{0, 1})
	}
	if sp.holdsMapped(first, last) {
		return RangeSpec{}, fault.Errf(fault.CodeInvalid, "", "prefix %s includes IPv4-mapped IPv6 addresses (::ffff:0:0/96), which are rejected everywhere", p)
	}
	return RangeSpec{First: sp.format(first), Last: sp.format(last)}, nil
}

// Overlap reports whether two ranges of the pool share a value. Both are
// ranges ExclusiveRange or PrefixRange returned; a bound that does not
// parse in the pool makes its range overlap nothing.
func (v PoolValues) Overlap(a, b RangeSpec) bool {
	ra, errA := v.sp.parseRange(a, "")
	rb, errB := v.sp.parseRange(b, "")
	return errA == nil && errB == nil && overlaps(ra, rb)
}
