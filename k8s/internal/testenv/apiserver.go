// Package testenv runs the real parts the k8s module's tests need: a
// kube-apiserver and etcd built by hack/build-apiserver.sh (through
// controller-runtime's envtest) with ipledger's, Cluster API's and the
// NetworkAttachmentDefinition CRDs, a real `ipledger serve` on SQLite or
// PostgreSQL, the galactic-ipam plugin, and the manager. A part that is
// absent skips the test with a message, and fails it under CI=true.
package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ipledger/ipledger/k8s/internal/app"
)

// Env is the API server shared by a test binary's tests.
type Env struct {
	env        *envtest.Environment
	Config     *rest.Config
	Client     client.Client
	KubeConfig []byte
}

var (
	// tempDirs hold the binaries built for this test binary, removed when
	// its tests end.
	tempDirs []string

	shared     *Env
	unusable   string // why there is no API server
	sharedStop func() error
)

// ModuleRoot is the k8s module's directory.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// RepoRoot is the repository's root (the server module).
func RepoRoot() string { return filepath.Join(ModuleRoot(), "..") }

// assets returns the directory holding kube-apiserver and etcd, or why
// there is none.
func assets() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		out, err := exec.Command("bash", filepath.Join(ModuleRoot(), "hack", "build-apiserver.sh"), "--dir").Output()
		if err != nil {
			return "", fmt.Errorf("hack/build-apiserver.sh --dir: %v", err)
		}
		dir = string(bytes.TrimSpace(out))
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%s is not built in %s: run k8s/hack/build-apiserver.sh (it builds kube-apiserver and etcd from the Go module proxy)", b, dir)
		}
	}
	return dir, nil
}

// capiCRDs returns the directory of Cluster API's CRDs in the module
// sigs.k8s.io/cluster-api at the version of the API types
// (sigs.k8s.io/cluster-api/api) that go.mod requires.
func capiCRDs() (string, error) {
	list := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "sigs.k8s.io/cluster-api/api")
	list.Dir = ModuleRoot()
	v, err := list.Output()
	ver := string(bytes.TrimSpace(v))
	if err != nil || ver == "" {
		return "", fmt.Errorf("go list -m sigs.k8s.io/cluster-api/api: %v", err)
	}
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/cluster-api@"+ver)
	cmd.Dir = ModuleRoot()
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &m); jerr != nil || m.Error != "" || err != nil {
		return "", fmt.Errorf("go mod download sigs.k8s.io/cluster-api@%s: %v %s", ver, err, m.Error)
	}
	return filepath.Join(m.Dir, "core", "config", "crd", "bases"), nil
}

// Main starts the shared API server, runs the tests and stops it. Use it
// as TestMain's body: os.Exit(testenv.Main(m)).
func Main(m *testing.M) int {
	// Each manager logs to its test; the global logger is for
	// controller-runtime's own start-up messages.
	ctrllog.SetLogger(logr.Discard())
	if err := start(); err != nil {
		unusable = err.Error()
	}
	code := m.Run()
	for _, d := range tempDirs {
		_ = os.RemoveAll(d)
	}
	if sharedStop != nil {
		if err := sharedStop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the API server:", err)
		}
	}
	return code
}

func start() error {
	dir, err := assets()
	if err != nil {
		return err
	}
	capi, err := capiCRDs()
	if err != nil {
		return err
	}
	scheme, err := app.Scheme()
	if err != nil {
		return err
	}
	crdPaths := []string{filepath.Join(ModuleRoot(), "config", "crd", "bases"), filepath.Join(ModuleRoot(), "config", "crd", "external")}
	for _, f := range []string{"cluster.x-k8s.io_clusters.yaml", "ipam.cluster.x-k8s.io_ipaddressclaims.yaml", "ipam.cluster.x-k8s.io_ipaddresses.yaml"} {
		crdPaths = append(crdPaths, filepath.Join(capi, f))
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		CRDDirectoryPaths:        crdPaths,
		ErrorIfCRDPathMissing:    true,
		Scheme:                   scheme,
		ControlPlaneStartTimeout: 3 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting kube-apiserver and etcd from %s: %w", dir, err)
	}
	// Hundreds of claims at once: the test client must not be the limit.
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return err
	}
	shared = &Env{env: env, Config: cfg, Client: c, KubeConfig: env.KubeConfig}
	sharedStop = env.Stop
	return nil
}

// Require returns the shared API server, or skips t (fails it under
// CI=true) when there is none.
func Require(t testing.TB) *Env {
	t.Helper()
	if shared == nil {
		absent(t, "no API server: %s", unusable)
	}
	return shared
}

// absent skips t, or fails it under CI=true, where every part must be
// present.
func absent(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("required under CI=true: "+format, args...)
	}
	t.Skipf(format, args...)
}

// UserConfig returns a client configuration of a new user name of the API
// server (a client certificate), with no permission until RBAC grants one.
func (e *Env) UserConfig(t testing.TB, name string) *rest.Config {
	t.Helper()
	u, err := e.env.AddUser(envtest.User{Name: name}, e.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := u.Config()
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg
}
