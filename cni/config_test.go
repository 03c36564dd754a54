package cni

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
)

// rejectCase is a configuration that ADD (and CHECK) must refuse with CNI
// code 7 and a message containing every fragment.
type rejectCase struct {
	name string // the rule it checks
	ipam string
	msg  []string
}

var rejectCases = []rejectCase{
	// Combining the two paths.
	{
		name: "addresses with static_ip is a conflict",
		ipam: `{"type":"galactic-ipam","addresses":[{"address":"10.0.0.1/32"}],"static_ip":"fd00::1"}`,
		msg:  []string{"ipam.addresses cannot be combined with ipam.static_ip: "},
	},
	{
		name: "addresses with ipv6_subnet is a conflict",
		ipam: `{"type":"galactic-ipam","addresses":[{"address":"10.0.0.1/32"}],"ipv6_subnet":"fd00::/64"}`,
		msg:  []string{"ipam.addresses cannot be combined with ipam.ipv6_subnet: "},
	},
	{
		name: "addresses with ipv4_subnet is a conflict",
		ipam: `{"type":"galactic-ipam","addresses":[{"address":"10.0.0.1/32"}],"ipv4_subnet":"10.0.0.0/24"}`,
		msg:  []string{"ipam.addresses cannot be combined with ipam.ipv4_subnet: "},
	},
	{
		name: "a conflict names every conflicting key in fixed order whatever the JSON order",
		ipam: `{"ipv4_subnet":"10.0.0.0/24","ipv6_subnet":"fd00::/64","static_ip":"fd00::1","addresses":[{"address":"10.0.0.1/32"}],"type":"galactic-ipam"}`,
		msg:  []string{"ipam.addresses cannot be combined with ipam.static_ip, ipam.ipv6_subnet, ipam.ipv4_subnet: "},
	},
	{
		name: "a conflict is reported before any entry error",
		ipam: `{"type":"galactic-ipam","addresses":[{"address":"bogus"}],"ipv4_subnet":"10.0.0.0/24","static_ip":""}`,
		msg:  []string{"ipam.addresses cannot be combined with ipam.static_ip, ipam.ipv4_subnet: "},
	},
	{
		name: "an empty addresses list still conflicts with static_ip",
		ipam: `{"type":"galactic-ipam","addresses":[],"static_ip":"fd00::1"}`,
		msg:  []string{"ipam.addresses cannot be combined with ipam.static_ip"},
	},
	// Legacy keys alone and empty configurations.
	{
		name: "ipv6_subnet alone is only meaningful with static_ip",
		ipam: `{"type":"galactic-ipam","ipv6_subnet":"fd00::/64"}`,
		msg:  []string{"ipam.ipv6_subnet is a legacy key only meaningful together with ipam.static_ip", "use ipam.addresses"},
	},
	{
		name: "ipv4_subnet alone is only meaningful with static_ip",
		ipam: `{"type":"galactic-ipam","ipv4_subnet":"10.0.0.0/24"}`,
		msg:  []string{"ipam.ipv4_subnet is a legacy key only meaningful together with ipam.static_ip"},
	},
	{
		name: "both subnets alone are named in fixed order",
		ipam: `{"type":"galactic-ipam","ipv4_subnet":"10.0.0.0/24","ipv6_subnet":"fd00::/64"}`,
		msg:  []string{"ipam.ipv6_subnet, ipam.ipv4_subnet are legacy keys only meaningful together with ipam.static_ip"},
	},
	{
		name: "an empty ipam object has no addresses",
		ipam: `{"type":"galactic-ipam"}`,
		msg:  []string{"ipam has no addresses: set ipam.addresses (or the legacy ipam.static_ip)"},
	},
	{
		name: "null addresses and static_ip count as absent",
		ipam: `{"type":"galactic-ipam","addresses":null,"static_ip":null}`,
		msg:  []string{"ipam has no addresses"},
	},
	{
		name: "an empty addresses list has nothing to apply",
		ipam: `{"type":"galactic-ipam","addresses":[]}`,
		msg:  []string{"ipam.addresses is empty"},
	},
	{
		name: "ipam must be an object",
		ipam: `"galactic-ipam"`,
		msg:  []string{`ipam must be a JSON object, got "galactic-ipam"`},
	},
	{
		name: "addresses must be an array",
		ipam: `{"type":"galactic-ipam","addresses":{"address":"10.0.0.1/32"}}`,
		msg:  []string{"ipam.addresses must be an array"},
	},
	// Entry shape.
	{
		name: "an entry must be an object",
		ipam: addressesIPAM(entry("10.0.0.1/32", ""), `"10.0.0.2/32"`),
		msg:  []string{`ipam.addresses[1] must be an object`, `got "10.0.0.2/32"`},
	},
	{
		name: "a null entry is not an object",
		ipam: addressesIPAM(`null`),
		msg:  []string{`ipam.addresses[0] must be an object`},
	},
	{
		name: "an entry has no unknown keys (a typo must not drop a gateway)",
		ipam: addressesIPAM(`{"address":"10.0.0.1/32","gw":"10.0.0.254"}`),
		msg:  []string{`ipam.addresses[0]: unknown key "gw"`},
	},
	{
		name: "an entry needs an address",
		ipam: addressesIPAM(entry("10.0.0.1/32", ""), `{"gateway":"10.0.0.254"}`),
		msg:  []string{"ipam.addresses[1].address is missing"},
	},
	{
		name: "an address must be a string",
		ipam: addressesIPAM(`{"address":167772161}`),
		msg:  []string{"ipam.addresses[0].address must be a string", "got 167772161"},
	},
	{
		name: "a gateway must be a string",
		ipam: addressesIPAM(`{"address":"10.0.0.1/32","gateway":["10.0.0.254"]}`),
		msg:  []string{"ipam.addresses[0].gateway must be a string", `got ["10.0.0.254"]`},
	},
	// Address values.
	{
		name: "an empty address is rejected",
		ipam: addressesIPAM(entry("", "")),
		msg:  []string{`ipam.addresses[0].address "": empty`},
	},
	{
		name: "a missing IPv4 prefix length is rejected",
		ipam: addressesIPAM(entry("fd00::1/96", ""), entry("172.20.1.7", "")),
		msg:  []string{`ipam.addresses[1].address "172.20.1.7": missing prefix length (for a single address write 172.20.1.7/32)`},
	},
	{
		name: "a missing IPv6 prefix length is rejected",
		ipam: addressesIPAM(entry("fd00:10:ff01:0:1::1", "")),
		msg:  []string{`ipam.addresses[0].address "fd00:10:ff01:0:1::1": missing prefix length (for a single address write fd00:10:ff01:0:1::1/128)`},
	},
	{
		name: "an unparseable address is rejected",
		ipam: addressesIPAM(entry("banana/24", "")),
		msg:  []string{`ipam.addresses[0].address "banana/24": not an IP address in CIDR notation`},
	},
	{
		name: "an IPv4 octet out of range is rejected",
		ipam: addressesIPAM(entry("10.0.0.256/24", "")),
		msg:  []string{`ipam.addresses[0].address "10.0.0.256/24": not an IP address`},
	},
	{
		name: "leading zeros in IPv4 (octal ambiguity) are rejected",
		ipam: addressesIPAM(entry("010.0.0.1/24", "")),
		msg:  []string{`ipam.addresses[0].address "010.0.0.1/24": not an IP address`},
	},
	{
		name: "an IPv4 prefix length above 32 is rejected",
		ipam: addressesIPAM(entry("10.0.0.1/33", "")),
		msg:  []string{`ipam.addresses[0].address "10.0.0.1/33": invalid prefix length "33" (IPv4 allows 0 to 32)`},
	},
	{
		name: "an IPv6 prefix length above 128 is rejected",
		ipam: addressesIPAM(entry("fd00::1/129", "")),
		msg:  []string{`invalid prefix length "129" (IPv6 allows 0 to 128)`},
	},
	{
		name: "a non-numeric prefix length is rejected",
		ipam: addressesIPAM(entry("10.0.0.1/255.255.255.0", "")),
		msg:  []string{`invalid prefix length "255.255.255.0"`},
	},
	{
		name: "an IPv4-mapped IPv6 address is rejected",
		ipam: addressesIPAM(entry("::ffff:10.0.0.1/128", "")),
		msg:  []string{`ipam.addresses[0].address "::ffff:10.0.0.1/128": IPv4-mapped IPv6 address`},
	},
	{
		name: "an IPv4-mapped IPv6 address in hex form is rejected",
		ipam: addressesIPAM(entry("::ffff:a00:1/104", "")),
		msg:  []string{`ipam.addresses[0].address "::ffff:a00:1/104": IPv4-mapped IPv6 address`},
	},
	{
		name: "a zoned address is rejected",
		ipam: addressesIPAM(entry("fe80::1%eth0/64", "")),
		msg:  []string{`ipam.addresses[0].address "fe80::1%eth0/64": zoned IPv6 addresses`},
	},
	{
		name: "the unspecified address is rejected",
		ipam: addressesIPAM(entry("0.0.0.0/0", "")),
		msg:  []string{`ipam.addresses[0].address "0.0.0.0/0": the unspecified address cannot be used`},
	},
	{
		name: "a multicast address is rejected",
		ipam: addressesIPAM(entry("ff02::1/128", "")),
		msg:  []string{`ipam.addresses[0].address "ff02::1/128": a multicast address cannot be used`},
	},
	// Duplicates.
	{
		name: "a duplicate address names the later entry",
		ipam: addressesIPAM(entry("10.0.0.1/32", ""), entry("fd00::1/96", ""), entry("10.0.0.1/32", "")),
		msg:  []string{`ipam.addresses[2].address "10.0.0.1/32": duplicate of ipam.addresses[0] ("10.0.0.1/32")`},
	},
	{
		name: "the same IP with another prefix length is a duplicate",
		ipam: addressesIPAM(entry("fd00:10:ff01:0:1::1/96", ""), entry("fd00:10:ff01:0:1::1/128", "")),
		msg:  []string{`ipam.addresses[1].address "fd00:10:ff01:0:1::1/128": duplicate of ipam.addresses[0] ("fd00:10:ff01:0:1::1/96")`},
	},
	{
		name: "the same IPv6 written differently is a duplicate",
		ipam: addressesIPAM(entry("fd00:0:0::1/64", ""), entry("FD00::1/64", "")),
		msg:  []string{`ipam.addresses[1].address "FD00::1/64": duplicate of ipam.addresses[0]`},
	},
	// Gateways.
	{
		name: "an IPv4 gateway on an IPv6 address is rejected",
		ipam: addressesIPAM(entry("10.0.0.1/32", "10.0.0.254"), entry("fd00::1/96", "10.0.0.254")),
		msg:  []string{`ipam.addresses[1].gateway "10.0.0.254": IPv4 gateway for the IPv6 address fd00::1/96`},
	},
	{
		name: "an IPv6 gateway on an IPv4 address is rejected",
		ipam: addressesIPAM(entry("172.20.1.7/32", "fe80::1")),
		msg:  []string{`ipam.addresses[0].gateway "fe80::1": IPv6 gateway for the IPv4 address 172.20.1.7/32`},
	},
	{
		name: "an IPv4-mapped gateway is rejected rather than taken as IPv4",
		ipam: addressesIPAM(entry("172.20.1.7/32", "::ffff:172.20.0.1")),
		msg:  []string{`ipam.addresses[0].gateway "::ffff:172.20.0.1": IPv4-mapped IPv6 address`},
	},
	{
		name: "a zoned gateway is rejected",
		ipam: addressesIPAM(entry("fd00::1/96", "fe80::1%eth0")),
		msg:  []string{`ipam.addresses[0].gateway "fe80::1%eth0": zoned IPv6 addresses`},
	},
	{
		name: "a gateway with a prefix length is rejected",
		ipam: addressesIPAM(entry("10.0.0.1/24", "10.0.0.254/24")),
		msg:  []string{`ipam.addresses[0].gateway "10.0.0.254/24": a gateway is a plain IP address, without prefix length`},
	},
	{
		name: "an unparseable gateway is rejected",
		ipam: addressesIPAM(entry("10.0.0.1/24", "router")),
		msg:  []string{`ipam.addresses[0].gateway "router": not an IP address`},
	},
	{
		name: "an unspecified gateway is rejected",
		ipam: addressesIPAM(entry("fd00::1/64", "::")),
		msg:  []string{`ipam.addresses[0].gateway "::": the unspecified address cannot be used`},
	},
	{
		name: "a gateway equal to its own address is rejected",
		ipam: addressesIPAM(entry("10.0.0.1/24", "10.0.0.1")),
		msg:  []string{`ipam.addresses[0].gateway "10.0.0.1": the gateway is the entry's own address`},
	},
	// Legacy static_ip values.
	{
		name: "static_ip must be IPv6",
		ipam: `{"type":"galactic-ipam","static_ip":"10.0.0.1"}`,
		msg:  []string{`ipam.static_ip "10.0.0.1": IPv4 address; the legacy static_ip path is IPv6 only`},
	},
	{
		name: "static_ip is a plain address, not a CIDR",
		ipam: `{"type":"galactic-ipam","static_ip":"fd00::1/128"}`,
		msg:  []string{`ipam.static_ip "fd00::1/128": a plain IPv6 address is expected (the legacy path always returns it as a /64)`},
	},
	{
		name: "static_ip must not be IPv4-mapped",
		ipam: `{"type":"galactic-ipam","static_ip":"::ffff:10.0.0.1"}`,
		msg:  []string{`ipam.static_ip "::ffff:10.0.0.1": IPv4-mapped IPv6 address`},
	},
	{
		name: "static_ip must not be zoned",
		ipam: `{"type":"galactic-ipam","static_ip":"fe80::1%eth0"}`,
		msg:  []string{`ipam.static_ip "fe80::1%eth0": zoned IPv6 addresses`},
	},
	{
		name: "static_ip must not be empty",
		ipam: `{"type":"galactic-ipam","static_ip":""}`,
		msg:  []string{`ipam.static_ip "": empty`},
	},
	{
		name: "static_ip must be a string",
		ipam: `{"type":"galactic-ipam","static_ip":["fd00::1"]}`,
		msg:  []string{`ipam.static_ip must be a string`},
	},
	{
		name: "static_ip must parse",
		ipam: `{"type":"galactic-ipam","static_ip":"fd00::g"}`,
		msg:  []string{`ipam.static_ip "fd00::g": not an IP address`},
	},
}

