// Package cni holds the logic of galactic-ipam, the CNI IPAM plugin that
// applies addresses pre-decided by ipledger exactly as decided (docs/cni.md).
//
// The plugin binary (cmd/galactic-ipam) is a thin wrapper around [Funcs]
// served through skel. The server side renders the plugin's `ipam` object with
// [RenderIPAM]; the plugin parses a whole network configuration with
// [ParseConfig] and answers ADD with [Config.Result].
//
// Two configuration paths exist, and they never mix:
//
//   - ipam.addresses: [{"address": "CIDR", "gateway": "IP"?}, ...], any
//     number of entries of both families. Each entry is returned as one `ips`
//     entry, in configured order, with its address, host bits and prefix
//     length carried exactly and its gateway (if any) on that same entry.
//     One default route (0.0.0.0/0, ::/0; without "gw") is returned per
//     family present.
//   - ipam.static_ip: the legacy path. One IPv6 address, returned as a /64,
//     no IPv4, no gateway, no routes.
//
// Every configuration error is a *types.Error with code 7
// ([types.ErrInvalidNetworkConfig]) whose message names the offending key or
// entry (for example `ipam.addresses[2].gateway "10.0.0.1"`). Nothing is
// written to disk: ADD parses and returns, DEL and GC have nothing to
// release, STATUS is always ready, CHECK compares prevResult with the
// configured addresses. docs/cni.md describes the behaviour for operators.
package cni
