package testenv

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Databases are the two databases ipledger runs on; tests run on each.
var Databases = []string{"sqlite", "postgres"}

// Ledger is a real `ipledger serve` built from the repository.
type Ledger struct {
	URL         string
	Database    string // the database URL
	AdminToken  string
	OperatorTok string // an operator-role token, as the manager holds

	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	stderr bytes.Buffer
}

var (
	buildOnce sync.Once
	ledgerBin string
	buildErr  error
)

// LedgerBinary builds ./cmd/ipledger of the repository once per test
// binary.
func LedgerBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ipledger-k8s-test-")
		tempDirs = append(tempDirs, dir)
		if err != nil {
			buildErr = err
			return
		}
		ledgerBin = filepath.Join(dir, "ipledger")
		cmd := exec.Command("go", "build", "-o", ledgerBin, "./cmd/ipledger")
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/ipledger: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return ledgerBin
}

var listeningRE = regexp.MustCompile(`"msg":"ipledger listening","addr":"([^"]+)"`)

// postgresBase is the test PostgreSQL (trust auth, database test).
func postgresBase() string {
	if u := os.Getenv("IPLEDGER_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// databaseURL returns a fresh database of kind db ("sqlite" or
// "postgres") for t: a file in t.TempDir(), or a schema of its own that
// is dropped when t ends.
func databaseURL(t testing.TB, db string) string {
	t.Helper()
	if db == "sqlite" {
		return "sqlite:" + filepath.Join(t.TempDir(), "ipledger.db")
	}
	if _, err := exec.LookPath("psql"); err != nil {
		absent(t, "psql is not installed: skipping the PostgreSQL half")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "k8s_" + hex.EncodeToString(b[:])
	if out, err := exec.Command("psql", postgresBase(), "-qc", "CREATE SCHEMA "+schema).CombinedOutput(); err != nil {
		absent(t, "PostgreSQL unreachable at %s (%v: %s): skipping the PostgreSQL half", postgresBase(), err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { _ = exec.Command("psql", postgresBase(), "-qc", "DROP SCHEMA "+schema+" CASCADE").Run() })
	u, _ := url.Parse(postgresBase())
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// StartLedger starts `ipledger serve` on a fresh database of kind db,
// stopped when t ends, with an operator token for the manager.
func StartLedger(t testing.TB, db string) *Ledger {
	t.Helper()
	bin := LedgerBinary(t)
	l := &Ledger{Database: databaseURL(t, db), AdminToken: "k8s-test-admin-" + randHex(8)}
	l.start(t, bin)
	out, err := exec.Command(bin, "token", "create", "--name", "ipledger-k8s", "--role", "operator", "--database", l.Database).Output()
	if err != nil {
		t.Fatalf("ipledger token create: %v\n%s", err, l.Log())
	}
	l.OperatorTok = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	return l
}

// StartAnother starts one more `ipledger serve` on l's database (two
// servers behind one address, as a Service spreads them), stopped when t
// ends. It shares l's tokens.
func (l *Ledger) StartAnother(t testing.TB) *Ledger {
	t.Helper()
	o := &Ledger{Database: l.Database, AdminToken: l.AdminToken, OperatorTok: l.OperatorTok}
	o.start(t, LedgerBinary(t))
	return o
}

// Stop stops the server (SIGTERM) and waits for it.
func (l *Ledger) Stop(t testing.TB) {
	t.Helper()
	_ = l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.exited:
	case <-time.After(time.Minute):
		t.Fatalf("ipledger ignored SIGTERM for a minute")
	}
}

// Restart starts the server again on the same address and database.
func (l *Ledger) Restart(t testing.TB) {
	t.Helper()
	l.start(t, LedgerBinary(t))
}

func (l *Ledger) start(t testing.TB, bin string) {
	t.Helper()
	listen := "127.0.0.1:0"
	if l.URL != "" {
		listen = strings.TrimPrefix(l.URL, "http://")
	}
	cmd := exec.Command(bin, "serve", "--listen", listen, "--database", l.Database)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "IPLEDGER_ADMIN_TOKEN="+l.AdminToken, "IPLEDGER_DB_MAX_CONNS=8")
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l.cmd = cmd
	exited := make(chan struct{})
	l.exited = exited
	addr := make(chan string, 1)
	go func() {
		defer close(exited)
		defer func() { _ = cmd.Wait() }()
		sc := bufio.NewScanner(errPipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			l.mu.Lock()
			l.stderr.WriteString(line + "\n")
			l.mu.Unlock()
			if m := listeningRE.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("ipledger ignored SIGTERM for 30 s")
		}
	})
	select {
	case a := <-addr:
		l.URL = "http://" + a
	case <-exited:
		t.Fatalf("ipledger serve exited at start:\n%s", l.Log())
	case <-time.After(2 * time.Minute):
		t.Fatalf("ipledger serve did not come up in 2 minutes:\n%s", l.Log())
	}
}

// Log is what the server wrote so far.
func (l *Ledger) Log() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stderr.String()
}

// Call sends one API request as the admin and returns the status and
// body.
func (l *Ledger) Call(t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	return l.CallAs(t, l.AdminToken, method, path, body)
}

// CallAs sends one API request with token.
func (l *Ledger) CallAs(t testing.TB, token, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, l.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// MustCall is Call that fails t on a status other than want.
func (l *Ledger) MustCall(t testing.TB, want int, method, path string, body, out any) {
	t.Helper()
	code, b := l.Call(t, method, path, body)
	if code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
}

// CreatePool creates an address pool of one automatic range.
func (l *Ledger) CreatePool(t testing.TB, name, typ, first, last, gateway string) {
	t.Helper()
	body := map[string]any{"name": name, "type": typ, "ranges": []map[string]any{{"first": first, "last": last, "auto_assign": true}}}
	if gateway != "" {
		body["gateway"] = gateway
	}
	l.MustCall(t, http.StatusCreated, http.MethodPost, "/api/v1/pools", body, nil)
}

// Allocation is an allocation as ipledger lists it.
type Allocation struct {
	Value     string `json:"value"`
	OwnerType string `json:"owner_type"`
	OwnerID   string `json:"owner_id"`
	State     string `json:"state"`
}

// Allocations lists every allocation of pool, following the cursor.
func (l *Ledger) Allocations(t testing.TB, pool string) []Allocation {
	t.Helper()
	var all []Allocation
	cursor := ""
	for {
		var page struct {
			Items      []Allocation `json:"items"`
			NextCursor string       `json:"next_cursor"`
		}
		l.MustCall(t, http.StatusOK, http.MethodGet, "/api/v1/pools/"+url.PathEscape(pool)+"/allocations?limit=1000&cursor="+url.QueryEscape(cursor), nil, &page)
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}

// AuditEvent is an audit log entry as ipledger lists it.
type AuditEvent struct {
	Action   string `json:"action"`
	Actor    string `json:"actor"`
	ObjectID string `json:"object_id"`
	Pool     string `json:"pool"`
	Value    string `json:"value"`
}

// Audit lists the audit log's events of action (newest first), every page.
func (l *Ledger) Audit(t testing.TB, action string) []AuditEvent {
	t.Helper()
	var all []AuditEvent
	cursor := ""
	for {
		var page struct {
			Items      []AuditEvent `json:"items"`
			NextCursor string       `json:"next_cursor"`
		}
		l.MustCall(t, http.StatusOK, http.MethodGet, "/api/v1/events?limit=1000&action="+url.QueryEscape(action)+"&cursor="+url.QueryEscape(cursor), nil, &page)
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
