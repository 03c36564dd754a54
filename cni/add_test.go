package cni

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// addCase is an ADD that must succeed with exactly these ips and routes.
type addCase struct {
	name   string // the rule it checks
	ipam   string
	want   []gotIP  // in configured order, Version left empty
	routes []string // in result order
}

var addCases = []addCase{
	{
		name: "prefix length and host bits are carried exactly",
		ipam: addressesIPAM(entry("fd00:10:ff01:0:1::1/96", ""), entry("172.20.1.7/32", ""), entry("10.1.2.3/24", "")),
		want: []gotIP{
			{Address: "fd00:10:ff01:0:1::1/96"}, {Address: "172.20.1.7/32"}, {Address: "10.1.2.3/24"},
		},
		routes: []string{"::/0", "0.0.0.0/0"},
	},
	{
		name:   "an IPv6 block keeps its prefix length and network address",
		ipam:   addressesIPAM(entry("fd00:10:ff01:0:1::/96", "")),
		want:   []gotIP{{Address: "fd00:10:ff01:0:1::/96"}},
		routes: []string{"::/0"},
	},
	{
		name:   "a gateway may lie outside the prefix",
		ipam:   addressesIPAM(entry("172.20.1.7/32", "172.20.0.1"), entry("fd00:10:ff01:0:1::1/96", "fe80::1")),
		want:   []gotIP{{Address: "172.20.1.7/32", Gateway: "172.20.0.1"}, {Address: "fd00:10:ff01:0:1::1/96", Gateway: "fe80::1"}},
		routes: []string{"0.0.0.0/0", "::/0"},
	},
	{
		name: "each gateway stays on its own ips entry",
		ipam: addressesIPAM(
			entry("fd00:1::10/64", "fd00:1::1"),
			entry("fd00:2::10/64", ""),
			entry("fd00:3::10/64", "fd00:3::1"),
			entry("10.0.1.10/24", ""),
			entry("10.0.2.10/24", "10.0.2.1"),
		),
		want: []gotIP{
			{Address: "fd00:1::10/64", Gateway: "fd00:1::1"},
			{Address: "fd00:2::10/64"},
			{Address: "fd00:3::10/64", Gateway: "fd00:3::1"},
			{Address: "10.0.1.10/24"},
			{Address: "10.0.2.10/24", Gateway: "10.0.2.1"},
		},
		routes: []string{"::/0", "0.0.0.0/0"},
	},
	{
		name: "ips keep the configured order",
		ipam: addressesIPAM(entry("10.9.0.1/32", ""), entry("fd00::9/128", ""), entry("10.1.0.1/32", ""), entry("fd00::1/128", "")),
		want: []gotIP{
			{Address: "10.9.0.1/32"}, {Address: "fd00::9/128"}, {Address: "10.1.0.1/32"}, {Address: "fd00::1/128"},
		},
		routes: []string{"0.0.0.0/0", "::/0"},
	},
	{
		name:   "one default route for IPv4 only when only IPv4 is present",
		ipam:   addressesIPAM(entry("172.20.1.7/32", "172.20.0.1"), entry("172.20.1.8/32", "172.20.0.2")),
		want:   []gotIP{{Address: "172.20.1.7/32", Gateway: "172.20.0.1"}, {Address: "172.20.1.8/32", Gateway: "172.20.0.2"}},
		routes: []string{"0.0.0.0/0"},
	},
	{
		name:   "one default route for IPv6 only when only IPv6 is present",
		ipam:   addressesIPAM(entry("fd00::1/96", "fd00::ffff")),
		want:   []gotIP{{Address: "fd00::1/96", Gateway: "fd00::ffff"}},
		routes: []string{"::/0"},
	},
	{
		name:   "an empty gateway string means no gateway",
		ipam:   addressesIPAM(`{"address":"10.0.0.5/24","gateway":""}`, `{"address":"fd00::5/64","gateway":null}`),
		want:   []gotIP{{Address: "10.0.0.5/24"}, {Address: "fd00::5/64"}},
		routes: []string{"0.0.0.0/0", "::/0"},
	},
	{
		name:   "ipam keys other than the legacy ones are ignored",
		ipam:   `{"type":"galactic-ipam","addresses":[{"address":"10.0.0.5/24"}],"comment":"rendered by ipledger"}`,
		want:   []gotIP{{Address: "10.0.0.5/24"}},
		routes: []string{"0.0.0.0/0"},
	},
	{
		name: "addresses are printed in canonical form (RFC 5952) with the same value and prefix",
		ipam: addressesIPAM(entry("FD00:0010:FF01:0000:0001:0:0:0001/96", "FE80:0::1"), entry("64:ff9b::10.0.0.1/96", "")),
		want: []gotIP{
			{Address: "fd00:10:ff01:0:1::1/96", Gateway: "fe80::1"},
			{Address: "64:ff9b::a00:1/96"}, // an embedded IPv4 suffix that is not mapped is IPv6
		},
		routes: []string{"::/0"},
	},
	{
		name: "legacy static_ip is one IPv6 address returned as a /64, no IPv4",
		ipam: `{"type":"galactic-ipam","static_ip":"fd00:180:62::c8"}`,
		want: []gotIP{{Address: "fd00:180:62::c8/64"}},
	},
	{
		name: "legacy static_ip accepts and ignores ipv6_subnet and ipv4_subnet",
		ipam: `{"type":"galactic-ipam","static_ip":"fd00:180:62::c8","ipv6_subnet":"fd00:180:62::/48","ipv4_subnet":"10.180.62.0/24"}`,
		want: []gotIP{{Address: "fd00:180:62::c8/64"}},
	},
}