// TestConfigRejections checks every rejection rule at every supported
// cniVersion, through ADD and through CHECK: a *types.Error with code 7
// whose message names the key or entry and its value.
func TestConfigRejections(t *testing.T) {
	for _, tc := range rejectCases {
		for _, v := range allVersions {
			t.Run(tc.name+"/"+v, func(t *testing.T) {
				out, err := runAdd(t, netConf(v, tc.ipam))
				wantCode(t, err, 7, append([]string{"galactic-ipam: "}, tc.msg...)...)
				if len(out) != 0 {
					t.Errorf("a rejected ADD printed %s", out)
				}
				err = Check(cmdArgs(netConf(v, tc.ipam)))
				wantCode(t, err, 7, tc.msg...)
			})
		}
	}
}

// TestConfigRejectionsAreDeterministic runs every rejection twice: the
// message must not depend on map order.
func TestConfigRejectionsAreDeterministic(t *testing.T) {
	for _, tc := range rejectCases {
		_, err1 := ParseConfig(netConf("1.1.0", tc.ipam))
		for range 5 {
			_, err2 := ParseConfig(netConf("1.1.0", tc.ipam))
			if err1.Error() != err2.Error() {
				t.Fatalf("%s: %q then %q", tc.name, err1, err2)
			}
		}
	}
}

