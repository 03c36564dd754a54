package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	pluginOnce sync.Once
	pluginDir  string
	pluginErr  error
)

// PluginDir builds the CNI plugin ./cmd/galactic-ipam of the repository
// once per test binary, static as CNI plugins are installed (docs/cni.md,
// "Install"), and returns the directory holding it: a CNI_PATH.
func PluginDir(t testing.TB) string {
	t.Helper()
	pluginOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ipledger-k8s-cni-")
		tempDirs = append(tempDirs, dir)
		if err != nil {
			pluginErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "galactic-ipam"), "./cmd/galactic-ipam")
		cmd.Dir = RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			pluginErr = fmt.Errorf("go build ./cmd/galactic-ipam: %v\n%s", err, out)
			return
		}
		pluginDir = dir
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	return pluginDir
}

// IPAMResult is what an IPAM plugin's ADD answers (CNI 1.x): the
// addresses with their gateways.
type IPAMResult struct {
	CNIVersion string `json:"cniVersion"`
	IPs        []struct {
		Address string `json:"address"`
		Gateway string `json:"gateway"`
	} `json:"ips"`
}

// CNIAdd runs galactic-ipam's ADD as a runtime's main plugin delegates to
// its IPAM plugin: the CNI_* environment variables and the whole network
// configuration on stdin. It returns the parsed result, or fails t with
// the plugin's error object.
func CNIAdd(t testing.TB, config string) IPAMResult {
	t.Helper()
	dir := PluginDir(t)
	cmd := exec.Command(filepath.Join(dir, "galactic-ipam"))
	cmd.Env = append(os.Environ(),
		"CNI_COMMAND=ADD", "CNI_CONTAINERID=k8s-e2e-"+randHex(6),
		// ADD only parses and answers: the namespace is not entered.
		"CNI_NETNS=/var/run/netns/ipledger-k8s-test-absent",
		"CNI_IFNAME=net1", "CNI_PATH="+dir)
	cmd.Stdin = bytes.NewReader([]byte(config))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("galactic-ipam ADD: %v\nstdout: %s\nstderr: %s\nconfig: %s", err, stdout.Bytes(), stderr.Bytes(), config)
	}
	var r IPAMResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("galactic-ipam ADD answered %s: %v", stdout.Bytes(), err)
	}
	return r
}
