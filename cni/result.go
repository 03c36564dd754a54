package cni

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// ErrAddressMismatch is the plugin-specific CNI error code (100+ are free for
// plugins) with which CHECK reports that prevResult does not carry the
// configured addresses.
const ErrAddressMismatch uint = 100

// Result returns the ADD result at the current spec version (types/100,
// CNIVersion current.ImplementedSpecVersion, i.e. 1.1.0), as a delegated
// IPAM plugin returns it (no interfaces, no `interface` index):
//
//   - one `ips` entry per configured address, in configured order, with the
//     address, host bits and prefix length as configured and the entry's own
//     gateway (none when the entry has none);
//   - on the addresses path, one default route per family present (0.0.0.0/0
//     and/or ::/0, in order of each family's first address), without "gw":
//     the runtime routes it via that family's first gateway, or on-link when
//     the family has none;
//   - on the legacy static_ip path, no routes.
//
// Convert it to the configuration's version with GetAsVersion(c.CNIVersion).
func (c *Config) Result() *current.Result {
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	seen4, seen6 := false, false
	for _, a := range c.Addresses {
		addr := a.Prefix.Addr()
		ipc := &current.IPConfig{
			Address: net.IPNet{IP: net.IP(addr.AsSlice()), Mask: net.CIDRMask(a.Prefix.Bits(), addr.BitLen())},
		}
		if a.Gateway.IsValid() {
			ipc.Gateway = net.IP(a.Gateway.AsSlice())
		}
		res.IPs = append(res.IPs, ipc)
		if c.Legacy {
			continue
		}
		switch {
		case addr.Is4() && !seen4:
			seen4 = true
			res.Routes = append(res.Routes, &types.Route{Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}})
		case addr.Is6() && !seen6:
			seen6 = true
			res.Routes = append(res.Routes, &types.Route{Dst: net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}})
		}
	}
	return res
}

// Verify compares prev (the prevResult of CHECK, converted to the current
// version) with the configuration. Every configured address must appear in
// prev.IPs with the same IP and the same prefix length, and, when the entry
// configures a gateway, with that gateway. Entries of prev that the
// configuration does not name are accepted (other plugins of the chain may
// add addresses), and so are routes (later plugins may change them) and a
// gateway on an entry that configures none (a main plugin such as bridge with
// isGateway fills it in).
//
// The error is a *types.Error with code [ErrAddressMismatch] listing every
// difference, in configured order.
func (c *Config) Verify(prev *current.Result) error {
	var problems []string
	for i, want := range c.Addresses {
		name := fmt.Sprintf("ipam.addresses[%d]", i)
		if c.Legacy {
			name = "ipam.static_ip"
		}
		got := findIP(prev, want.Prefix.Addr())
		if got == nil {
			problems = append(problems, fmt.Sprintf("%s %s is missing from prevResult", name, want.Prefix))
			continue
		}
		ones, bits := got.Address.Mask.Size()
		if bits != want.Prefix.Addr().BitLen() || ones != want.Prefix.Bits() {
			problems = append(problems, fmt.Sprintf("%s %s: prevResult carries %s", name, want.Prefix, got.Address.String()))
		}
		if want.Gateway.IsValid() {
			gw, ok := toAddr(got.Gateway)
			switch {
			case got.Gateway == nil:
				problems = append(problems, fmt.Sprintf("%s %s: gateway %s is missing from prevResult", name, want.Prefix, want.Gateway))
			case !ok || gw != want.Gateway:
				problems = append(problems, fmt.Sprintf("%s %s: prevResult gateway %s, configured %s", name, want.Prefix, got.Gateway, want.Gateway))
			}
		}
	}
	if len(problems) > 0 {
		return types.NewError(ErrAddressMismatch, PluginType+": prevResult does not carry the configured addresses: "+strings.Join(problems, "; "), "")
	}
	return nil
}

// findIP returns the first entry of res.IPs whose IP is a, or nil.
func findIP(res *current.Result, a netip.Addr) *current.IPConfig {
	for _, ipc := range res.IPs {
		if ipc == nil {
			continue
		}
		if got, ok := toAddr(ipc.Address.IP); ok && got == a {
			return ipc
		}
	}
	return nil
}

// toAddr converts a net.IP (4- or 16-byte form) to a netip.Addr, unmapping
// IPv4 addresses held in 16 bytes.
func toAddr(ip net.IP) (netip.Addr, bool) {
	a, ok := netip.AddrFromSlice(ip)
	return a.Unmap(), ok
}
