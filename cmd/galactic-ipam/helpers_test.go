package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// ReferencePluginsModule is the module and version of the reference CNI
// plugins (bridge, static) the e2e test and the benchmark run next to
// galactic-ipam. They are built with `go install module/path@version`
// outside this module, so they never enter go.mod.
const ReferencePluginsModule = "github.com/containernetworking/plugins"

// ReferencePluginsVersion pins the reference plugins.
const ReferencePluginsVersion = "v1.10.0"

var (
	// binDir is a temporary directory holding the plugin binaries for the
	// whole test run; TestMain removes it.
	binDir string
	// pluginBin is galactic-ipam built from this directory.
	pluginBin string
)

func TestMain(m *testing.M) {
	code, err := testMain(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func testMain(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "galactic-ipam-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	binDir = dir
	pluginBin = filepath.Join(dir, "galactic-ipam")
	// The build cache makes this cheap after the first run.
	// CGO_ENABLED=0: a static binary, as CNI plugins are shipped and as the
	// reference plugins are built below, so that benchmarks compare alike.
	cmd := exec.Command(goTool(), "build", "-o", pluginBin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("building galactic-ipam: %v\n%s", err, out)
	}
	return m.Run(), nil
}

// goTool returns the go command of the toolchain running the tests.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(build.Default.GOROOT, "bin", "go")
}

var (
	referenceOnce sync.Once
	referenceErr  error
)

// referencePlugins builds the reference bridge and static plugins into
// binDir (once per test run) with `go install pkg@version`, run from a
// directory outside this module so that go.mod is neither read nor changed.
// The module proxy (or the module cache) provides the source.
func referencePlugins() error {
	referenceOnce.Do(func() {
		work, err := os.MkdirTemp("", "galactic-ipam-ref-")
		if err != nil {
			referenceErr = err
			return
		}
		defer os.RemoveAll(work)
		cmd := exec.Command(goTool(), "install",
			ReferencePluginsModule+"/plugins/main/bridge@"+ReferencePluginsVersion,
			ReferencePluginsModule+"/plugins/ipam/static@"+ReferencePluginsVersion)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GOBIN="+binDir, "GOFLAGS=-buildvcs=false", "GOWORK=off", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			referenceErr = fmt.Errorf("go install %s@%s: %v\n%s", ReferencePluginsModule, ReferencePluginsVersion, err, out)
		}
	})
	return referenceErr
}

// proc is the outcome of one plugin execution.
type proc struct {
	stdout, stderr []byte
	exit           int
}

// cniEnv is the environment a runtime passes for command (nil values are
// left out), and nothing else: no variable of the test process leaks in.
func cniEnv(command string, overrides map[string]string) []string {
	vars := map[string]string{
		"CNI_COMMAND":     command,
		"CNI_CONTAINERID": "ctr-0123456789",
		"CNI_NETNS":       "/var/run/netns/galactic-ipam-test-absent",
		"CNI_IFNAME":      "eth0",
		"CNI_PATH":        binDir,
	}
	for k, v := range overrides {
		vars[k] = v
	}
	var env []string
	for k, v := range vars {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// run executes a plugin binary the way a runtime does: environment, config
// on stdin, stdout and exit code.
func run(tb testing.TB, bin string, env []string, stdin []byte) proc {
	tb.Helper()
	cmd := exec.Command(bin)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	p := proc{stdout: stdout.Bytes(), stderr: stderr.Bytes()}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		p.exit = exitErr.ExitCode()
	case err != nil:
		tb.Fatalf("running %s: %v", bin, err)
	}
	return p
}

// cniErr is the error JSON a plugin prints on stdout.
type cniErr struct {
	Code    uint   `json:"code"`
	Msg     string `json:"msg"`
	Details string `json:"details"`
}

// wantError asserts a failed execution: exit 1 and a CNI error object with
// code on stdout whose msg contains every fragment.
func wantError(t *testing.T, p proc, code uint, fragments ...string) {
	t.Helper()
	if p.exit != 1 {
		t.Fatalf("exit %d, want 1; stdout %s stderr %s", p.exit, p.stdout, p.stderr)
	}
	var e cniErr
	if err := json.Unmarshal(p.stdout, &e); err != nil {
		t.Fatalf("stdout is not an error object: %v\n%s", err, p.stdout)
	}
	if e.Code != code {
		t.Fatalf("code %d, want %d: %s", e.Code, code, p.stdout)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Msg, f) {
			t.Errorf("msg %q does not contain %q", e.Msg, f)
		}
	}
}

// wantSilentSuccess asserts exit 0 with nothing on stdout.
func wantSilentSuccess(t *testing.T, p proc) {
	t.Helper()
	if p.exit != 0 || len(bytes.TrimSpace(p.stdout)) != 0 {
		t.Fatalf("exit %d stdout %q stderr %q, want exit 0 and no output", p.exit, p.stdout, p.stderr)
	}
}

// conf builds a network configuration at cniVersion v around a raw ipam
// object.
func conf(v, ipam string) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":%q,"name":"galactic-test","type":"bridge","ipam":%s}`, v, ipam))
}
