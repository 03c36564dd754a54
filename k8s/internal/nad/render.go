package nad

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/ipledger/ipledger/k8s/internal/ledger"
)

// Address is one entry of galactic-ipam's ipam.addresses (docs/cni.md).
type Address struct {
	Address string `json:"address"`
	Gateway string `json:"gateway,omitempty"`
}

// ipamConfig is the ipam object written into the attachment's
// configuration: the owner's cni-ipam object (docs/cni.md).
type ipamConfig struct {
	Type      string    `json:"type"`
	Addresses []Address `json:"addresses"`
}

// baseConfig reads spec.cni: a JSON object naming the main plugin
// ("type") and its "cniVersion". A configuration list ("plugins") is
// refused: the attachment carries one plugin, whose ipam ipledger writes.
// why is the refusal, naming the field, or "".
func baseConfig(raw []byte) (cfg map[string]any, why string) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers are written back exactly as given
	if err := dec.Decode(&cfg); err != nil || cfg == nil {
		return nil, "spec.cni must be a JSON object: the main CNI plugin's configuration"
	}
	if _, ok := cfg["plugins"]; ok {
		return nil, `spec.cni is a configuration list ("plugins"): give the main plugin's configuration, whose ipam ipledger writes`
	}
	for _, key := range []string{"type", "cniVersion"} {
		s, ok := cfg[key].(string)
		if !ok || s == "" {
			return nil, fmt.Sprintf("spec.cni.%s is required: a non-empty string (got %s)", key, describe(cfg[key]))
		}
	}
	if n, ok := cfg["name"]; ok {
		if s, ok := n.(string); !ok || s == "" {
			return nil, fmt.Sprintf("spec.cni.name must be a non-empty string when given (got %s)", describe(n))
		}
	}
	return cfg, ""
}

func describe(v any) string {
	if v == nil {
		return "nothing"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// render is the NetworkAttachmentDefinition's spec.config: base with
// "ipam" set to galactic-ipam's addresses, and "name" set to the
// attachment's name when base has none. Keys are written sorted, so the
// same inputs always give the same text.
func render(base map[string]any, name string, addrs []Address) (string, error) {
	out := make(map[string]any, len(base)+2)
	for k, v := range base {
		out[k] = v
	}
	if _, ok := out["name"]; !ok {
		out["name"] = name
	}
	if addrs == nil {
		addrs = []Address{}
	}
	out["ipam"] = ipamConfig{Type: "galactic-ipam", Addresses: addrs}
	b, err := json.Marshal(out)
	return string(b), err
}

// cidrOf is a value of an ipledger pool of type typ as galactic-ipam
// takes it, as ipledger's cni-ipam object renders it: an ipv6prefix block
// keeps its prefix length, an ipv4 or ipv6 value is a /32 or /128.
func cidrOf(value, typ string) (string, error) {
	if typ == ledger.TypeIPv6Prefix {
		p, err := netip.ParsePrefix(value)
		if err != nil {
			return "", fmt.Errorf("ipledger gave %q, not a prefix", value)
		}
		return p.String(), nil
	}
	a, err := netip.ParseAddr(value)
	if err != nil {
		return "", fmt.Errorf("ipledger gave %q, not an address", value)
	}
	return netip.PrefixFrom(a, a.BitLen()).String(), nil
}

// isAddressPool tells whether an ipledger pool of type typ holds
// addresses (an integer pool does not).
func isAddressPool(typ string) bool {
	return typ == ledger.TypeIPv4 || typ == ledger.TypeIPv6 || typ == ledger.TypeIPv6Prefix
}

// gatewayFits tells whether gateway (a plain IP) is of the family of the
// pool type typ; why says what is wrong.
func gatewayFits(gateway, typ string) (why string) {
	g, err := netip.ParseAddr(gateway)
	if err != nil || g.Zone() != "" {
		return fmt.Sprintf("gateway %q is not an IP address without a zone", gateway)
	}
	if g.Is4() != (typ == ledger.TypeIPv4) {
		return fmt.Sprintf("gateway %s is not of the family of the pool's %s values", gateway, typ)
	}
	return ""
}