// TestConfigEnvelopeRejections covers the parts of the network
// configuration outside the ipam object.
func TestConfigEnvelopeRejections(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		msg        string
	}{
		{"a missing ipam object is rejected", `{"cniVersion":"1.1.0","name":"n"}`, `missing "ipam" object`},
		{"a null ipam object is rejected", `{"cniVersion":"1.1.0","name":"n","ipam":null}`, `missing "ipam" object`},
		{"a non-string cniVersion is rejected", `{"cniVersion":1.1,"name":"n","ipam":{}}`, "cniVersion must be a string, got 1.1"},
		{"a configuration that is not an object is rejected", `[1,2]`, "the network configuration is not a JSON object"},
		{"a configuration that is not JSON is rejected", `{"cniVersion":`, "the network configuration is not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.conf))
			wantCode(t, err, 7, tc.msg)
		})
	}
}

// TestParseConfigKeepsHostBitsAndPrefix checks the parsed form itself: the
// prefix is never masked and the gateway is kept per entry.
func TestParseConfigKeepsHostBitsAndPrefix(t *testing.T) {
	cfg, err := ParseConfig(netConf("1.1.0", addressesIPAM(
		entry("fd00:10:ff01:0:1::1/96", "fe80::1"), entry("172.20.1.7/32", ""), entry("10.1.2.3/24", "10.1.0.1"))))
	if err != nil {
		t.Fatal(err)
	}
	want := []ParsedAddress{
		{Prefix: netip.MustParsePrefix("fd00:10:ff01:0:1::1/96"), Gateway: netip.MustParseAddr("fe80::1")},
		{Prefix: netip.MustParsePrefix("172.20.1.7/32")},
		{Prefix: netip.MustParsePrefix("10.1.2.3/24"), Gateway: netip.MustParseAddr("10.1.0.1")},
	}
	if cfg.CNIVersion != "1.1.0" || cfg.Legacy || len(cfg.Addresses) != len(want) {
		t.Fatalf("cfg = %+v", cfg)
	}
	for i := range want {
		if cfg.Addresses[i] != want[i] {
			t.Errorf("address %d = %v, want %v", i, cfg.Addresses[i], want[i])
		}
	}
}

