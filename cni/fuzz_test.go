package cni

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// checkParsed asserts the invariants of any configuration ParseConfig
// accepts: a non-empty address list without duplicates or mapped/zoned
// addresses, gateways of their entry's family, a result the configuration's
// version can print (when it is a supported version), and a result that
// CHECK accepts as carrying exactly the configuration.
func checkParsed(t *testing.T, cfg *Config) {
	t.Helper()
	if len(cfg.Addresses) == 0 {
		t.Fatal("accepted a configuration without addresses")
	}
	seen := map[netip.Addr]bool{}
	for _, a := range cfg.Addresses {
		ip := a.Prefix.Addr()
		if !a.Prefix.IsValid() || ip.Is4In6() || ip.Zone() != "" || seen[ip] {
			t.Fatalf("accepted address %v (dup=%v)", a.Prefix, seen[ip])
		}
		seen[ip] = true
		if a.Gateway.IsValid() && (a.Gateway.Is4() != ip.Is4() || a.Gateway.Zone() != "" || a.Gateway.Is4In6()) {
			t.Fatalf("accepted gateway %v for %v", a.Gateway, a.Prefix)
		}
	}
	res := cfg.Result()
	if len(res.IPs) != len(cfg.Addresses) {
		t.Fatalf("result has %d ips for %d addresses", len(res.IPs), len(cfg.Addresses))
	}
	for i, ipc := range res.IPs {
		got, err := netip.ParsePrefix(ipc.Address.String())
		if err != nil || got != cfg.Addresses[i].Prefix {
			t.Fatalf("ips[%d] = %s, configured %v (%v)", i, ipc.Address.String(), cfg.Addresses[i].Prefix, err)
		}
	}
	if err := cfg.Verify(res); err != nil {
		t.Fatalf("CHECK refuses the plugin's own result: %v", err)
	}
	if slices.Contains(SupportedVersions.SupportedVersions(), cfg.CNIVersion) {
		conv, err := res.GetAsVersion(cfg.CNIVersion)
		if err != nil {
			t.Fatalf("cannot convert to %s: %v", cfg.CNIVersion, err)
		}
		var out bytes.Buffer
		if err := conv.PrintTo(&out); err != nil {
			t.Fatal(err)
		}
		back, err := current.NewResultFromResult(conv)
		if err != nil {
			t.Fatal(err)
		}
		if len(back.IPs) != len(cfg.Addresses) {
			t.Fatalf("%s result lost addresses: %s", cfg.CNIVersion, out.Bytes())
		}
	}
}

// checkRejection asserts that err is a *types.Error with code 7.
func checkRejection(t *testing.T, err error) {
	t.Helper()
	var e *types.Error
	if !errors.As(err, &e) {
		t.Fatalf("rejection %v (%T) is not a *types.Error", err, err)
	}
	if e.Code != types.ErrInvalidNetworkConfig {
		t.Fatalf("rejection code %d, want 7: %v", e.Code, e)
	}
	if len(e.Msg) > 2000 {
		t.Fatalf("message of %d bytes: values must be clipped", len(e.Msg))
	}
}

// FuzzParseConfig feeds whole network configurations to the parser: it
// never panics, rejects only with code 7, and whatever it accepts satisfies
// checkParsed.
func FuzzParseConfig(f *testing.F) {
	for _, tc := range addCases {
		for _, v := range allVersions {
			f.Add(netConf(v, tc.ipam))
		}
	}
	for _, tc := range rejectCases {
		f.Add(netConf("1.1.0", tc.ipam))
	}
	for _, s := range []string{``, `null`, `[]`, `{}`, `{"ipam":{}}`, `{"ipam":{"addresses":[{}]}}`, `{"cniVersion":"","ipam":{"static_ip":"::1"}}`,
		`{"IPAM":{"ADDRESSES":[{"ADDRESS":"10.0.0.1/8","Gateway":"10.0.0.2"}]}}`, `{"ipam":{"addresses":[{"address":"1.2.3.4/32","address":"::1/128"}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			checkRejection(t, err)
			return
		}
		checkParsed(t, cfg)
	})
}

// FuzzAddressEntry fuzzes the values of one or two entries and the legacy
// keys inside an always well-formed configuration, so that the fuzzer spends
// its time on address and gateway parsing rather than on JSON syntax.
// Beyond the invariants of FuzzParseConfig, an accepted entry's address must
// be exactly what netip reads from the configured text (prefix and host bits
// kept), and RenderIPAM must accept exactly what the plugin accepts.
func FuzzAddressEntry(f *testing.F) {
	f.Add("fd00:10:ff01:0:1::1/96", "fe80::1", "172.20.1.7/32", "", "", uint8(6))
	f.Add("172.20.1.7", "", "10.0.0.1/24", "10.0.0.1", "", uint8(6))
	f.Add("::ffff:10.0.0.1/128", "::1", "fe80::1%eth0/64", "fe80::1%1", "", uint8(1))
	f.Add("10.0.0.1/24", "fd00::1", "10.0.0.1/32", "", "fd00::1", uint8(0))
	f.Add("", "", "", "", "fd00:180:62::c8", uint8(2))
	f.Add("1.2.3.4/0", "0.0.0.0", "::/0", "ff02::1", "", uint8(4))
	f.Fuzz(func(t *testing.T, addr1, gw1, addr2, gw2, staticIP string, sel uint8) {
		v := allVersions[int(sel)%len(allVersions)]
		addrs := []Address{{Address: addr1, Gateway: gw1}}
		if sel&0x10 == 0 {
			addrs = append(addrs, Address{Address: addr2, Gateway: gw2})
		}
		ipam := map[string]any{"type": PluginType}
		if sel&0x20 == 0 {
			ipam["addresses"] = addrs
		}
		if staticIP != "" {
			ipam["static_ip"] = staticIP
		}
		if sel&0x40 != 0 {
			ipam["ipv6_subnet"] = "fd00::/64"
		}
		conf, err := json.Marshal(map[string]any{"cniVersion": v, "name": "fuzz", "ipam": ipam})
		if err != nil {
			t.Skip("not representable as JSON")
		}
		cfg, err := ParseConfig(conf)
		if err != nil {
			checkRejection(t, err)
		} else {
			checkParsed(t, cfg)
			if !cfg.Legacy {
				for i, a := range cfg.Addresses {
					want, perr := netip.ParsePrefix(addrs[i].Address)
					if perr != nil || want != a.Prefix {
						t.Fatalf("entry %d %q parsed as %v, netip reads %v (%v)", i, addrs[i].Address, a.Prefix, want, perr)
					}
				}
			}
		}
		// The server-side renderer agrees with the plugin on the addresses
		// path (the version capacity rule aside, which depends on cniVersion).
		if _, ok := ipam["addresses"]; ok && staticIP == "" && sel&0x40 == 0 && !legacyResultVersion(v) {
			_, rerr := RenderIPAM(addrs)
			if (rerr == nil) != (err == nil) {
				t.Fatalf("RenderIPAM err %v, plugin err %v", rerr, err)
			}
		}
	})
}
