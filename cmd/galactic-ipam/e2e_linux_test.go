//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"golang.org/x/sys/unix"
)

// The end-to-end test needs root and network namespaces. Without them it
// skips, saying why, except under CI=true, where a skip would hide a broken
// environment and it fails instead.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true, so this cannot be skipped: %s", msg)
	}
	t.Skipf("skipping the netns end-to-end test: %s", msg)
}

// requireNetns checks, rather than guesses, that namespaces can be made.
func requireNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "creating network namespaces needs root (uid %d)", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		skipOrFail(t, "iproute2's ip command is not installed: %v", err)
	}
	probe := fmt.Sprintf("gipam-probe-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		skipOrFail(t, "`ip netns add` does not work here: %v: %s", err, out)
	}
	_ = exec.Command("ip", "netns", "del", probe).Run()
}

// netnsSeq keeps namespace names unique within one test process.
var netnsSeq atomic.Int64

// newNetns creates a named network namespace, deleted when the test ends,
// and returns its name and path.
func newNetns(t *testing.T, prefix string) (name, path string) {
	t.Helper()
	name = fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), netnsSeq.Add(1))
	_ = exec.Command("ip", "netns", "del", name).Run() // a leftover of a killed run
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	for _, dir := range []string{"/run/netns", "/var/run/netns"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return name, filepath.Join(dir, name)
		}
	}
	t.Fatalf("netns %s has no path under /run/netns", name)
	return "", ""
}