// TestRenderIPAMShape checks the JSON ipledger hands out.
func TestRenderIPAMShape(t *testing.T) {
	ipam, err := RenderIPAM([]Address{
		{Address: "fd00:10:ff01:0:1::/96", Gateway: "fd00:10:ff01::1"},
		{Address: "172.20.1.7/32"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(ipam)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"galactic-ipam","addresses":[{"address":"fd00:10:ff01:0:1::/96","gateway":"fd00:10:ff01::1"},{"address":"172.20.1.7/32"}]}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestRenderIPAMRejectsWhatThePluginRejects: the server cannot hand out a
// config the plugin would refuse; the error is the plugin's own code 7.
func TestRenderIPAMRejectsWhatThePluginRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addrs []Address
		msg   string
	}{
		{"nothing to render", nil, "ipam.addresses is empty"},
		{"a host value without prefix length", []Address{{Address: "172.20.1.7"}}, `ipam.addresses[0].address "172.20.1.7": missing prefix length`},
		{"the same IP twice", []Address{{Address: "fd00::1/96"}, {Address: "fd00::1/128"}}, `ipam.addresses[1].address "fd00::1/128": duplicate of ipam.addresses[0]`},
		{"a gateway of the other family", []Address{{Address: "fd00::1/96", Gateway: "10.0.0.1"}}, `ipam.addresses[0].gateway "10.0.0.1": IPv4 gateway`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RenderIPAM(tc.addrs)
			wantCode(t, err, 7, tc.msg)
		})
	}
}

