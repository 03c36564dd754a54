package allocator

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"
)

// u128 is an unsigned 128-bit number: the numeric value of one pool value.
// IPv4 addresses use the low 32 bits, integers the low 64 bits, IPv6
// addresses and ipv6prefix blocks (their network address) all 128 bits.
type u128 struct{ hi, lo uint64 }

func (a u128) cmp(b u128) int {
	switch {
	case a.hi < b.hi:
		return -1
	case a.hi > b.hi:
		return 1
	case a.lo < b.lo:
		return -1
	case a.lo > b.lo:
		return 1
	}
	return 0
}

// add returns a+b and whether it overflowed 128 bits.
func (a u128) add(b u128) (u128, bool) {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, c2 := bits.Add64(a.hi, b.hi, c)
	return u128{hi, lo}, c2 != 0
}

// sub returns a-b and whether it underflowed.
func (a u128) sub(b u128) (u128, bool) {
	lo, br := bits.Sub64(a.lo, b.lo, 0)
	hi, br2 := bits.Sub64(a.hi, b.hi, br)
	return u128{hi, lo}, br2 != 0
}

func (a u128) shr(n uint) u128 {
	switch {
	case n == 0:
		return a
	case n >= 128:
		return u128{}
	case n >= 64:
		return u128{0, a.hi >> (n - 64)}
	}
	return u128{a.hi >> n, a.lo>>n | a.hi<<(64-n)}
}

func (a u128) big() *big.Int {
	b := new(big.Int).SetUint64(a.hi)
	b.Lsh(b, 64)
	return b.Or(b, new(big.Int).SetUint64(a.lo))
}

// key is the stored sort key: 32 lower-case hex digits, big-endian, so that
// byte order (SQLite BINARY, PostgreSQL COLLATE "C") is numeric order.
func (a u128) key() string {
	var b [16]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(a.hi >> (56 - 8*i))
		b[8+i] = byte(a.lo >> (56 - 8*i))
	}
	return hex.EncodeToString(b[:])
}

func parseKey(k string) (u128, error) {
	b, err := hex.DecodeString(k)
	if err != nil || len(b) != 16 {
		return u128{}, fmt.Errorf("bad stored key %q", k)
	}
	var a u128
	for i := 0; i < 8; i++ {
		a.hi = a.hi<<8 | uint64(b[i])
		a.lo = a.lo<<8 | uint64(b[8+i])
	}
	return a, nil
}

func fromAddr(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{0, uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])}
	}
	b := a.As16()
	var v u128
	for i := 0; i < 8; i++ {
		v.hi = v.hi<<8 | uint64(b[i])
		v.lo = v.lo<<8 | uint64(b[8+i])
	}
	return v
}

func toAddr4(v u128) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v.lo >> 24), byte(v.lo >> 16), byte(v.lo >> 8), byte(v.lo)})
}

func toAddr6(v u128) netip.Addr {
	var b [16]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(v.hi >> (56 - 8*i))
		b[8+i] = byte(v.lo >> (56 - 8*i))
	}
	return netip.AddrFrom16(b)
}

// PoolType is the kind of value a resource pool holds.
type PoolType string

// The four pool types of docs/pools.md.
const (
	TypeIPv4       PoolType = "ipv4"
	TypeIPv6       PoolType = "ipv6"
	TypeIPv6Prefix PoolType = "ipv6prefix"
	TypeInteger    PoolType = "integer"
)

// ParsePoolType accepts exactly the four pool type names.
func ParsePoolType(s string) (PoolType, bool) {
	switch PoolType(s) {
	case TypeIPv4, TypeIPv6, TypeIPv6Prefix, TypeInteger:
		return PoolType(s), true
	}
	return "", false
}

// space is the value space of one pool: how its values parse, print and step.
type space struct {
	typ PoolType
	// plen is delegate_prefix_len for ipv6prefix pools.
	plen int
}

func newSpace(t PoolType, plen int) space { return space{typ: t, plen: plen} }

// step is the distance between two consecutive values: 1, or the size of
// one delegated block for ipv6prefix pools.
func (s space) step() u128 {
	if s.typ != TypeIPv6Prefix {
		return u128{0, 1}
	}
	n := uint(128 - s.plen)
	if n >= 64 {
		return u128{1 << (n - 64), 0}
	}
	return u128{0, 1 << n}
}

func (s space) max() u128 {
	switch s.typ {
	case TypeIPv4:
		return u128{0, 0xffffffff}
	case TypeInteger:
		return u128{0, ^uint64(0)}
	case TypeIPv6Prefix:
		m := u128{^uint64(0), ^uint64(0)}
		st := s.step()
		r, _ := m.sub(st)
		r, _ = r.add(u128{0, 1})
		return r
	}
	return u128{^uint64(0), ^uint64(0)}
}

func (s space) next(v u128) (u128, bool) {
	if v.cmp(s.max()) >= 0 {
		return u128{}, false
	}
	n, _ := v.add(s.step())
	return n, true
}

