package nad

import (
	"encoding/json"
	"strings"
	"testing"
)

// spec.cni must name the main plugin and its cniVersion; anything else is
// refused with a message naming the field.
func TestBaseConfigRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, cni, field string }{
		{"not an object", `"macvlan"`, "spec.cni must be a JSON object"},
		{"null", `null`, "spec.cni must be a JSON object"},
		{"no type", `{"cniVersion":"1.0.0","master":"eth1"}`, "spec.cni.type is required"},
		{"type not a string", `{"cniVersion":"1.0.0","type":7}`, "spec.cni.type is required"},
		{"no cniVersion", `{"type":"macvlan"}`, "spec.cni.cniVersion is required"},
		{"a list", `{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"macvlan"}]}`, "configuration list"},
		{"empty name", `{"cniVersion":"1.0.0","type":"macvlan","name":""}`, "spec.cni.name"},
	} {
		if _, why := baseConfig([]byte(tc.cni)); !strings.Contains(why, tc.field) {
			t.Errorf("%s: %q, want a refusal naming %q", tc.name, why, tc.field)
		}
	}
}

// The rendered config is spec.cni with ipam replaced by galactic-ipam's
// addresses, the attachment's name when spec.cni has none, numbers kept
// as written, and the same text for the same inputs.
func TestRender(t *testing.T) {
	t.Parallel()
	base, why := baseConfig([]byte(`{"cniVersion":"1.0.0","type":"macvlan","master":"eth1","mtu":9000,"weight":1.50,"ipam":{"type":"host-local"}}`))
	if why != "" {
		t.Fatal(why)
	}
	addrs := []Address{{Address: "10.1.0.5/32", Gateway: "10.1.0.1"}, {Address: "fd00:10::/96"}}
	a, err := render(base, "att", addrs)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cniVersion":"1.0.0","ipam":{"type":"galactic-ipam","addresses":[{"address":"10.1.0.5/32","gateway":"10.1.0.1"},{"address":"fd00:10::/96"}]},"master":"eth1","mtu":9000,"name":"att","type":"macvlan","weight":1.50}`
	if a != want {
		t.Fatalf("render:\n%s\nwant\n%s", a, want)
	}
	for range 20 {
		if b, _ := render(base, "att", addrs); b != a {
			t.Fatalf("render is not stable:\n%s\n%s", a, b)
		}
	}
	named, _ := baseConfig([]byte(`{"cniVersion":"1.0.0","type":"macvlan","name":"mine"}`))
	c, _ := render(named, "att", nil)
	var got struct {
		Name string
		IPAM struct{ Addresses []Address } `json:"ipam"`
	}
	if err := json.Unmarshal([]byte(c), &got); err != nil || got.Name != "mine" || got.IPAM.Addresses == nil || len(got.IPAM.Addresses) != 0 {
		t.Fatalf("render with a name and no address: %s (%v)", c, err)
	}
}

// Values take the prefix lengths ipledger's cni-ipam object gives them.
func TestCIDROf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ value, typ, want string }{
		{"10.1.0.5", "ipv4", "10.1.0.5/32"},
		{"FD00::5", "ipv6", "fd00::5/128"},
		{"fd00:10:ff01::1:0:0/96", "ipv6prefix", "fd00:10:ff01::1:0:0/96"},
	} {
		if got, err := cidrOf(tc.value, tc.typ); err != nil || got != tc.want {
			t.Errorf("cidrOf(%q, %s) = %q, %v; want %q", tc.value, tc.typ, got, err, tc.want)
		}
	}
	if _, err := cidrOf("10.1.0.0/24", "ipv4"); err == nil {
		t.Error("a prefix from an ipv4 pool was taken as an address")
	}
}

// A gateway override must be of the pool's family.
func TestGatewayFits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		gw, typ string
		ok      bool
	}{
		{"10.0.0.1", "ipv4", true}, {"fe80::1", "ipv6", true}, {"fe80::1", "ipv6prefix", true},
		{"10.0.0.1", "ipv6", false}, {"fd00::1", "ipv4", false}, {"fe80::1%eth0", "ipv6", false},
	} {
		if why := gatewayFits(tc.gw, tc.typ); (why == "") != tc.ok {
			t.Errorf("gatewayFits(%s, %s) = %q", tc.gw, tc.typ, why)
		}
	}
}
