package cni

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	jsonv2 "github.com/go-json-experiment/json"

	"github.com/ipledger/ipledger/strictjson"
)

// PluginType is the `type` of the plugin's ipam object and the name of its
// binary.
const PluginType = "galactic-ipam"

// LegacyPrefixLen is the prefix length the legacy ipam.static_ip path
// returns its single IPv6 address with.
const LegacyPrefixLen = 64

// Address is one pre-decided address of the ipam.addresses list, as ipledger
// renders it and as the plugin reads it.
type Address struct {
	// Address is an IP address in CIDR notation. Host bits and prefix length
	// are carried exactly: "fd00:10:ff01:0:1::1/96" stays a /96 with host
	// part ::1, "172.20.1.7/32" stays a /32.
	Address string `json:"address"`
	// Gateway is an optional plain IP address (no prefix length) of the same
	// family as Address. It need not lie inside Address's prefix. Empty means
	// no gateway.
	Gateway string `json:"gateway,omitempty"`
}

// IPAMConfig is the `ipam` object of a galactic-ipam network configuration
// in its addresses form. It marshals as
//
//	{"type":"galactic-ipam","addresses":[{"address":"...","gateway":"..."}]}
//
// and is meant to be placed, as is, under the "ipam" key of a network
// configuration (for example in a NetworkAttachmentDefinition).
type IPAMConfig struct {
	Type      string    `json:"type"`
	Addresses []Address `json:"addresses"`
}

// RenderIPAM returns the ipam object that makes galactic-ipam apply exactly
// addrs, in that order. It validates addrs with the same rules as the plugin
// (see [ParseConfig]) so that a config the plugin would reject is never handed
// out; the error is then a *types.Error with code 7 naming the entry
// (`ipam.addresses[i]...`). The strings are kept as given; the returned value
// does not share its slice with addrs.
func RenderIPAM(addrs []Address) (IPAMConfig, error) {
	if _, err := validateAddresses(addrs); err != nil {
		return IPAMConfig{}, err
	}
	return IPAMConfig{Type: PluginType, Addresses: slices.Clone(addrs)}, nil
}

// ParsedAddress is one validated address of a [Config].
type ParsedAddress struct {
	// Prefix is the address with its host bits and configured prefix length
	// (never masked). Prefix.Addr() is never an IPv4-mapped IPv6 address and
	// never carries a zone.
	Prefix netip.Prefix
	// Gateway is the entry's gateway, of the same family as Prefix; the zero
	// netip.Addr when the entry has none.
	Gateway netip.Addr
}

// Config is a parsed and validated galactic-ipam network configuration.
type Config struct {
	// CNIVersion is the configuration's cniVersion ("0.1.0" when absent,
	// as the CNI library decides too). Results are converted to it.
	CNIVersion string
	// Legacy is true when the address came from the legacy ipam.static_ip.
	Legacy bool
	// Addresses are the addresses to return, in configured order; never
	// empty.
	Addresses []ParsedAddress
}

// legacyKeys are the ipam keys of the legacy path, in the fixed order in
// which error messages name them.
var legacyKeys = []string{"static_ip", "ipv6_subnet", "ipv4_subnet"}

