package main

// Several `ipledger serve` processes on one database: the real binary,
// built into a temporary directory, started as separate processes, driven
// over HTTP. This is what a site with several server replicas does.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
)

const mpAdminToken = "mp-admin-token-0123456789abcdef"

// mpPoolFile is given to every process with --pools: they all load it at
// the same moment on a fresh database.
const mpPoolFile = `
[pools.lo-ip]
type = "ipv4"
ranges = [
  { start = "10.0.0.1", end = "10.0.0.31" },
  { start = "10.0.0.200", end = "10.0.1.0", auto_assign = false },
]
[pools.vni]
type = "integer"
ranges = [{ start = "0xFA000", end = "0xFA400" }]
`

var (
	mpBuildOnce sync.Once
	mpBin       string
	mpBuildErr  error
)

// mpBinary builds ./cmd/ipledger once per test binary run.
func mpBinary(t *testing.T) string {
	t.Helper()
	mpBuildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ipledger-mp-")
		if err != nil {
			mpBuildErr = err
			return
		}
		mpBin = filepath.Join(dir, "ipledger")
		out, err := exec.Command("go", "build", "-o", mpBin, ".").CombinedOutput()
		if err != nil {
			mpBuildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if mpBuildErr != nil {
		t.Fatal(mpBuildErr)
	}
	return mpBin
}

type mpServer struct {
	url    string
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	mu     *sync.Mutex
}

var listeningRE = regexp.MustCompile(`"msg":"ipledger listening","addr":"([^"]+)"`)

// mpStart starts n servers at once on database u, each loading the pool
// file, and waits until each answers /readyz.
func mpStart(t *testing.T, u string, n int) []*mpServer {
	t.Helper()
	bin := mpBinary(t)
	dir := t.TempDir()
	pools := filepath.Join(dir, "pools.toml")
	if err := os.WriteFile(pools, []byte(mpPoolFile), 0o644); err != nil {
		t.Fatal(err)
	}
	servers := make([]*mpServer, n)
	addrs := make(chan [2]any, n)
	for i := range servers {
		cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--database", u, "--pools", pools)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "IPLEDGER_ADMIN_TOKEN="+mpAdminToken, "IPLEDGER_DB_MAX_CONNS=8")
		errPipe, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = io.Discard
		s := &mpServer{cmd: cmd, stderr: &bytes.Buffer{}, mu: &sync.Mutex{}}
		servers[i] = s
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func(i int) {
			sc := bufio.NewScanner(errPipe)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				s.mu.Lock()
				s.stderr.WriteString(line + "\n")
				s.mu.Unlock()
				if m := listeningRE.FindStringSubmatch(line); m != nil {
					addrs <- [2]any{i, m[1]}
				}
			}
		}(i)
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil && !t.Failed() {
					t.Errorf("server %d did not stop cleanly on SIGTERM: %v\n%s", i, err, s.log())
				}
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				t.Errorf("server %d ignored SIGTERM for 15 s", i)
			}
		})
	}
	deadline := time.After(60 * time.Second)
	for got := 0; got < n; got++ {
		select {
		case a := <-addrs:
			servers[a[0].(int)].url = "http://" + a[1].(string)
		case <-deadline:
			for i, s := range servers {
				t.Logf("server %d log:\n%s", i, s.log())
			}
			t.Fatalf("only %d of %d servers came up", got, n)
		}
	}
	for i, s := range servers {
		if code, body := mpCall(t, s, "GET", "/readyz", ""); code != 200 {
			t.Fatalf("server %d not ready: %d %s\n%s", i, code, body, s.log())
		}
	}
	return servers
}

func (s *mpServer) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

var mpClient = &http.Client{Timeout: 60 * time.Second}