func init() {
	// Any number of entries: 40 addresses of both families.
	var entries []string
	var want []gotIP
	for i := range 20 {
		v6 := fmt.Sprintf("fd00:10:ff01:0:%x::1/96", i+1)
		v4 := fmt.Sprintf("172.20.%d.7/32", i)
		gw6 := fmt.Sprintf("fd00:10:ff01:0:%x::ffff", i+1)
		entries = append(entries, entry(v6, gw6), entry(v4, ""))
		want = append(want, gotIP{Address: v6, Gateway: gw6}, gotIP{Address: v4})
	}
	addCases = append(addCases, addCase{
		name:   "any number of addresses of both families",
		ipam:   addressesIPAM(entries...),
		want:   want,
		routes: []string{"::/0", "0.0.0.0/0"},
	})
}

// TestADD runs every success rule at every supported cniVersion: the result
// is printed at the configuration's version, carries the addresses exactly,
// in order, each with its own gateway, and one default route per family.
// At 0.1.0/0.2.0, whose results hold one address per family, a second
// address of a family is a code 7 error instead of a silently dropped one.
func TestADD(t *testing.T) {
	for _, tc := range addCases {
		for _, v := range allVersions {
			t.Run(tc.name+"/"+v, func(t *testing.T) {
				out, err := runAdd(t, netConf(v, tc.ipam))
				if legacyResultVersion(v) && !onePerFamily(tc.want) {
					wantCode(t, err, 7, "cniVersion "+v+" results carry one")
					return
				}
				if err != nil {
					t.Fatalf("ADD failed: %v", err)
				}
				got := decodePrinted(t, v, out)
				want, routes := expected(v, tc.want, tc.routes)
				if !reflect.DeepEqual(got.IPs, want) {
					t.Errorf("ips\n got %+v\nwant %+v\nresult:\n%s", got.IPs, want, out)
				}
				if !slices.Equal(got.Routes, routes) {
					t.Errorf("routes\n got %q\nwant %q", got.Routes, routes)
				}
			})
		}
	}
}

// expected adapts a case's expectation to the result format of version v.
func expected(v string, want []gotIP, routes []string) ([]gotIP, []string) {
	is6 := func(s string) bool { return strings.Contains(s, ":") }
	if legacyResultVersion(v) {
		// ip4 first, then ip6; each slot carries its family's routes.
		var ips []gotIP
		var rs []string
		for _, six := range []bool{false, true} {
			for _, w := range want {
				if is6(w.Address) == six {
					ips = append(ips, w)
				}
			}
			for _, r := range routes {
				if is6(r) == six {
					rs = append(rs, r)
				}
			}
		}
		return ips, rs
	}
	out := slices.Clone(want)
	if strings.HasPrefix(v, "0.") {
		for i := range out {
			out[i].Version = "4"
			if is6(out[i].Address) {
				out[i].Version = "6"
			}
		}
	}
	return out, routes
}

func onePerFamily(ips []gotIP) bool {
	n4, n6 := 0, 0
	for _, ip := range ips {
		if strings.Contains(ip.Address, ":") {
			n6++
		} else {
			n4++
		}
	}
	return n4 <= 1 && n6 <= 1
}

// TestADDOldVersionsNameTheSecondAddressOfAFamily checks the 0.1.0/0.2.0
// capacity rule names the later entry and the earlier one.
func TestADDOldVersionsNameTheSecondAddressOfAFamily(t *testing.T) {
	for _, v := range []string{"0.1.0", "0.2.0"} {
		t.Run(v, func(t *testing.T) {
			ipam := addressesIPAM(entry("fd00::1/96", ""), entry("10.0.0.1/32", ""), entry("fd00::2/96", ""))
			_, err := runAdd(t, netConf(v, ipam))
			wantCode(t, err, 7, `ipam.addresses[2].address "fd00::2/96"`, "one IPv6 address", "ipam.addresses[0] is already one", "0.3.0 or later")
		})
	}
}

// TestADDMissingCNIVersionIs010 follows the CNI library: a configuration
// without cniVersion is 0.1.0, and its result is a 0.1.0 result.
func TestADDMissingCNIVersionIs010(t *testing.T) {
	out, err := runAdd(t, []byte(`{"name":"n","ipam":`+addressesIPAM(entry("10.0.0.1/32", "10.0.0.254"))+`}`))
	if err != nil {
		t.Fatal(err)
	}
	got := decodePrinted(t, "0.1.0", out)
	if want := []gotIP{{Address: "10.0.0.1/32", Gateway: "10.0.0.254"}}; !reflect.DeepEqual(got.IPs, want) {
		t.Fatalf("ips %+v, want %+v", got.IPs, want)
	}
}

// TestADDUnknownCNIVersionIsCode1 covers a version skel would already have
// refused: the plugin still answers with a CNI error, not code 999.
func TestADDUnknownCNIVersionIsCode1(t *testing.T) {
	_, err := runAdd(t, netConf("9.9.9", addressesIPAM(entry("10.0.0.1/32", ""))))
	wantCode(t, err, 1, `cniVersion "9.9.9"`)
}