// ParseConfig parses and validates a whole network configuration as a plugin
// receives it on stdin (the ipam object is read from its "ipam" key). The
// configuration is strict (strict.go): a key repeated in one object, or
// repeated in another case, anywhere, is refused, keys match only in their
// exact case, and a key the plugin reads spelt in another case
// ("CNIVersion") is refused rather than ignored.
//
// Every rejection is a *types.Error with code 7 (invalid network config)
// whose message names the offending key or entry and value:
//
//   - ipam.addresses combined with any of ipam.static_ip, ipam.ipv6_subnet,
//     ipam.ipv4_subnet (all present ones are named, in that order);
//   - ipam.ipv6_subnet / ipam.ipv4_subnet without ipam.static_ip (they only
//     mean something on the legacy path);
//   - no addresses at all (no ipam.addresses, no ipam.static_ip) or an empty
//     ipam.addresses;
//   - per entry: not an object, an unknown key, a missing/non-string
//     address, a missing prefix length, an unparseable address or prefix
//     length, an IPv4-mapped IPv6 address, a zoned address, the unspecified or
//     a multicast address, a duplicate IP (the same IP with another prefix
//     length too; the later entry is named), a gateway that is not a plain
//     IP, of the other family, mapped, zoned, unspecified, multicast or the
//     entry's own address;
//   - for cniVersion 0.1.0 and 0.2.0, whose results carry at most one
//     address per family, a second address of a family;
//   - the legacy ipam.static_ip: anything but one plain IPv6 address.
//
// Input that is not JSON never reaches ParseConfig through skel (skel answers
// it with code 6); called directly, ParseConfig rejects it with code 7 too.
func ParseConfig(data []byte) (*Config, error) {
	data = strictjson.TrimBOM(data)
	if err := checkStrict(data); err != nil {
		return nil, err
	}
	var top struct {
		CNIVersion json.RawMessage `json:"cniVersion"`
		IPAM       json.RawMessage `json:"ipam"`
	}
	if err := jsonv2.Unmarshal(data, &top); err != nil {
		return nil, invalid("the network configuration is not a JSON object: %s", clip(err.Error()))
	}
	cfg := &Config{CNIVersion: "0.1.0"}
	if present(top.CNIVersion) {
		var v string
		if err := json.Unmarshal(top.CNIVersion, &v); err != nil {
			return nil, invalid("cniVersion must be a string, got %s", clipRaw(top.CNIVersion))
		}
		if v != "" {
			cfg.CNIVersion = v
		}
	}
	if !present(top.IPAM) {
		return nil, invalid(`missing "ipam" object`)
	}
	var ipam struct {
		Addresses  json.RawMessage `json:"addresses"`
		StaticIP   json.RawMessage `json:"static_ip"`
		IPv6Subnet json.RawMessage `json:"ipv6_subnet"`
		IPv4Subnet json.RawMessage `json:"ipv4_subnet"`
	}
	if jsonv2.Unmarshal(top.IPAM, &ipam) != nil {
		return nil, invalid("ipam must be a JSON object, got %s", clipRaw(top.IPAM))
	}
	legacyRaw := []json.RawMessage{ipam.StaticIP, ipam.IPv6Subnet, ipam.IPv4Subnet}
	var legacyPresent []string
	for i, raw := range legacyRaw {
		if present(raw) {
			legacyPresent = append(legacyPresent, "ipam."+legacyKeys[i])
		}
	}

	switch {
	case present(ipam.Addresses):
		if len(legacyPresent) > 0 {
			return nil, invalid("ipam.addresses cannot be combined with %s: remove the legacy keys, ipam.addresses alone carries every address with its prefix length",
				strings.Join(legacyPresent, ", "))
		}
		addrs, err := decodeAddresses(ipam.Addresses)
		if err != nil {
			return nil, err
		}
		parsed, err := validateAddresses(addrs)
		if err != nil {
			return nil, err
		}
		if err := checkVersionCapacity(cfg.CNIVersion, addrs, parsed); err != nil {
			return nil, err
		}
		cfg.Addresses = parsed
	case present(ipam.StaticIP):
		p, err := parseStaticIP(ipam.StaticIP)
		if err != nil {
			return nil, err
		}
		cfg.Legacy = true
		cfg.Addresses = []ParsedAddress{{Prefix: p}}
	case len(legacyPresent) > 0:
		verb := "is a legacy key"
		if len(legacyPresent) > 1 {
			verb = "are legacy keys"
		}
		return nil, invalid("%s %s only meaningful together with ipam.static_ip; to apply pre-decided addresses use ipam.addresses",
			strings.Join(legacyPresent, ", "), verb)
	default:
		return nil, invalid("ipam has no addresses: set ipam.addresses (or the legacy ipam.static_ip)")
	}
	return cfg, nil
}

