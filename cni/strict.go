package cni

import (
	"github.com/containernetworking/cni/pkg/types"

	"github.com/ipledger/ipledger/strictjson"
)

// Strict configuration (docs/cni.md): the whole network configuration is
// refused with code 7 when an object in it carries the same member name
// twice, or two names that differ only in case, at any depth (the later
// one is named by its path, e.g. ipam.addresses[1].address): a reader that
// keeps the first and one that keeps the last would apply different
// addresses. Names match only in their exact case, and a member whose name
// differs from one the plugin reads only in case ("CNIVersion",
// "Addresses") is refused rather than ignored. A leading UTF-8 byte order
// mark is ignored. The walker is the server's (package strictjson), which
// the plugin links without linking the server.

// knownKeys are the member names the plugin reads, per object path.
var knownKeys = map[string][]string{
	"":     {"cniVersion", "ipam", "prevResult"},
	"ipam": {"addresses", "static_ip", "ipv6_subnet", "ipv4_subnet"},
}

// checkStrict applies the rules above to data.
func checkStrict(data []byte) *types.Error {
	p := strictjson.Check(data, strictjson.Options{Known: knownKeys})
	if p == nil {
		return nil
	}
	switch p.Kind {
	case strictjson.Duplicate:
		return invalid("%s: key %q appears twice in one object", clip(p.Path), clip(p.Name))
	case strictjson.CaseVariant:
		return invalid("%s: key %q differs from %q only in case (keys match only in exact case)", clip(p.Path), clip(p.Name), clip(p.Prev))
	case strictjson.Misspelt:
		return invalid("%s: key %q is spelt %q (keys match only in exact case)", clip(p.Path), clip(p.Name), p.Prev)
	}
	return invalid("the network configuration is not a JSON object: %s", clip(p.Error()))
}
