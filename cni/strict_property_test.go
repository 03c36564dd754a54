package cni

import (
	"math/rand/v2"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/ipledger/ipledger/strictjson/strictjsontest"
)

// Property (the CNI configuration door): a valid network configuration
// with one key repeated — under its own name or in another case — in a
// random object at any depth (the plugin's own keys and any other
// plugin's) is refused by ADD with code 7 naming the added key's path, and
// nothing is printed. The valid configuration, even after a UTF-8 byte
// order mark, is accepted.
func TestStrictConfigProperty(t *testing.T) {
	confs := [][]byte{
		netConf("1.1.0", addressesIPAM(entry("fd00:10:ff01::5/96", "fd00:10:ff01::1"), entry("172.20.1.7/32", "172.20.1.1"))),
		netConf("0.4.0", `{"type":"galactic-ipam","static_ip":"fd00::9"}`),
		[]byte(`{"cniVersion":"1.0.0","name":"n","type":"macvlan","master":"eth0","ipam":{"type":"galactic-ipam","addresses":[{"address":"10.0.0.5/24"}],"comment":{"by":"ops"}}}`),
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 4))
	for _, conf := range confs {
		for i := 0; i < 40; i++ {
			mut, field, err := strictjsontest.MutateJSON(r, conf)
			if err != nil {
				t.Fatal(err)
			}
			out, err := runAdd(t, mut)
			wantCode(t, err, types.ErrInvalidNetworkConfig, field)
			if len(out) != 0 {
				t.Fatalf("ADD of %s printed %s", mut, out)
			}
		}
		if out, err := runAdd(t, append([]byte("\xEF\xBB\xBF"), conf...)); err != nil || len(out) == 0 {
			t.Fatalf("valid config %s: %v", conf, err)
		}
	}
}

// A key the plugin reads, spelt in another case, is refused rather than
// ignored (names match only in exact case).
func TestConfigKeyCase(t *testing.T) {
	for _, c := range []struct{ conf, frag string }{
		{`{"CNIVersion":"1.0.0","ipam":{"addresses":[{"address":"10.0.0.5/24"}]}}`, `"CNIVersion" is spelt "cniVersion"`},
		{`{"cniVersion":"1.0.0","ipam":{"Addresses":[{"address":"10.0.0.5/24"}]}}`, `"Addresses" is spelt "addresses"`},
		{`{"cniVersion":"1.0.0","ipam":{"addresses":[{"Address":"10.0.0.5/24"}]}}`, `unknown key "Address"`},
	} {
		_, err := ParseConfig([]byte(c.conf))
		wantCode(t, err, types.ErrInvalidNetworkConfig, c.frag)
	}
}