// decodeAddresses turns the raw ipam.addresses value into entries, rejecting
// anything that is not an array of {address, gateway?} objects of strings.
func decodeAddresses(raw json.RawMessage) ([]Address, error) {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, invalid(`ipam.addresses must be an array of {"address": CIDR, "gateway": IP} objects, got %s`, clipRaw(raw))
	}
	out := make([]Address, len(items))
	for i, item := range items {
		var keys map[string]json.RawMessage
		var entry struct {
			Address json.RawMessage `json:"address"`
			Gateway json.RawMessage `json:"gateway"`
		}
		if json.Unmarshal(item, &keys) != nil || keys == nil || jsonv2.Unmarshal(item, &entry) != nil {
			return nil, invalid(`ipam.addresses[%d] must be an object {"address": CIDR, "gateway": IP}, got %s`, i, clipRaw(item))
		}
		var unknown []string
		for k := range keys {
			if k != "address" && k != "gateway" {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			return nil, invalid(`ipam.addresses[%d]: unknown key %q (an entry has only "address" and an optional "gateway")`, i, clip(unknown[0]))
		}
		if !present(entry.Address) {
			return nil, invalid("ipam.addresses[%d].address is missing", i)
		}
		if json.Unmarshal(entry.Address, &out[i].Address) != nil {
			return nil, invalid("ipam.addresses[%d].address must be a string in CIDR notation, got %s", i, clipRaw(entry.Address))
		}
		if present(entry.Gateway) && json.Unmarshal(entry.Gateway, &out[i].Gateway) != nil {
			return nil, invalid("ipam.addresses[%d].gateway must be a string (an IP address), got %s", i, clipRaw(entry.Gateway))
		}
	}
	return out, nil
}

// validateAddresses applies the per-entry rules of ParseConfig to addrs and
// returns them parsed, in the same order.
func validateAddresses(addrs []Address) ([]ParsedAddress, error) {
	if len(addrs) == 0 {
		return nil, invalid("ipam.addresses is empty: there is no address to apply")
	}
	out := make([]ParsedAddress, 0, len(addrs))
	seen := make(map[netip.Addr]int, len(addrs))
	for i, a := range addrs {
		p, why := parseAddress(a.Address)
		if why != "" {
			return nil, invalid("ipam.addresses[%d].address %q: %s", i, clip(a.Address), why)
		}
		if j, dup := seen[p.Addr()]; dup {
			return nil, invalid("ipam.addresses[%d].address %q: duplicate of ipam.addresses[%d] (%q); an IP may appear only once, whatever its prefix length",
				i, clip(a.Address), j, clip(addrs[j].Address))
		}
		seen[p.Addr()] = i
		var gw netip.Addr
		if a.Gateway != "" {
			gw, why = parseGateway(a.Gateway, p)
			if why != "" {
				return nil, invalid("ipam.addresses[%d].gateway %q: %s", i, clip(a.Gateway), why)
			}
		}
		out = append(out, ParsedAddress{Prefix: p, Gateway: gw})
	}
	return out, nil
}

// checkVersionCapacity rejects a second address of one family for the
// pre-0.3.0 result format, which has one ip4 and one ip6 slot: converting
// would silently drop addresses.
func checkVersionCapacity(cniVersion string, addrs []Address, parsed []ParsedAddress) error {
	if cniVersion != "0.1.0" && cniVersion != "0.2.0" {
		return nil
	}
	first := map[bool]int{}
	for i, p := range parsed {
		is4 := p.Prefix.Addr().Is4()
		if j, ok := first[is4]; ok {
			return invalid("ipam.addresses[%d].address %q: cniVersion %s results carry one %s address and ipam.addresses[%d] is already one; use cniVersion 0.3.0 or later for more",
				i, clip(addrs[i].Address), cniVersion, family(p.Prefix.Addr()), j)
		}
		first[is4] = i
	}
	return nil
}

