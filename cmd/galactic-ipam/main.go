// Command galactic-ipam is a delegated CNI IPAM plugin that applies the
// addresses ipledger decided, exactly as decided: every ipam.addresses entry
// comes back with its prefix length, host bits and gateway, in order; the
// legacy ipam.static_ip returns one IPv6 address as a /64.
//
// It serves every CNI spec version (0.1.0 to 1.1.0): ADD, DEL, CHECK,
// VERSION, STATUS and GC. All logic lives in package
// github.com/ipledger/ipledger/cni; docs/cni.md describes configuration and
// behaviour. Install the binary in a directory of CNI_PATH (usually
// /opt/cni/bin) and name it as the "type" of an "ipam" object.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/ipledger/ipledger/cni"
)

func main() {
	skel.PluginMainFuncs(cni.Funcs(), cni.SupportedVersions, cni.About())
}
