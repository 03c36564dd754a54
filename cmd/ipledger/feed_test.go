package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit/serverkit"
	"github.com/ipledger/ipledger/webhook"
)

// feedCLIServer is a server with a running feed and webhook engine.
func feedCLIServer(t *testing.T, db *gorm.DB) (*allocator.Allocator, string, string) {
	t.Helper()
	s := serverkit.Start(t, db, serverkit.Options{Feed: true})
	return s.A, s.URL, s.Admin
}

// receive waits for one value of ch, failing the test (rather than hanging
// the package until its timeout) when none comes within a minute.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("no %s within a minute", what)
		var zero T
		return zero
	}
}

// lines collects what a watch prints, one JSON object per line.
type lines struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.buf.String()), "\n")
}

func (l *lines) waitN(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := l.get()
		if len(got) >= n && got[0] != "" {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch printed %q, want %d lines", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cni-ipam watch prints the owner's ipam object at start and after each
// change of its addresses (not of other owners'), and resumes from its
// state file after a restart, printing what changed while it was away.
func TestCNIIPAMWatch(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a, url, tok := feedCLIServer(t, db)
		ctx := audit.WithActor(context.Background(), "test", "")
		if _, err := a.CreatePool(ctx, allocator.PoolSpec{Name: "ep", Type: "ipv6prefix", DelegatePrefixLen: 96,
			Ranges: []allocator.RangeSpec{{First: "fd00:10::/96", Last: "fd00:10::ffff:0:0/96"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreatePool(ctx, allocator.PoolSpec{Name: "ep4", Type: "ipv4", Ranges: []allocator.RangeSpec{{First: "10.9.0.1", Last: "10.9.0.9"}}}); err != nil {
			t.Fatal(err)
		}
		c, err := (&clientFlags{server: url, token: tok, output: "table"}).client(io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		state := filepath.Join(t.TempDir(), "watch.json")
		pod := allocator.Owner{Type: "endpoint", ID: "pod-1"}
		wakes := 0
		start := func() (*lines, func()) {
			out := &lines{}
			done := make(chan struct{})
			errc := make(chan error, 1)
			go func() { errc <- watchIPAM(done, c, "endpoint", "pod-1", state, out) }()
			return out, func() {
				close(done)
				// The watch ends after its current long poll.
				wakes++
				if _, _, err := a.Allocate(ctx, "ep4", allocator.Owner{Type: "endpoint", ID: fmt.Sprint("wake-", wakes)}, ""); err != nil {
					t.Error(err)
				}
				select {
				case err := <-errc:
					if err != nil {
						t.Error(err)
					}
				case <-time.After(40 * time.Second):
					t.Error("watch did not stop")
				}
			}
		}
		out, stop := start()
		got := out.waitN(t, 1)
		if got[0] != `{"type":"galactic-ipam","addresses":[]}` {
			t.Fatalf("first line %q", got[0])
		}
		time.Sleep(100 * time.Millisecond)
		if _, _, err := a.Allocate(ctx, "ep", allocator.Owner{Type: "endpoint", ID: "other"}, ""); err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.Allocate(ctx, "ep", pod, ""); err != nil {
			t.Fatal(err)
		}
		got = out.waitN(t, 2)
		if len(got) != 2 || !strings.Contains(got[1], `fd00:10::1:0:0/96`) {
			t.Fatalf("after the pod's allocation: %q", got)
		}
		stop()
		// While the watch is down the pod gets an IPv4 address.
		v4, _, err := a.Allocate(ctx, "ep4", pod, "")
		if err != nil {
			t.Fatal(err)
		}
		out, stop = start()
		got = out.waitN(t, 1)
		if len(got) != 1 || !strings.Contains(got[0], v4.Value+"/32") || !strings.Contains(got[0], "/96") {
			t.Fatalf("after the restart: %q", got)
		}
		if err := a.Release(ctx, "ep4", v4.Value, pod); err != nil {
			t.Fatal(err)
		}
		got = out.waitN(t, 2)
		if strings.Contains(got[1], v4.Value) {
			t.Fatalf("after the release: %q", got)
		}
		stop()
		var st watchState
		b, _ := os.ReadFile(state)
		if err := json.Unmarshal(b, &st); err != nil || st.Revision == 0 {
			t.Fatalf("state file %s: %v", b, err)
		}
	})
}

// The webhook CLI: create (secret from the environment, never printed),
// list, show, deliveries, redeliver, delete; errors reach the user.
func TestWebhookCLI(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a, url, tok := feedCLIServer(t, db)
		got := make(chan string, 100)
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got <- r.Header.Get("X-Ipledger-Delivery")
		}))
		defer recv.Close()
		run := func(args ...string) (string, error) { return runCLI(t, url, tok, "", args...) }
		const secret = "cli-secret-0123456789"
		t.Setenv("IPLEDGER_WEBHOOK_SECRET", secret)
		out, err := run("--output", "json", "webhook", "create", "--name", "ctl", "--url", recv.URL, "--action", "pool.*")
		if err != nil {
			t.Fatalf("create: %v %s", err, out)
		}
		var w webhook.Webhook
		if err := json.Unmarshal([]byte(out), &w); err != nil || w.Name != "ctl" || strings.Contains(out, secret) {
			t.Fatalf("create printed %s", out)
		}
		if _, err := a.CreatePool(audit.WithActor(context.Background(), "test", ""), allocator.PoolSpec{Name: "cp", Type: "integer",
			Ranges: []allocator.RangeSpec{{First: "1", Last: "5"}}}); err != nil {
			t.Fatal(err)
		}
		delivery := receive(t, got, "the pool.create delivery")
		for _, args := range [][]string{{"webhook", "list"}, {"webhook", "show", w.ID}, {"webhook", "deliveries", w.ID}} {
			out, err := run(args...)
			if err != nil || strings.Contains(out, secret) || !strings.Contains(out, "ctl") && args[1] != "deliveries" {
				t.Fatalf("%v: %v %s", args, err, out)
			}
			if args[1] == "deliveries" && !strings.Contains(out, delivery) {
				t.Fatalf("deliveries: %s lacks %s", out, delivery)
			}
		}
		if out, err := run("webhook", "redeliver", w.ID, delivery); err != nil || !strings.Contains(out, delivery) {
			t.Fatalf("redeliver: %v %s", err, out)
		}
		if again := receive(t, got, "the redelivery"); again != delivery {
			t.Fatalf("redelivered %s, want %s", again, delivery)
		}
		if _, err := run("webhook", "create", "--name", "ctl", "--url", "ftp://x/", "--action", "*"); err == nil || !strings.Contains(err.Error(), "url") {
			t.Fatalf("bad url: %v", err)
		}
		// An empty --pool is an empty filter, refused by the server, not
		// a webhook of every pool.
		if out, err := run("webhook", "create", "--name", "nopool", "--url", recv.URL, "--action", "*", "--pool", ""); err == nil ||
			!strings.Contains(err.Error(), "pools") {
			t.Fatalf("create with --pool '': %v %s, want the empty filter refused", err, out)
		}
		if out, err := run("webhook", "delete", w.ID); err != nil {
			t.Fatalf("delete: %v %s", err, out)
		}
		if _, err := run("webhook", "show", w.ID); err == nil || !strings.Contains(err.Error(), "not_found") {
			t.Fatalf("show after delete: %v", err)
		}
	})
}