// parseAddress parses one ipam.addresses[].address value; a non-empty reason
// explains a rejection.
func parseAddress(s string) (netip.Prefix, string) {
	if s == "" {
		return netip.Prefix{}, "empty; an address in CIDR notation is required"
	}
	if strings.Contains(s, "%") {
		return netip.Prefix{}, "zoned IPv6 addresses (with %zone) are not allowed"
	}
	addrPart, bitsPart, hasBits := strings.Cut(s, "/")
	a, err := netip.ParseAddr(addrPart)
	if err != nil {
		return netip.Prefix{}, "not an IP address in CIDR notation"
	}
	if a.Is4In6() {
		return netip.Prefix{}, "IPv4-mapped IPv6 address; write the IPv4 address itself"
	}
	if !hasBits {
		return netip.Prefix{}, fmt.Sprintf("missing prefix length (for a single address write %s/%d)", s, a.BitLen())
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Sprintf("invalid prefix length %q (%s allows 0 to %d)", clip(bitsPart), family(a), a.BitLen())
	}
	if why := unusable(a); why != "" {
		return netip.Prefix{}, why
	}
	return p, ""
}

// parseGateway parses the gateway of the entry whose address is p.
func parseGateway(s string, p netip.Prefix) (netip.Addr, string) {
	if strings.Contains(s, "%") {
		return netip.Addr{}, "zoned IPv6 addresses (with %zone) are not allowed"
	}
	if strings.Contains(s, "/") {
		return netip.Addr{}, "a gateway is a plain IP address, without prefix length"
	}
	g, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, "not an IP address"
	}
	if g.Is4In6() {
		return netip.Addr{}, "IPv4-mapped IPv6 address; write the IPv4 address itself"
	}
	if g.Is4() != p.Addr().Is4() {
		return netip.Addr{}, fmt.Sprintf("%s gateway for the %s address %s; a gateway must be of its address's family",
			family(g), family(p.Addr()), p)
	}
	if why := unusable(g); why != "" {
		return netip.Addr{}, why
	}
	if g == p.Addr() {
		return netip.Addr{}, "the gateway is the entry's own address"
	}
	return g, ""
}

// parseStaticIP parses the legacy ipam.static_ip: one plain IPv6 address,
// returned as a /64.
func parseStaticIP(raw json.RawMessage) (netip.Prefix, error) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return netip.Prefix{}, invalid("ipam.static_ip must be a string (an IPv6 address), got %s", clipRaw(raw))
	}
	why := ""
	var a netip.Addr
	var err error
	switch {
	case s == "":
		why = "empty; one IPv6 address is required"
	case strings.Contains(s, "%"):
		why = "zoned IPv6 addresses (with %zone) are not allowed"
	case strings.Contains(s, "/"):
		why = fmt.Sprintf("a plain IPv6 address is expected (the legacy path always returns it as a /%d); to carry a prefix length use ipam.addresses", LegacyPrefixLen)
	default:
		a, err = netip.ParseAddr(s)
		switch {
		case err != nil:
			why = "not an IP address"
		case a.Is4In6():
			why = "IPv4-mapped IPv6 address; the legacy static_ip path is IPv6 only (use ipam.addresses for IPv4)"
		case a.Is4():
			why = "IPv4 address; the legacy static_ip path is IPv6 only (use ipam.addresses for IPv4)"
		default:
			why = unusable(a)
		}
	}
	if why != "" {
		return netip.Prefix{}, invalid("ipam.static_ip %q: %s", clip(s), why)
	}
	return netip.PrefixFrom(a, LegacyPrefixLen), nil
}

// unusable explains why a can be neither an interface address nor a gateway,
// or returns "".
func unusable(a netip.Addr) string {
	switch {
	case a.IsUnspecified():
		return "the unspecified address cannot be used"
	case a.IsMulticast():
		return "a multicast address cannot be used"
	}
	return ""
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// invalid builds the plugin's configuration error: CNI code 7.
func invalid(format string, args ...any) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, PluginType+": "+fmt.Sprintf(format, args...), "")
}

// present reports whether a raw JSON member was given with a non-null value.
func present(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null"))
}

// maxShown bounds how much of a configured value an error message repeats.
const maxShown = 120

func clip(s string) string {
	if len(s) > maxShown {
		return s[:maxShown] + "..."
	}
	return s
}

func clipRaw(raw json.RawMessage) string {
	return clip(string(bytes.TrimSpace(raw)))
}
