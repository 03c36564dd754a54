package poolfile

// Run the pool file fuzzer for a while:
//
//	go test ./poolfile -run '^$' -fuzz '^FuzzParsePoolFile$' -fuzztime 10m -parallel 1

import (
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
)

// FuzzParsePoolFile feeds arbitrary text to the NICo pool file reader
// (POST /api/v1/pools:load, --pools). A rejection is 400 bad_request (not
// TOML) or 422 invalid naming the pool field; an accepted file yields
// pools whose inclusive ranges pass the same validation as the JSON API.
func FuzzParsePoolFile(f *testing.F) {
	f.Add(`[pools.lo-ip]
type = "ipv4"
ranges = [
  { start = "10.180.62.1", end = "10.180.62.200" },
  { start = "10.180.62.200", end = "10.180.63.0", auto_assign = false },
]
[pools.vni]
type = "integer"
ranges = [{ start = "0xFA000", end = "0xFA400" }]
[pools.endpoint-v6]
type = "ipv6prefix"
prefix = "fd00:10:ff01::/64"
delegate_prefix_len = 96
[networks.admin]
prefix = "10.0.0.0/24"
`)
	f.Add(`[lo-ip-v6]
type = "ipv6"
prefix = "fd00:180:62::/64"
[lo-ip]
type = "ipv4"
prefix = "10.180.62.1/26"
`)
	f.Add(`[pools.a]
type = "ipv4"
prefix = "10.0.0.1/31"
ranges = []`)
	f.Add(`[pools.vlan]
type = "integer"
ranges = [{ start = 100, end = 100 }]`)
	f.Add(`[pools.x]
type = "ipv6prefix"
prefix = "::/0"
delegate_prefix_len = 128`)
	f.Add("pools = 3")
	f.Add("[pools.\"\"]\ntype=\"ipv4\"\nprefix=\"0.0.0.0/0\"")
	f.Fuzz(func(t *testing.T, data string) {
		pools, err := Parse([]byte(data))
		if err != nil {
			e, ok := fault.AsError(err)
			if !ok {
				t.Fatalf("rejection is not a *fault.Error: %T %v", err, err)
			}
			if e.Code != fault.CodeBadRequest && e.Code != fault.CodeInvalid {
				t.Fatalf("rejection code %s (%d), want bad_request or invalid: %v", e.Code, e.Code.Status(), e)
			}
			if e.Code == fault.CodeInvalid && e.Field == "" {
				t.Fatalf("422 without a field: %v", e)
			}
			return
		}
		seen := map[string]bool{}
		for _, p := range pools {
			if seen[p.Name] {
				t.Fatalf("pool %q returned twice", p.Name)
			}
			seen[p.Name] = true
			if _, err := allocator.NewPoolValues(p); err != nil {
				t.Fatalf("pool %q accepted from the file but its inclusive spec is refused: %v", p.Name, err)
			}
		}
	})
}
