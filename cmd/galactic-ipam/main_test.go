package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/version"
)

var allVersions = version.All.SupportedVersions()

const dualStackIPAM = `{"type":"galactic-ipam","addresses":[` +
	`{"address":"fd00:10:ff01:0:1::1/96","gateway":"fe80::1"},` +
	`{"address":"172.20.1.7/32","gateway":"172.20.0.1"}]}`

// printedAddrs returns "address gw=gateway" for each address of a result
// printed at version v, read from the raw JSON so that nothing is
// normalised on the way.
func printedAddrs(t *testing.T, v string, out []byte) (cniVersion string, addrs []string) {
	t.Helper()
	type ip struct {
		Address string `json:"address"`
		IP      string `json:"ip"`
		Gateway string `json:"gateway"`
	}
	var r struct {
		CNIVersion string `json:"cniVersion"`
		IPs        []ip   `json:"ips"`
		IP4        *ip    `json:"ip4"`
		IP6        *ip    `json:"ip6"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("stdout is not a result: %v\n%s", err, out)
	}
	if _, err := version.NewResult(v, out); err != nil {
		t.Fatalf("the CNI library cannot read the %s result: %v\n%s", v, err, out)
	}
	for _, x := range r.IPs {
		addrs = append(addrs, x.Address+" gw="+x.Gateway)
	}
	for _, x := range []*ip{r.IP6, r.IP4} {
		if x != nil {
			addrs = append(addrs, x.IP+" gw="+x.Gateway)
		}
	}
	return r.CNIVersion, addrs
}

// TestBinaryADDEveryVersion runs the binary like a runtime at every spec
// version: exit 0, a result of that version on stdout carrying the /96 and
// the /32 exactly with their gateways.
func TestBinaryADDEveryVersion(t *testing.T) {
	want := []string{"fd00:10:ff01:0:1::1/96 gw=fe80::1", "172.20.1.7/32 gw=172.20.0.1"}
	for _, v := range allVersions {
		t.Run(v, func(t *testing.T) {
			p := run(t, pluginBin, cniEnv("ADD", nil), conf(v, dualStackIPAM))
			if p.exit != 0 {
				t.Fatalf("exit %d: %s %s", p.exit, p.stdout, p.stderr)
			}
			gotVersion, got := printedAddrs(t, v, p.stdout)
			if gotVersion != v {
				t.Errorf("result cniVersion %q, want %q", gotVersion, v)
			}
			if !slices.Equal(got, want) {
				t.Errorf("addresses %q, want %q\n%s", got, want, p.stdout)
			}
		})
	}
}

// TestBinaryADDKeepsOrderAndGatewaysAt1x checks a longer list through the
// process boundary: configured order, each gateway on its own entry, one
// default route per family.
func TestBinaryADDKeepsOrderAndGatewaysAt1x(t *testing.T) {
	ipam := `{"type":"galactic-ipam","addresses":[` +
		`{"address":"10.1.2.3/24"},{"address":"fd00:1::5/64","gateway":"fd00:1::1"},` +
		`{"address":"172.20.1.7/32","gateway":"169.254.1.1"},{"address":"fd00:2::5/64"}]}`
	p := run(t, pluginBin, cniEnv("ADD", nil), conf("1.1.0", ipam))
	if p.exit != 0 {
		t.Fatalf("exit %d: %s", p.exit, p.stdout)
	}
	_, got := printedAddrs(t, "1.1.0", p.stdout)
	want := []string{"10.1.2.3/24 gw=", "fd00:1::5/64 gw=fd00:1::1", "172.20.1.7/32 gw=169.254.1.1", "fd00:2::5/64 gw="}
	if !slices.Equal(got, want) {
		t.Fatalf("addresses %q, want %q", got, want)
	}
	var r struct {
		Routes []map[string]any `json:"routes"`
	}
	if err := json.Unmarshal(p.stdout, &r); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(r.Routes) != "[map[dst:0.0.0.0/0] map[dst:::/0]]" {
		t.Fatalf("routes %v, want one default route per family without gw", r.Routes)
	}
}

// TestBinaryConfigErrorsAreCode7 checks configuration errors through the
// process boundary at every version, for ADD and (from 0.4.0) CHECK: exit
// 1, a CNI error object with code 7 naming the key or entry.
func TestBinaryConfigErrorsAreCode7(t *testing.T) {
	cases := []struct {
		name, ipam, msg string
	}{
		{"conflicting keys", `{"type":"galactic-ipam","addresses":[{"address":"10.0.0.1/32"}],"ipv4_subnet":"10.0.0.0/24","static_ip":"fd00::1"}`,
			"ipam.addresses cannot be combined with ipam.static_ip, ipam.ipv4_subnet"},
		{"empty config", `{"type":"galactic-ipam"}`, "ipam has no addresses"},
		{"legacy subnet alone", `{"type":"galactic-ipam","ipv6_subnet":"fd00::/64"}`, "ipam.ipv6_subnet is a legacy key only meaningful together with ipam.static_ip"},
		{"missing prefix", `{"type":"galactic-ipam","addresses":[{"address":"172.20.1.7"}]}`, `ipam.addresses[0].address "172.20.1.7": missing prefix length`},
		{"duplicate", `{"type":"galactic-ipam","addresses":[{"address":"fd00::1/96"},{"address":"fd00::1/64"}]}`, `ipam.addresses[1].address "fd00::1/64": duplicate of ipam.addresses[0]`},
		{"mapped", `{"type":"galactic-ipam","addresses":[{"address":"::ffff:10.0.0.1/128"}]}`, "IPv4-mapped"},
		{"zoned", `{"type":"galactic-ipam","addresses":[{"address":"fe80::1%eth0/64"}]}`, "zoned"},
		{"wrong-family gateway", `{"type":"galactic-ipam","addresses":[{"address":"fd00::1/96","gateway":"10.0.0.1"}]}`, `ipam.addresses[0].gateway "10.0.0.1": IPv4 gateway`},
		{"legacy IPv4", `{"type":"galactic-ipam","static_ip":"10.0.0.1"}`, `ipam.static_ip "10.0.0.1"`},
	}
	for _, tc := range cases {
		for _, v := range allVersions {
			t.Run(tc.name+"/"+v, func(t *testing.T) {
				wantError(t, run(t, pluginBin, cniEnv("ADD", nil), conf(v, tc.ipam)), 7, tc.msg)
				if ok, _ := version.GreaterThanOrEqualTo(v, "0.4.0"); ok {
					wantError(t, run(t, pluginBin, cniEnv("CHECK", nil), conf(v, tc.ipam)), 7, tc.msg)
				}
			})
		}
	}
}

// TestBinaryCHECK: CHECK with the ADD result as prevResult succeeds
// silently; a prevResult with another prefix length fails with code 100;
// below 0.4.0 CHECK does not exist (code 1 from skel).
func TestBinaryCHECK(t *testing.T) {
	for _, v := range allVersions {
		t.Run(v, func(t *testing.T) {
			if ok, _ := version.GreaterThanOrEqualTo(v, "0.4.0"); !ok {
				wantError(t, run(t, pluginBin, cniEnv("CHECK", nil), conf(v, dualStackIPAM)), 1, "config version does not allow CHECK")
				return
			}
			add := run(t, pluginBin, cniEnv("ADD", nil), conf(v, dualStackIPAM))
			if add.exit != 0 {
				t.Fatalf("ADD: %s", add.stdout)
			}
			withPrev := func(prev []byte) []byte {
				var m map[string]json.RawMessage
				if err := json.Unmarshal(conf(v, dualStackIPAM), &m); err != nil {
					t.Fatal(err)
				}
				m["prevResult"] = prev
				b, _ := json.Marshal(m)
				return b
			}
			wantSilentSuccess(t, run(t, pluginBin, cniEnv("CHECK", nil), withPrev(add.stdout)))

			other := run(t, pluginBin, cniEnv("ADD", nil), conf(v, strings.Replace(dualStackIPAM, "/96", "/64", 1)))
			wantError(t, run(t, pluginBin, cniEnv("CHECK", nil), withPrev(other.stdout)), 100,
				"ipam.addresses[0] fd00:10:ff01:0:1::1/96: prevResult carries fd00:10:ff01:0:1::1/64")

			wantError(t, run(t, pluginBin, cniEnv("CHECK", nil), conf(v, dualStackIPAM)), 7, "CHECK needs prevResult")
		})
	}
}

// TestBinaryDEL: nothing to release; success without output at every
// version, without CNI_NETNS (optional for DEL), and for a config ADD would
// refuse.
func TestBinaryDEL(t *testing.T) {
	for _, v := range allVersions {
		wantSilentSuccess(t, run(t, pluginBin, cniEnv("DEL", nil), conf(v, dualStackIPAM)))
		wantSilentSuccess(t, run(t, pluginBin, cniEnv("DEL", map[string]string{"CNI_NETNS": ""}), conf(v, dualStackIPAM)))
		wantSilentSuccess(t, run(t, pluginBin, cniEnv("DEL", nil), conf(v, `{"type":"galactic-ipam","addresses":[{"address":"10.0.0.1"}]}`)))
	}
}

// TestBinaryVERSION prints every supported version.
func TestBinaryVERSION(t *testing.T) {
	p := run(t, pluginBin, cniEnv("VERSION", nil), nil)
	if p.exit != 0 {
		t.Fatalf("exit %d: %s", p.exit, p.stdout)
	}
	var r struct {
		CNIVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal(p.stdout, &r); err != nil {
		t.Fatal(err)
	}
	if r.CNIVersion != version.Current() || !slices.Equal(r.SupportedVersions, allVersions) {
		t.Fatalf("VERSION = %s", p.stdout)
	}
	if !slices.Contains(r.SupportedVersions, "1.1.0") || !slices.Contains(r.SupportedVersions, "0.1.0") {
		t.Fatalf("VERSION must list 0.1.0 to 1.1.0: %v", r.SupportedVersions)
	}
}

// TestBinarySTATUS: from 1.1.0 the plugin is always ready (exit 0, no
// output); earlier configs do not have STATUS (code 1 from skel).
func TestBinarySTATUS(t *testing.T) {
	env := cniEnv("STATUS", map[string]string{"CNI_CONTAINERID": "", "CNI_NETNS": "", "CNI_IFNAME": ""})
	wantSilentSuccess(t, run(t, pluginBin, env, conf("1.1.0", dualStackIPAM)))
	wantError(t, run(t, pluginBin, env, conf("1.0.0", dualStackIPAM)), 1, "config version does not allow STATUS")
}

// TestBinaryGC: from 1.1.0, GC with a valid-attachments list succeeds with
// nothing to collect; earlier configs do not have GC (code 1).
func TestBinaryGC(t *testing.T) {
	env := cniEnv("GC", map[string]string{"CNI_CONTAINERID": "", "CNI_NETNS": "", "CNI_IFNAME": ""})
	gc := []byte(`{"cniVersion":"1.1.0","name":"galactic-test","type":"bridge","ipam":` + dualStackIPAM +
		`,"cni.dev/valid-attachments":[{"containerID":"ctr-1","ifname":"eth0"}]}`)
	wantSilentSuccess(t, run(t, pluginBin, env, gc))
	wantError(t, run(t, pluginBin, env, conf("1.0.0", dualStackIPAM)), 1, "config version does not allow GC")
}

// TestBinaryProtocolErrors: what skel answers before the plugin runs is a
// CNI error too, with the spec's code.
func TestBinaryProtocolErrors(t *testing.T) {
	t.Run("missing CNI_CONTAINERID is code 4", func(t *testing.T) {
		wantError(t, run(t, pluginBin, cniEnv("ADD", map[string]string{"CNI_CONTAINERID": ""}), conf("1.1.0", dualStackIPAM)), 4, "CNI_CONTAINERID")
	})
	t.Run("missing CNI_IFNAME is code 4", func(t *testing.T) {
		wantError(t, run(t, pluginBin, cniEnv("ADD", map[string]string{"CNI_IFNAME": ""}), conf("1.1.0", dualStackIPAM)), 4, "CNI_IFNAME")
	})
	t.Run("unknown CNI_COMMAND is code 4", func(t *testing.T) {
		wantError(t, run(t, pluginBin, cniEnv("FROB", nil), conf("1.1.0", dualStackIPAM)), 4, "unknown CNI_COMMAND: FROB")
	})
	t.Run("stdin that is not JSON is code 6", func(t *testing.T) {
		wantError(t, run(t, pluginBin, cniEnv("ADD", nil), []byte(`{"cniVersion":`)), 6)
	})
	t.Run("an unsupported cniVersion is code 1", func(t *testing.T) {
		wantError(t, run(t, pluginBin, cniEnv("ADD", nil), conf("9.9.9", dualStackIPAM)), 1, "incompatible CNI versions")
	})
	t.Run("a missing network name is code 7", func(t *testing.T) {
		wantError(t, run(t, pluginBin, cniEnv("ADD", nil), []byte(`{"cniVersion":"1.1.0","ipam":`+dualStackIPAM+`}`)), 7, "missing network name")
	})
}

// TestBinaryAbout: run by hand without CNI_COMMAND, the binary says what it
// is on stderr and exits 0: its CNI versions and, for a release build, the
// version and commit the release stamped (as `ipledger version` shows).
func TestBinaryAbout(t *testing.T) {
	p := run(t, pluginBin, nil, nil)
	if p.exit != 0 || !strings.Contains(string(p.stderr), "galactic-ipam") || !strings.Contains(string(p.stderr), "1.1.0") {
		t.Fatalf("exit %d stderr %q", p.exit, p.stderr)
	}
	stamped := filepath.Join(binDir, "galactic-ipam-stamped")
	const pkg = "github.com/ipledger/ipledger/buildinfo"
	cmd := exec.Command(goTool(), "build", "-trimpath", "-o", stamped,
		"-ldflags", "-X "+pkg+".version=v9.8.7-test -X "+pkg+".commit=0123456789abcdef0123", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building a stamped plugin: %v\n%s", err, out)
	}
	p = run(t, stamped, nil, nil)
	if p.exit != 0 || !strings.Contains(string(p.stderr), "galactic-ipam v9.8.7-test (commit 0123456789ab)") {
		t.Fatalf("a release build's stderr %q does not name its stamped version and commit", p.stderr)
	}
}