func mpCall(t *testing.T, s *mpServer, method, path, body string) (int, []byte) {
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	req.Header.Set("Authorization", "Bearer "+mpAdminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := mpClient.Do(req)
	if err != nil {
		t.Errorf("%s %s%s: %v", method, s.url, path, err)
		return 0, nil
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

type mpResult struct {
	status int
	value  string
	code   string
}

// mpFire sends n allocation requests at once, spread over the servers.
func mpFire(t *testing.T, servers []*mpServer, n int, pool string, owner func(i int) string) []mpResult {
	out := make([]mpResult, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			status, body := mpCall(t, servers[i%len(servers)], "POST", "/api/v1/pools/"+pool+"/allocations",
				`{"owner_type":"machine","owner_id":"`+owner(i)+`"}`)
			var v struct {
				Value string `json:"value"`
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			_ = json.Unmarshal(body, &v)
			out[i] = mpResult{status, v.Value, v.Error.Code}
		}(i)
	}
	close(start)
	wg.Wait()
	return out
}

// mpScenario: 40 clients over the servers on a 30-value auto range get 30
// distinct values and 10 pool_exhausted; 20 clients for one owner all get
// one value (one 201, nineteen 200); the database agrees afterwards.
func mpScenario(t *testing.T, u string, n int) {
	servers := mpStart(t, u, n)
	res := mpFire(t, servers, 40, "lo-ip", func(i int) string { return fmt.Sprint("dpu-", i) })
	seen := map[string]bool{}
	exhausted := 0
	for i, r := range res {
		switch {
		case r.status == 201 && !seen[r.value]:
			seen[r.value] = true
		case r.status == 409 && r.code == "pool_exhausted":
			exhausted++
		default:
			t.Fatalf("client %d: %+v (seen before: %t)", i, r, seen[r.value])
		}
	}
	if len(seen) != 30 || exhausted != 10 {
		t.Fatalf("%d values and %d pool_exhausted; want 30 and 10", len(seen), exhausted)
	}
	for i := 1; i <= 30; i++ {
		if !seen[fmt.Sprint("10.0.0.", i)] {
			t.Fatalf("10.0.0.%d not handed out: the auto range has exactly 10.0.0.1-10.0.0.30", i)
		}
	}

	res = mpFire(t, servers, 20, "vni", func(int) string { return "one-owner" })
	created := 0
	for i, r := range res {
		if r.value != "1024000" || (r.status != 200 && r.status != 201) {
			t.Fatalf("one-owner client %d: %+v", i, r)
		}
		if r.status == 201 {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d answers said 201 for one owner, want exactly 1", created)
	}

	// Every server sees the same state, and the database agrees.
	for i, s := range servers {
		code, body := mpCall(t, s, "GET", "/api/v1/pools/lo-ip", "")
		if code != 200 || !strings.Contains(string(body), `"auto":{"size":"30","allocated":"30","free":"0"`) {
			t.Fatalf("server %d pool: %d %s", i, code, body)
		}
	}
	db, _, err := database.Open(u)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	var rows []struct {
		Name  string
		N     int64
		Vals  int64
		Owner int64
		Ends  int64
	}
	if err := db.Raw(`SELECT p.name AS name, COUNT(*) AS n, COUNT(DISTINCT a.value_key) AS vals,
		COUNT(DISTINCT a.owner_id) AS owner, SUM(CASE WHEN a.run_end THEN 1 ELSE 0 END) AS ends
		FROM allocations a JOIN pools p ON p.id = a.pool_id GROUP BY p.name ORDER BY p.name`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Name != "lo-ip" || rows[0].N != 30 || rows[0].Vals != 30 || rows[0].Owner != 30 || rows[0].Ends != 1 ||
		rows[1].Name != "vni" || rows[1].N != 1 || rows[1].Ends != 1 {
		t.Fatalf("stored allocations: %+v", rows)
	}
	var pools, ranges, tokens int64
	db.Raw(`SELECT COUNT(*) FROM pools`).Scan(&pools)
	db.Raw(`SELECT COUNT(*) FROM pool_ranges`).Scan(&ranges)
	db.Raw(`SELECT COUNT(*) FROM api_tokens`).Scan(&tokens)
	if pools != 2 || ranges != 3 || tokens != 1 {
		t.Fatalf("after %d concurrent starts with --pools: %d pools, %d ranges, %d tokens; want 2, 3, 1", n, pools, ranges, tokens)
	}
}

func TestMultiProcessPostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	mpScenario(t, dbtest.NewPostgresURL(t), 3)
}

func TestMultiProcessSQLiteFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	mpScenario(t, "sqlite:"+filepath.Join(t.TempDir(), "site.db"), 2)
}

// A token deleted with `ipledger token delete` (its own process, straight
// to the database) stops working in every running server, although the
// servers cache token look-ups on PostgreSQL: the deletion's notification
// empties their caches. Bounded at 2 s here; it takes milliseconds.
func TestMultiProcessTokenRevocation(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	u := dbtest.NewPostgresURL(t)
	servers := mpStart(t, u, 2)
	out, err := runCmd(t, "token", "create", "--database", u, "--name", "leaky", "--role", "operator")
	if err != nil {
		t.Fatalf("token create: %v\n%s", err, out)
	}
	tok := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	call := func(s *mpServer) int {
		req, _ := http.NewRequest("GET", s.url+"/api/v1/pools", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := mpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	for _, s := range servers {
		for range 3 { // now cached
			if code := call(s); code != 200 {
				t.Fatalf("new token: %d\n%s", code, s.log())
			}
		}
	}
	if out, err := runCmd(t, "token", "delete", "--database", u, "--name", "leaky"); err != nil {
		t.Fatalf("token delete: %v\n%s", err, out)
	}
	deleted := time.Now()
	for i, s := range servers {
		for call(s) != 401 {
			if time.Since(deleted) > 2*time.Second {
				t.Fatalf("server %d still accepts the deleted token 2 s later", i)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	t.Logf("refused by both servers %v after the deletion", time.Since(deleted))
}
