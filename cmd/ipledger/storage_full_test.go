package main

// A real `ipledger serve` whose database fills its file system while
// writers keep allocating: a tmpfs of a few MiB (mounted by the test, as
// root) holding the SQLite file, or PostgreSQL's tablespace of the test's
// schema; a ballast file takes the rest of the space, and removing it
// gives the space back.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// TestStorageFullLosesNothing: four writers allocate while the database's
// file system fills up and frees again, on both databases. Every answer
// is a 201 or a 503 unavailable with Retry-After (never a 500); /readyz
// is 503 while writes are refused and /healthz stays 200; the server is
// ready again by itself once space returns, and writes succeed; every
// acknowledged value is in the database afterwards, and no refused one;
// the server logs the storage filling and taking writes again once per
// change, not once per refused write.
func TestStorageFullLosesNothing(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			fs := mountSmallFS(t, 64<<20, d == models.Postgres)
			u := "sqlite:" + filepath.Join(fs, "ipledger.db")
			if d == models.Postgres {
				u = tablespaceURL(t, fs)
			}
			storageFullRun(t, u, fs)
		})
	}
}

func storageFullRun(t *testing.T, u, fs string) {
	s := mpStart(t, u, 1)[0]
	if code, body := mpCall(t, s, "POST", "/api/v1/pools", `{"name":"fill","type":"integer","ranges":[{"first":"1","last":"100000000"}]}`); code != 201 {
		t.Fatalf("create pool: %d %s", code, body)
	}
	w := startFillWriters(t, s, 4)
	defer w.stop()
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				acked, refused := w.counts()
				t.Fatalf("waited 3 minutes for %s (%d acknowledged, %d refused)\n%s", what, acked, refused, tail(s.log(), 30))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait("50 acknowledged writes", func() bool { a, _ := w.counts(); return a >= 50 })

	ballast := fillUp(t, fs)
	_, refused0 := w.counts()
	wait("30 refused writes", func() bool { _, r := w.counts(); return r >= refused0+30 })
	wait("/readyz to report not ready", func() bool { code, _ := mpCall(t, s, "GET", "/readyz", ""); return code == 503 })
	if code, body := mpCall(t, s, "GET", "/healthz", ""); code != 200 {
		t.Errorf("/healthz on a full disk: %d %s, want 200 (a restart frees no space)", code, body)
	}
	wait("ipledger_storage_full 1", func() bool {
		_, body := mpCall(t, s, "GET", "/metrics", "")
		return strings.Contains(string(body), "\nipledger_storage_full 1\n")
	})

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	acked0, _ := w.counts()
	wait("/readyz to report ready once space returned", func() bool { code, _ := mpCall(t, s, "GET", "/readyz", ""); return code == 200 })
	readyAfter := time.Since(freed)
	wait("50 more acknowledged writes", func() bool { a, _ := w.counts(); return a >= acked0+50 })
	w.stop()

	stored := allocationsOf(t, s, "fill")
	acked, refused := w.results()
	for owner, v := range acked {
		if stored[owner] != v {
			t.Errorf("%s was acknowledged %s; the database holds %q", owner, v, stored[owner])
		}
	}
	for owner := range refused {
		if v, ok := stored[owner]; ok {
			t.Errorf("%s was refused (503) yet holds %s", owner, v)
		}
	}
	// One line when the storage fills, one when it takes writes again,
	// in turn: never one per refused write.
	var changes []string
	for _, line := range strings.Split(s.log(), "\n") {
		switch {
		case strings.Contains(line, `"msg":"database storage is full`):
			changes = append(changes, "full")
		case strings.Contains(line, `"msg":"database storage takes writes again"`):
			changes = append(changes, "again")
		case strings.Contains(line, `"status":500`):
			t.Errorf("a 500 in the log: %s", line)
		}
	}
	alternate := len(changes) >= 2 && changes[len(changes)-1] == "again"
	for i, c := range changes {
		alternate = alternate && c == [2]string{"full", "again"}[i%2]
	}
	if !alternate || len(changes) >= len(refused) {
		t.Errorf("log lines of the storage's changes: %v for %d refused writes; want full and again in turn, far fewer", changes, len(refused))
	}
	t.Logf("%d writes acknowledged, %d refused with 503; storage changes logged: %v; ready %v after the space returned",
		len(acked), len(refused), changes, readyAfter.Round(100*time.Millisecond))
}

// fillWriters allocate from the pool fill, each owner once, and sort the
// answers: acknowledged (owner → value) or refused (503).
type fillWriters struct {
	mu      sync.Mutex
	acked   map[string]string
	refused map[string]bool
	wrong   int // answers neither 201 nor 503
	stopCh  chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

func startFillWriters(t *testing.T, s *mpServer, n int) *fillWriters {
	w := &fillWriters{acked: map[string]string{}, refused: map[string]bool{}, stopCh: make(chan struct{})}
	// Long owner ids fill the disk sooner.
	pad := strings.Repeat("x", 90)
	for k := 0; k < n; k++ {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-w.stopCh:
					return
				default:
				}
				owner := fmt.Sprintf("w%d-%07d-%s", k, i, pad)
				status, h, body, err := fillCall(s, owner)
				if err != nil {
					t.Errorf("allocate %s: %v", owner, err)
					return
				}
				var v struct {
					Value string `json:"value"`
					Error struct{ Code, Message string }
				}
				_ = json.Unmarshal(body, &v)
				w.mu.Lock()
				switch {
				case status == 201 && v.Value != "":
					w.acked[owner] = v.Value
				case status == 503 && v.Error.Code == "unavailable" && h.Get("Retry-After") != "":
					w.refused[owner] = true
				default:
					if w.wrong++; w.wrong <= 5 {
						t.Errorf("allocate %s: %d Retry-After %q %s, want 201, or 503 unavailable with Retry-After", owner, status, h.Get("Retry-After"), body)
					}
				}
				w.mu.Unlock()
				if status == 503 {
					time.Sleep(10 * time.Millisecond) // a client's backoff
				}
			}
		}()
	}
	return w
}

