package testenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/ipledger/ipledger/k8s/internal/app"
	"github.com/ipledger/ipledger/k8s/internal/ledger"
)

// Namespace creates a namespace of its own for t.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t-" + randHex(5)}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// logBuffer keeps a manager's log for a failing test.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) write(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s + "\n")
}

func (b *logBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// ManagerOptions are the test's choices for an in-process manager.
type ManagerOptions struct {
	Cluster    string
	Namespaces []string
	// GlobalLabel selects the GlobalLedgerIPPools of this test
	// (label "test" = GlobalLabel).
	GlobalLabel string
	SyncPeriod  time.Duration
	// Rest is the manager's client configuration (default: the admin's).
	Rest *rest.Config
	// LeaderElect elects the manager through a Lease in the first of
	// Namespaces.
	LeaderElect bool
}

// StartManager runs the manager in this process against the shared API
// server and l, watching only o.Namespaces, until t ends. It returns a
// function that stops it and waits until it has stopped.
func (e *Env) StartManager(t testing.TB, l *Ledger, o ManagerOptions) (stop func()) {
	t.Helper()
	logs := &logBuffer{}
	log := funcr.NewJSON(func(obj string) { logs.write(obj) }, funcr.Options{})
	rc := e.Config
	if o.Rest != nil {
		rc = o.Rest
	}
	opts := app.Options{
		Rest:        rc,
		LeaderElect: o.LeaderElect, LeaderElectionNamespace: o.Namespaces[0],
		Ledger:      ledger.Config{URL: l.URL, Token: l.OperatorTok},
		ClusterName: o.Cluster, MetricsAddr: "0", ProbeAddr: "0",
		SyncPeriod: o.SyncPeriod, Namespaces: o.Namespaces, Logger: log,
	}
	if o.GlobalLabel != "" {
		opts.GlobalPoolSelector = labels.SelectorFromSet(labels.Set{"test": o.GlobalLabel})
	}
	mgr, err := app.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("manager: %v", err)
				}
			case <-time.After(time.Minute):
				t.Errorf("manager did not stop in a minute")
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("manager %s log:\n%s", o.Cluster, logs.tail(20000))
		}
	})
	return stop
}

var (
	mgrBuildOnce sync.Once
	mgrBin       string
	mgrBuildErr  error
)

// ManagerBinary builds ./cmd/ipledger-k8s once per test binary.
func ManagerBinary(t testing.TB) string {
	t.Helper()
	mgrBuildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ipledger-k8s-bin-")
		tempDirs = append(tempDirs, dir)
		if err != nil {
			mgrBuildErr = err
			return
		}
		mgrBin = filepath.Join(dir, "ipledger-k8s")
		cmd := exec.Command("go", "build", "-o", mgrBin, "./cmd/ipledger-k8s")
		cmd.Dir = ModuleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			mgrBuildErr = fmt.Errorf("go build ./cmd/ipledger-k8s: %v\n%s", err, out)
		}
	})
	if mgrBuildErr != nil {
		t.Fatal(mgrBuildErr)
	}
	return mgrBin
}

// Proc is a manager binary running.
type Proc struct {
	cmd  *exec.Cmd
	logs *logBuffer
	done chan struct{}
}

// WriteKubeconfig writes the API server's kubeconfig into t's temp dir.
func (e *Env) WriteKubeconfig(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, e.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// StartManagerBinary runs the built manager with args (the token comes
// from IPLEDGER_TOKEN), killed when t ends if still running.
func StartManagerBinary(t testing.TB, l *Ledger, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(ManagerBinary(t), args...)
	cmd.Env = append(os.Environ(), "IPLEDGER_TOKEN="+l.OperatorTok)
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proc{cmd: cmd, logs: &logBuffer{}, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(errPipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.logs.write(sc.Text())
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		p.Kill(t)
		if t.Failed() {
			t.Logf("manager binary log:\n%s", p.logs.tail(20000))
		}
	})
	return p
}

// Kill stops the process with SIGKILL and waits for it.
func (p *Proc) Kill(t testing.TB) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Errorf("manager did not die on SIGKILL in a minute")
	}
}

// Log is what the process wrote so far.
func (p *Proc) Log() string { return p.logs.tail(1 << 20) }

// LogContains tells whether the process's log holds s.
func (p *Proc) LogContains(s string) bool { return strings.Contains(p.Log(), s) }

// Eventually calls cond until it returns nil, failing t with cond's last
// error when the deadline passes. It polls (every 50 ms) rather than
// sleeping a fixed time: the deadline is generous, the wait as short as
// the condition allows.
func Eventually(t testing.TB, deadline time.Duration, cond func() error) {
	t.Helper()
	end := time.Now().Add(deadline)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("not within %s: %v", deadline, err)
		}
		<-tick.C
	}
}
