package main

import (
	"bufio"
	"bytes"
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
)

// A first start without IPLEDGER_ADMIN_TOKEN prints the admin token it
// made on one line, and the command the Helm chart's install notes give
// (`kubectl logs … | grep '…'`) finds that line in the server's output,
// with a token that works.
func TestFirstAdminTokenAsTheChartNotesFindIt(t *testing.T) {
	t.Parallel()
	notes, err := os.ReadFile("../../deploy/helm/ipledger/templates/NOTES.txt")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`logs deploy/[^|\n]*\| grep '([^']+)'`).FindSubmatch(notes)
	if m == nil {
		t.Fatalf("the chart's install notes give no `kubectl logs … | grep '…'` for the first admin token:\n%s", notes)
	}
	pattern := string(m[1])

	dir := t.TempDir()
	cmd := exec.Command(mpBinary(t), "serve", "--listen", "127.0.0.1:0", "--database", "sqlite:"+filepath.Join(dir, "ipledger.db"))
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	var out bytes.Buffer // stdout and stderr, as `kubectl logs` shows them
	var mu sync.Mutex
	addr := make(chan string, 1)
	// One pipe for both streams, as a container runtime collects them:
	// the child's writes keep their order, so every line printed before
	// "listening" has been read when that line is.
	pipe, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			mu.Lock()
			out.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if a := listeningRE.FindStringSubmatch(sc.Text()); a != nil {
				addr <- a[1]
			}
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(time.Minute):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the server did not start:\n%s", out.String())
	}
	mu.Lock()
	var found []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, pattern) {
			found = append(found, line)
		}
	}
	mu.Unlock()
	if len(found) != 1 {
		t.Fatalf("grep '%s' finds %d lines in the first start's output, want the one with the token: %q", pattern, len(found), found)
	}
	i := strings.LastIndex(found[0], ": ")
	token := found[0][i+2:]
	if i < 0 || token == "" || strings.ContainsAny(token, " \t") {
		t.Fatalf("the line %q does not end with the token", found[0])
	}
	req, _ := http.NewRequest("GET", base+"/api/v1/pools", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("the token of %q: GET /api/v1/pools answered %d", found[0], res.StatusCode)
	}
}
