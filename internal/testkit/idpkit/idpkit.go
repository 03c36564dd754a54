// Package idpkit runs real identity software for the identity tests: Dex
// (an OpenID Connect provider) and oauth2-proxy, built by
// scripts/idp/build.sh, on loopback with free ports and temporary
// directories, configured by the example files of docs/identity.md
// (docs/examples/identity), so what the docs show is what the tests run.
// Without the binaries a test skips, saying how to build them; under
// CI=true it builds them (the script caches them) or fails.
package idpkit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Root is the repository's root: the nearest directory above the working
// directory that holds scripts/idp/build.sh.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "idp", "build.sh")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no scripts/idp/build.sh above the working directory")
		}
		dir = parent
	}
}

// Binaries are the paths of the built identity software.
type Binaries struct {
	Dex, OAuth2Proxy string
}

var (
	binOnce sync.Once
	bins    Binaries
	binErr  error
	binOut  string
)

// Build returns the binaries scripts/idp/build.sh built. Under CI=true it
// runs the script (building what its cache lacks, minutes the first time
// and a second after) and fails the test if that fails; elsewhere it only
// asks the script for cached binaries and skips the test without them.
// With -short it skips.
func Build(t testing.TB) Binaries {
	t.Helper()
	if testing.Short() {
		// The race run of CI uses -short: these tests run built binaries,
		// which the race detector does not watch, and ran without it.
		t.Skip("runs the built binaries of ipledger, Dex and oauth2-proxy; skipped with -short")
	}
	ci := os.Getenv("CI") == "true"
	binOnce.Do(func() {
		args := []string{filepath.Join(Root(t), "scripts", "idp", "build.sh")}
		if !ci {
			args = append(args, "--check")
		}
		var out, errb bytes.Buffer
		cmd := exec.Command("bash", args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		binErr = cmd.Run()
		binOut = errb.String()
		for _, line := range strings.Split(out.String(), "\n") {
			name, path, ok := strings.Cut(line, "=")
			switch {
			case !ok:
			case name == "dex":
				bins.Dex = path
			case name == "oauth2-proxy":
				bins.OAuth2Proxy = path
			}
		}
		if binErr == nil && (bins.Dex == "" || bins.OAuth2Proxy == "") {
			binErr = fmt.Errorf("the script named no binary: %q", out.String())
		}
	})
	if binErr != nil {
		if ci {
			t.Fatalf("scripts/idp/build.sh: %v\n%s", binErr, binOut)
		}
		t.Skipf("skipping the test against real Dex and oauth2-proxy: %s (or set CI=true: the test then builds them, minutes the first time)",
			strings.ReplaceAll(strings.TrimSpace(binOut), "\n", "; "))
	}
	return bins
}

// FreePort is a TCP port of 127.0.0.1 that nothing listened on a moment
// ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// Example reads docs/examples/identity/name and replaces each key of
// addrs (an address of the example) with its value (the test's own). An
// address the file does not hold fails the test: the example and the
// test must not drift apart.
func Example(t testing.TB, name string, addrs map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(t), "docs", "examples", "identity", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for from, to := range addrs {
		if !strings.Contains(s, from) {
			t.Fatalf("docs/examples/identity/%s no longer holds %q, which the test replaces", name, from)
		}
		s = strings.ReplaceAll(s, from, to)
	}
	return s
}

// Env parses an environment file (KEY=VALUE lines, # comments), as
// systemd's EnvironmentFile reads the examples.
func Env(t testing.TB, text string) []string {
	t.Helper()
	var env []string
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, _, ok := strings.Cut(line, "="); !ok || k == "" {
			t.Fatalf("line %d of an environment file is not KEY=VALUE: %q", i+1, line)
		}
		env = append(env, line)
	}
	return env
}

// Process is a program a test started; it is stopped when the test ends.
type Process struct {
	Name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

// Start runs bin with args in dir, its output kept for Log, until the test
// ends (SIGTERM, then SIGKILL after 10 s).
func Start(t testing.TB, name, dir, bin string, env []string, args ...string) *Process {
	t.Helper()
	p := &Process{Name: name, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	go func() {
		_ = p.cmd.Wait()
		_ = pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, p.Log())
		}
	})
	return p
}

// Stop ends the process (SIGTERM, SIGKILL after 10 s) and waits for it.
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Log is what the process wrote so far.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// WaitHTTP waits (up to a minute: a loaded machine starts programs
// slowly) until GET url answers 200, failing the test with the process's
// output if it exits or never does.
func (p *Process) WaitHTTP(t testing.TB, url string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	for end := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if res, err := c.Get(url); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before %s answered:\n%s", p.Name, url, p.Log())
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("%s: %s did not answer 200 within a minute:\n%s", p.Name, url, p.Log())
		}
	}
}

// Origin is "http://127.0.0.1:PORT".
func Origin(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }

// Ctx is a context for one exchange with a provider.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