func fillCall(s *mpServer, owner string) (int, http.Header, []byte, error) {
	req, err := http.NewRequest("POST", s.url+"/api/v1/pools/fill/allocations", strings.NewReader(`{"owner_type":"vm","owner_id":"`+owner+`"}`))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+mpAdminToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := mpClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b, err
}

func (w *fillWriters) stop() {
	w.once.Do(func() { close(w.stopCh) })
	w.wg.Wait()
}

func (w *fillWriters) counts() (acked, refused int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked), len(w.refused)
}

func (w *fillWriters) results() (map[string]string, map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.refused
}

// allocationsOf reads every allocation of pool, page by page: owner id →
// value.
func allocationsOf(t *testing.T, s *mpServer, pool string) map[string]string {
	t.Helper()
	out := map[string]string{}
	cursor := ""
	for {
		code, body := mpCall(t, s, "GET", "/api/v1/pools/"+pool+"/allocations?limit=1000&cursor="+url.QueryEscape(cursor), "")
		var page struct {
			Items []struct {
				OwnerID string `json:"owner_id"`
				Value   string `json:"value"`
			} `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		if code != 200 || json.Unmarshal(body, &page) != nil {
			t.Fatalf("list allocations: %d %s", code, body)
		}
		for _, it := range page.Items {
			out[it.OwnerID] = it.Value
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

// mountSmallFS mounts a tmpfs of size bytes for the test and returns its
// path; forPostgres gives it to the local PostgreSQL server's user, for a
// tablespace. It needs root: without it, or where the mount is refused,
// the test skips (fails under CI=true, where it runs as root).
func mountSmallFS(t *testing.T, size int, forPostgres bool) string {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (required under CI=true)", msg)
		}
		t.Skipf("%s: skipping the full-disk test", msg)
	}
	if os.Geteuid() != 0 {
		skip("mounting a small tmpfs needs root")
	}
	opts := fmt.Sprintf("size=%d,mode=0755", size)
	if forPostgres {
		dbtest.RequirePostgres(t)
		pu, err := url.Parse(dbtest.PostgresBase())
		if err != nil {
			t.Fatal(err)
		}
		if h := pu.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
			skip("PostgreSQL at %s is not on this machine, so it cannot have a tablespace on the test's file system", h)
		}
		pgUser, err := user.Lookup("postgres")
		if err != nil {
			skip("no local user postgres to own the tablespace: %v", err)
		}
		opts = fmt.Sprintf("size=%d,mode=0700,uid=%s,gid=%s", size, pgUser.Uid, pgUser.Gid)
	}
	// Under /tmp rather than t.TempDir(), whose 0700 parents the
	// PostgreSQL server's user could not pass.
	parent, err := os.MkdirTemp("", "ipledger-full-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "fs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		_ = os.RemoveAll(parent)
		skip("mount -t tmpfs -o %s: %v %s", opts, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
			return
		}
		_ = os.RemoveAll(parent)
	})
	return dir
}

// tablespaceURL makes a tablespace in dir and returns the URL of a fresh
// schema whose tables go there (default_tablespace). Both are dropped
// when the test ends, the schema first.
func tablespaceURL(t *testing.T, dir string) string {
	t.Helper()
	admin, _, err := database.Open(dbtest.PostgresBase())
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	ts := "ts_full_" + hex.EncodeToString(b[:])
	if err := admin.Exec(`CREATE TABLESPACE ` + ts + ` LOCATION '` + dir + `'`).Error; err != nil {
		t.Fatalf("create tablespace (the test's PostgreSQL user must be a superuser): %v", err)
	}
	t.Cleanup(func() {
		if err := admin.Exec(`DROP TABLESPACE ` + ts).Error; err != nil {
			t.Errorf("drop tablespace %s: %v", ts, err)
		}
		if s, err := admin.DB(); err == nil {
			s.Close()
		}
	})
	u, err := url.Parse(dbtest.NewPostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("default_tablespace", ts)
	u.RawQuery = q.Encode()
	return u.String()
}

// fillUp writes a ballast file into the file system at dir until the
// file system refuses, and returns its path: removing it gives the space
// back.
func fillUp(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10, 512} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("ballast: %v", err)
				}
				break
			}
		}
	}
	st, _ := f.Stat()
	t.Logf("ballast of %s bytes fills %s", strconv.FormatInt(st.Size(), 10), dir)
	return path
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := regexp.MustCompile("\n").Split(strings.TrimRight(s, "\n"), -1)
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