// TestRenderIPAMDoesNotAlias: the rendered config owns its slice.
func TestRenderIPAMDoesNotAlias(t *testing.T) {
	in := []Address{{Address: "10.0.0.1/32"}}
	ipam, err := RenderIPAM(in)
	if err != nil {
		t.Fatal(err)
	}
	in[0].Address = "10.0.0.2/32"
	if ipam.Addresses[0].Address != "10.0.0.1/32" {
		t.Fatal("RenderIPAM result shares its slice with the caller")
	}
}

// TestRenderIPAMRoundTrip: a config rendered for an owner holding an IPv6
// /96 block and an IPv4 /32, placed under "ipam" of a network configuration
// and fed to the plugin's ADD, gives back exactly those addresses with their
// gateways, at every version whose result can hold them.
func TestRenderIPAMRoundTrip(t *testing.T) {
	rendered, err := RenderIPAM([]Address{
		{Address: "fd00:10:ff01:0:1::/96", Gateway: "fd00:10:ff01::1"},
		{Address: "172.20.1.7/32", Gateway: "172.20.0.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ipamJSON, err := json.Marshal(rendered)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range allVersions {
		t.Run(v, func(t *testing.T) {
			conf, err := json.Marshal(map[string]any{
				"cniVersion": v, "name": "endpoint-net", "type": "bridge", "ipam": json.RawMessage(ipamJSON),
			})
			if err != nil {
				t.Fatal(err)
			}
			out, err := runAdd(t, conf)
			if err != nil {
				t.Fatalf("ADD of a rendered config failed: %v", err)
			}
			got := decodePrinted(t, v, out)
			want, routes := expected(v, []gotIP{
				{Address: "fd00:10:ff01:0:1::/96", Gateway: "fd00:10:ff01::1"},
				{Address: "172.20.1.7/32", Gateway: "172.20.0.1"},
			}, []string{"::/0", "0.0.0.0/0"})
			if len(got.IPs) != len(want) {
				t.Fatalf("ips %+v, want %+v", got.IPs, want)
			}
			for i := range want {
				if got.IPs[i] != want[i] {
					t.Errorf("ips[%d] = %+v, want %+v", i, got.IPs[i], want[i])
				}
			}
			if strings.Join(got.Routes, ",") != strings.Join(routes, ",") {
				t.Errorf("routes %q, want %q", got.Routes, routes)
			}
		})
	}
}