func (s space) prev(v u128) (u128, bool) {
	if v == (u128{}) {
		return u128{}, false
	}
	p, under := v.sub(s.step())
	return p, !under
}

// count is the number of values in the inclusive span first..last.
func (s space) count(first, last u128) *big.Int {
	d, _ := last.sub(first)
	if s.typ == TypeIPv6Prefix {
		d = d.shr(uint(128 - s.plen))
	}
	b := d.big()
	return b.Add(b, big.NewInt(1))
}

// format renders a value in canonical form: dotted IPv4, RFC 5952 IPv6,
// decimal integers, CIDR for ipv6prefix blocks.
func (s space) format(v u128) string {
	switch s.typ {
	case TypeIPv4:
		return toAddr4(v).String()
	case TypeIPv6:
		return toAddr6(v).String()
	case TypeIPv6Prefix:
		return netip.PrefixFrom(toAddr6(v), s.plen).String()
	}
	return strconv.FormatUint(v.lo, 10)
}

// parse reads one value as given by a client (JSON API, CLI, console). The
// error text names what is wrong; callers wrap it into a 422 with a field.
func (s space) parse(in string) (u128, error) {
	str := strings.TrimSpace(in)
	if str == "" {
		return u128{}, fmt.Errorf("empty value")
	}
	switch s.typ {
	case TypeInteger:
		return parseInteger(str)
	case TypeIPv4:
		a, err := parseAddr(str)
		if err != nil {
			return u128{}, err
		}
		if !a.Is4() {
			return u128{}, fmt.Errorf("%q is not an IPv4 address", in)
		}
		return fromAddr(a), nil
	case TypeIPv6:
		a, err := parseAddr(str)
		if err != nil {
			return u128{}, err
		}
		if !a.Is6() {
			return u128{}, fmt.Errorf("%q is not an IPv6 address", in)
		}
		return fromAddr(a), nil
	case TypeIPv6Prefix:
		var a netip.Addr
		if strings.Contains(str, "/") {
			p, err := netip.ParsePrefix(str)
			if err != nil {
				return u128{}, fmt.Errorf("%q is not an IPv6 prefix", in)
			}
			if p.Bits() != s.plen {
				return u128{}, fmt.Errorf("%q is not a /%d block", in, s.plen)
			}
			a = p.Addr()
		} else {
			var err error
			if a, err = parseAddr(str); err != nil {
				return u128{}, err
			}
		}
		if !a.Is6() || a.Is4In6() {
			return u128{}, fmt.Errorf("%q is not an IPv6 prefix", in)
		}
		if netip.PrefixFrom(a, s.plen).Masked().Addr() != a {
			return u128{}, fmt.Errorf("%q has host bits set below /%d", in, s.plen)
		}
		return fromAddr(a), nil
	}
	return u128{}, fmt.Errorf("unknown pool type %q", s.typ)
}

// The IPv4-mapped IPv6 addresses, ::ffff:0:0/96, are rejected everywhere
// (docs/reservations.md, docs/api.md), so no IPv6 pool may hold one: such a value could be
// handed out but never requested, released or looked up by its text.
var mappedFirst, mappedLast = u128{0, 0xffff << 32}, u128{0, 0xffff<<32 | 0xffffffff}

// holdsMapped reports whether first..last of s contains a value that is an
// IPv4-mapped IPv6 address. For ipv6prefix pools the values are block
// starts: with delegate_prefix_len below 96 no block starts inside
// ::ffff:0:0/96; from 96 on, any overlap contains a block start.
func (s space) holdsMapped(first, last u128) bool {
	switch {
	case s.typ == TypeIPv6, s.typ == TypeIPv6Prefix && s.plen >= 96:
		return first.cmp(mappedLast) <= 0 && mappedFirst.cmp(last) <= 0
	}
	return false
}

// parseAddr parses an IP address and refuses zoned and IPv4-mapped IPv6
// forms (docs/reservations.md, docs/api.md).
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q is a zoned address", s)
	}
	if a.Is4In6() {
		return netip.Addr{}, fmt.Errorf("%q is an IPv4-mapped IPv6 address", s)
	}
	return a, nil
}

// parseInteger reads a non-negative integer in decimal or 0x hex, as NICo
// pool files allow.
func parseInteger(s string) (u128, error) {
	var (
		n   uint64
		err error
	)
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		n, err = strconv.ParseUint(s[2:], 16, 64)
	} else {
		n, err = strconv.ParseUint(s, 10, 64)
	}
	if errors.Is(err, strconv.ErrRange) {
		return u128{}, fmt.Errorf("%q is larger than the largest integer value, %d", s, uint64(math.MaxUint64))
	}
	if err != nil {
		return u128{}, fmt.Errorf("%q is not a non-negative integer", s)
	}
	return u128{0, n}, nil
}

// CanonicalAddress returns the canonical text of an IPv4 or IPv6 address
// (RFC 5952), refusing zoned and IPv4-mapped forms.
func CanonicalAddress(s string) (netip.Addr, error) {
	return parseAddr(strings.TrimSpace(s))
}