// inNetns runs fn on an OS thread moved into the network namespace at path,
// so that the plugins fn executes run there (their "host" side). The thread
// is never unlocked: it exits with its goroutine and never serves other Go
// code. The test process itself stays in its own namespace.
func inNetns(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", path, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// globalAddrs lists "address/prefixlen" of every global-scope address of dev
// in netns, as `ip addr` reports them.
func globalAddrs(t *testing.T, netns, dev string) []string {
	t.Helper()
	out, err := exec.Command("ip", "-n", netns, "-j", "addr", "show", "dev", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s addr show dev %s: %v: %s", netns, dev, err, out)
	}
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
			Scope     string `json:"scope"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		t.Fatalf("ip -j addr: %v: %s", err, out)
	}
	var addrs []string
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if a.Scope == "global" {
				addrs = append(addrs, fmt.Sprintf("%s/%d", a.Local, a.PrefixLen))
			}
		}
	}
	slices.Sort(addrs)
	return addrs
}

// defaultRoutes lists the default routes of netns for one family ("-4" or
// "-6") as "default via GW dev DEV" or "default dev DEV".
func defaultRoutes(t *testing.T, netns, family string) []string {
	t.Helper()
	out, err := exec.Command("ip", "-n", netns, family, "-j", "route", "show", "default").CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s %s route: %v: %s", netns, family, err, out)
	}
	var routes []struct {
		Gateway string `json:"gateway"`
		Dev     string `json:"dev"`
	}
	if err := json.Unmarshal(out, &routes); err != nil {
		t.Fatalf("ip -j route: %v: %s", err, out)
	}
	var rs []string
	for _, r := range routes {
		if r.Gateway != "" {
			rs = append(rs, "default via "+r.Gateway+" dev "+r.Dev)
		} else {
			rs = append(rs, "default dev "+r.Dev)
		}
	}
	return rs
}

// e2eAddresses are the pre-decided addresses the end-to-end test applies:
// an IPv6 /96 with host bits and a link-local gateway outside the prefix,
// an IPv4 /32 without gateway, and an IPv4 /24 with host bits and an
// on-link gateway. (A bridge attachment can only route an IPv4 default via
// an on-link gateway; a /32 has none, so it carries no gateway here.)
const e2eAddresses = `[` +
	`{"address":"fd00:10:ff01:0:1::1/96","gateway":"fe80::1"},` +
	`{"address":"172.20.1.7/32"},` +
	`{"address":"10.1.2.3/24","gateway":"10.1.2.1"}]`

var e2eWantAddrs = []string{"10.1.2.3/24", "172.20.1.7/32", "fd00:10:ff01:0:1::1/96"}

// TestE2EBridgeNetns runs the reference bridge plugin with galactic-ipam as
// its IPAM through libcni, as a container runtime does, in throwaway
// network namespaces (one standing in for the host, one for the
// container), and checks with `ip addr` inside the container namespace that
// the /96, the /32 and the /24 are configured exactly, with default routes
// via the configured gateways. CHECK (against the real bridge result) and
// STATUS reach the plugin; DEL removes the interface. The reference static
// IPAM plugin is run the same way on the same addresses as a sanity
// comparison.
func TestE2EBridgeNetns(t *testing.T) {
	requireNetns(t)
	if err := referencePlugins(); err != nil {
		skipOrFail(t, "the reference plugins could not be built: %v", err)
	}
	_, hostPath := newNetns(t, "gipam-host")
	cni := libcni.NewCNIConfigWithCacheDir([]string{binDir}, t.TempDir(), nil)

	// attachment is one container attached to the bridge network.
	type attachment struct {
		ctr    string
		list   *libcni.NetworkConfigList
		rt     *libcni.RuntimeConf
		result []byte // the ADD result of the whole chain, as JSON
		conf   []byte // bridge's plugin configuration
	}
	newAttachment := func(t *testing.T, cniVersion, ipamType, addresses, extraIPAM string) attachment {
		ctrName, ctrPath := newNetns(t, "gipam-ctr")
		conf := fmt.Sprintf(`{"type":"bridge","bridge":"gipam-br0","ipam":{"type":%q,"addresses":%s%s}}`, ipamType, addresses, extraIPAM)
		list, err := libcni.NetworkConfFromBytes([]byte(fmt.Sprintf(
			`{"cniVersion":%q,"name":"gipam-e2e","plugins":[%s]}`, cniVersion, conf)))
		if err != nil {
			t.Fatal(err)
		}
		return attachment{ctr: ctrName, list: list, conf: []byte(conf),
			rt: &libcni.RuntimeConf{ContainerID: "gipam-e2e-" + ctrName, NetNS: ctrPath, IfName: "eth0"}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	add := func(t *testing.T, a *attachment) {
		t.Helper()
		if err := inNetns(hostPath, func() error {
			res, err := cni.AddNetworkList(ctx, a.list, a.rt)
			if err == nil {
				a.result, err = json.Marshal(res)
			}
			return err
		}); err != nil {
			t.Fatalf("ADD through bridge: %v", err)
		}
		t.Cleanup(func() { _ = inNetns(hostPath, func() error { return cni.DelNetworkList(ctx, a.list, a.rt) }) })
	}
	del := func(t *testing.T, a attachment) {
		t.Helper()
		if err := inNetns(hostPath, func() error { return cni.DelNetworkList(ctx, a.list, a.rt) }); err != nil {
			t.Fatalf("DEL: %v", err)
		}
		if out, err := exec.Command("ip", "-n", a.ctr, "link", "show", "eth0").CombinedOutput(); err == nil {
			t.Errorf("eth0 still exists after DEL: %s", out)
		}
		// DEL of a deleted attachment must succeed too.
		if err := inNetns(hostPath, func() error { return cni.DelNetworkList(ctx, a.list, a.rt) }); err != nil {
			t.Errorf("second DEL: %v", err)
		}
	}
	type applied struct{ addrs, routes4, routes6 []string }
	inspect := func(t *testing.T, a attachment) applied {
		return applied{globalAddrs(t, a.ctr, "eth0"), defaultRoutes(t, a.ctr, "-4"), defaultRoutes(t, a.ctr, "-6")}
	}

	var galactic applied
	for _, v := range []string{"1.1.0", "0.4.0"} {
		t.Run("galactic-ipam/"+v, func(t *testing.T) {
			a := newAttachment(t, v, "galactic-ipam", e2eAddresses, "")
			add(t, &a)
			got := inspect(t, a)
			if !slices.Equal(got.addrs, e2eWantAddrs) {
				t.Errorf("ip addr in the container: %q, want exactly %q", got.addrs, e2eWantAddrs)
			}
			if want := []string{"default via 10.1.2.1 dev eth0"}; !slices.Equal(got.routes4, want) {
				t.Errorf("IPv4 default routes %q, want %q", got.routes4, want)
			}
			if want := []string{"default via fe80::1 dev eth0"}; !slices.Equal(got.routes6, want) {
				t.Errorf("IPv6 default routes %q, want %q", got.routes6, want)
			}

			// CHECK as bridge delegates it: bridge's own configuration with
			// the chain's real ADD result as prevResult.
			checkConf := func(prev []byte) []byte {
				var m map[string]json.RawMessage
				if err := json.Unmarshal(a.conf, &m); err != nil {
					t.Fatal(err)
				}
				m["cniVersion"], _ = json.Marshal(v)
				m["name"], _ = json.Marshal("gipam-e2e")
				m["prevResult"] = prev
				b, _ := json.Marshal(m)
				return b
			}
			env := cniEnv("CHECK", map[string]string{"CNI_CONTAINERID": a.rt.ContainerID, "CNI_NETNS": a.rt.NetNS})
			wantSilentSuccess(t, run(t, pluginBin, env, checkConf(a.result)))
			changed := []byte(strings.Replace(string(a.result), "fd00:10:ff01:0:1::1/96", "fd00:10:ff01:0:1::1/64", 1))
			wantError(t, run(t, pluginBin, env, checkConf(changed)), 100, "ipam.addresses[0] fd00:10:ff01:0:1::1/96: prevResult carries fd00:10:ff01:0:1::1/64")

			if v == "1.1.0" {
				if err := inNetns(hostPath, func() error { return cni.GetStatusNetworkList(ctx, a.list) }); err != nil {
					t.Errorf("STATUS through bridge: %v", err)
				}
			}
			del(t, a)
			galactic = got
		})
	}

	// bridge's own CHECK looks for a prefix route of every address, which
	// the kernel does not create for an IPv4 /32, so CHECK through bridge
	// is run on the /96 and the /24 only.
	t.Run("CHECK through bridge reaches galactic-ipam", func(t *testing.T) {
		a := newAttachment(t, "1.1.0", "galactic-ipam",
			`[{"address":"fd00:10:ff01:0:1::1/96","gateway":"fe80::1"},{"address":"10.1.2.3/24","gateway":"10.1.2.1"}]`, "")
		add(t, &a)
		if err := inNetns(hostPath, func() error { return cni.CheckNetworkList(ctx, a.list, a.rt) }); err != nil {
			t.Errorf("CHECK through bridge: %v", err)
		}
		del(t, a)
	})

	t.Run("static reference IPAM applies the same", func(t *testing.T) {
		if galactic.addrs == nil {
			t.Skip("the galactic-ipam attachment failed")
		}
		a := newAttachment(t, "1.1.0", "static", e2eAddresses, `,"routes":[{"dst":"0.0.0.0/0"},{"dst":"::/0"}]`)
		add(t, &a)
		got := inspect(t, a)
		if !reflect.DeepEqual(got, galactic) {
			t.Errorf("static applied %+v, galactic-ipam applied %+v", got, galactic)
		}
		del(t, a)
	})
}
