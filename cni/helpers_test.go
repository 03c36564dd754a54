package cni

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// allVersions is every CNI spec version the plugin serves.
var allVersions = version.All.SupportedVersions()

// netConf builds a network configuration at cniVersion v around the given
// ipam object (raw JSON).
func netConf(v, ipam string) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":%q,"name":"test-net","type":"bridge","ipam":%s}`, v, ipam))
}

// addressesIPAM renders an ipam object with the given raw entries.
func addressesIPAM(entries ...string) string {
	return `{"type":"galactic-ipam","addresses":[` + strings.Join(entries, ",") + `]}`
}

func entry(addr, gw string) string {
	if gw == "" {
		return fmt.Sprintf(`{"address":%q}`, addr)
	}
	return fmt.Sprintf(`{"address":%q,"gateway":%q}`, addr, gw)
}

func cmdArgs(stdin []byte) *skel.CmdArgs {
	return &skel.CmdArgs{ContainerID: "ctr-1", Netns: "/var/run/netns/ctr-1", IfName: "eth0", Path: "/opt/cni/bin", StdinData: stdin}
}

// runAdd runs ADD in process and returns its stdout.
func runAdd(t *testing.T, stdin []byte) ([]byte, error) {
	t.Helper()
	var out bytes.Buffer
	err := add(cmdArgs(stdin), &out)
	return out.Bytes(), err
}

// cniError asserts that err is a *types.Error (never a plain Go error that
// skel would turn into code 999) and returns it.
func cniError(t *testing.T, err error) *types.Error {
	t.Helper()
	if err == nil {
		t.Fatal("expected an error, got success")
	}
	var e *types.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *types.Error: skel would report it as code 999", err, err)
	}
	return e
}

// wantCode asserts err is a *types.Error with the given code and a message
// containing every fragment.
func wantCode(t *testing.T, err error, code uint, fragments ...string) {
	t.Helper()
	e := cniError(t, err)
	if e.Code != code {
		t.Fatalf("code = %d, want %d (msg %q)", e.Code, code, e.Msg)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Msg, f) {
			t.Errorf("message %q does not contain %q", e.Msg, f)
		}
	}
}

// gotIP is one address of a result as printed, whatever the version.
type gotIP struct {
	Address string
	Gateway string
	Version string // "4"/"6" for 0.3.x/0.4.0, "" otherwise
}

// printed is a result as printed on stdout, decoded by version family.
type printed struct {
	CNIVersion string
	IPs        []gotIP  // for 0.1.0/0.2.0: ip4 first, then ip6
	Routes     []string // "dst" or "dst via gw"
}

// decodePrinted decodes a result printed for cniVersion v, asserting the
// shape that version prescribes (and that the CNI library itself can read it
// back at that version).
func decodePrinted(t *testing.T, v string, out []byte) printed {
	t.Helper()
	if _, err := version.NewResult(v, out); err != nil {
		t.Fatalf("the CNI library cannot read the result back at %s: %v\n%s", v, err, out)
	}
	var p printed
	type route struct {
		Dst string `json:"dst"`
		GW  string `json:"gw"`
	}
	addRoutes := func(rs []route) {
		for _, r := range rs {
			s := r.Dst
			if r.GW != "" {
				s += " via " + r.GW
			}
			p.Routes = append(p.Routes, s)
		}
	}
	switch v {
	case "0.1.0", "0.2.0":
		type ipc struct {
			IP      string  `json:"ip"`
			Gateway string  `json:"gateway"`
			Routes  []route `json:"routes"`
		}
		var r struct {
			CNIVersion string `json:"cniVersion"`
			IP4        *ipc   `json:"ip4"`
			IP6        *ipc   `json:"ip6"`
			IPs        any    `json:"ips"`
		}
		mustUnmarshal(t, out, &r)
		if r.IPs != nil {
			t.Fatalf("a %s result has no ips list:\n%s", v, out)
		}
		p.CNIVersion = r.CNIVersion
		for _, c := range []*ipc{r.IP4, r.IP6} {
			if c != nil {
				p.IPs = append(p.IPs, gotIP{Address: c.IP, Gateway: c.Gateway})
				addRoutes(c.Routes)
			}
		}
	default:
		var r struct {
			CNIVersion string `json:"cniVersion"`
			IPs        []struct {
				Version   *string `json:"version"`
				Address   string  `json:"address"`
				Gateway   string  `json:"gateway"`
				Interface *int    `json:"interface"`
			} `json:"ips"`
			Routes     []route `json:"routes"`
			Interfaces any     `json:"interfaces"`
		}
		mustUnmarshal(t, out, &r)
		p.CNIVersion = r.CNIVersion
		if r.Interfaces != nil {
			t.Errorf("a delegated IPAM result carries no interfaces:\n%s", out)
		}
		pre1 := strings.HasPrefix(v, "0.")
		for _, ip := range r.IPs {
			g := gotIP{Address: ip.Address, Gateway: ip.Gateway}
			if ip.Interface != nil {
				t.Errorf("a delegated IPAM result carries no interface index:\n%s", out)
			}
			switch {
			case pre1 && ip.Version == nil:
				t.Errorf("%s ips entries carry a version:\n%s", v, out)
			case !pre1 && ip.Version != nil:
				t.Errorf("%s ips entries carry no version:\n%s", v, out)
			case pre1:
				g.Version = *ip.Version
			}
			p.IPs = append(p.IPs, g)
		}
		addRoutes(r.Routes)
	}
	if p.CNIVersion != v {
		t.Errorf("result cniVersion = %q, want %q", p.CNIVersion, v)
	}
	return p
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("cannot decode %s: %v", data, err)
	}
}

// legacyResultVersion reports whether v is a pre-0.3.0 version whose result
// has a single ip4 and a single ip6 slot.
func legacyResultVersion(v string) bool { return v == "0.1.0" || v == "0.2.0" }
