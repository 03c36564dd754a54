package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/proto/gen/forge"
	"github.com/ipledger/ipledger/proto/gen/forge/forgeconnect"
	"github.com/ipledger/ipledger/web"
)

// A database whose storage refuses writes makes the server unavailable,
// not broken: a write through each door — REST, the console, gRPC — is
// answered 503 (gRPC UNAVAILABLE) with Retry-After, never 500; /readyz and
// the gRPC health check report not ready while writes keep being refused,
// /healthz stays 200 (nothing to restart), /metrics says so for the
// IpledgerStorageFull alert; reads go on, also for a console session due
// for renewal; once space returns the server is ready again by itself,
// with no write sent. SQLite is capped at its present size
// (PRAGMA max_page_count, the end of the disk as SQLite meets it);
// PostgreSQL answers disk_full (53100) for every audited write, as it does
// when a table cannot be extended. A real full file system, with writers
// throughout, is cmd/ipledger's TestStorageFullLosesNothing.
func TestStorageFullIs503OnEveryDoor(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := testkit.NewClock(time.Now())
		s := storageFullSite(t, db, clock)
		b := s.login(auth.RoleAdmin) // a session, while writes commit
		var fill, free func()
		if models.DialectOf(db) == models.SQLite {
			sq, err := db.DB()
			if err != nil {
				t.Fatal(err)
			}
			sq.SetMaxOpenConns(1) // the page cap is the connection's
			var pages int64
			if err := db.Raw(`PRAGMA page_count`).Scan(&pages).Error; err != nil {
				t.Fatal(err)
			}
			fill = func() { mustExec(t, db, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)) }
			free = func() { mustExec(t, db, `PRAGMA max_page_count = 1000000`) }
		} else {
			mustExec(t, db, `CREATE FUNCTION refuse_for_space() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`)
			// Every audited write, and a session's renewal.
			fill = func() {
				mustExec(t, db, `CREATE TRIGGER refuse_for_space BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION refuse_for_space()`)
				mustExec(t, db, `CREATE TRIGGER refuse_for_space BEFORE UPDATE ON console_sessions FOR EACH ROW EXECUTE FUNCTION refuse_for_space()`)
			}
			free = func() {
				mustExec(t, db, `DROP TRIGGER refuse_for_space ON audit_events`)
				mustExec(t, db, `DROP TRIGGER refuse_for_space ON console_sessions`)
			}
		}
		s.rest(t, "POST", "/api/v1/pools", `{"name":"vni","type":"integer","ranges":[{"first":"1","last":"1000000"}]}`, http.StatusCreated)
		s.health(t, "SERVING_STATUS_SERVING")
		fill()

		// A writer keeps meeting the full storage while the doors are
		// tried, as clients would: the state lasts while writes are
		// refused.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				status, body, _ := s.call("POST", "/api/v1/pools/vni/allocations", fmt.Sprintf(`{"owner_type":"vm","owner_id":"bg-%d"}`, i))
				if status != http.StatusCreated && status != http.StatusServiceUnavailable {
					t.Errorf("a write while the storage is full: %d %s", status, body)
					return
				}
				if status == http.StatusServiceUnavailable {
					time.Sleep(10 * time.Millisecond) // as a client backs off
				}
			}
		}()
		defer func() { close(stop); wg.Wait() }()

		// REST.
		s.until503(t, "REST allocation", func(i int) (int, string, http.Header) {
			return s.call("POST", "/api/v1/pools/vni/allocations", fmt.Sprintf(`{"owner_type":"vm","owner_id":"rest-%d"}`, i))
		}, `"code":"unavailable"`, "storage is full")
		// The console, as a browser posts its form.
		s.until503(t, "console pool form", func(i int) (int, string, http.Header) {
			res := b.post("/pools", url.Values{"name": {fmt.Sprintf("p%d", i)}, "type": {"ipv4"},
				"first": {fmt.Sprintf("10.%d.0.1", i%250)}, "last": {fmt.Sprintf("10.%d.0.9", i%250)}, "auto_assign": {"true"}}, true)
			return res.StatusCode, readBody(t, res), res.Header
		}, "<html", "storage is full")
		// gRPC, over HTTP/2 as gRPC clients speak it.
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		client := forgeconnect.NewForgeClient(&http.Client{Transport: tr}, s.srv.URL, connect.WithGRPC(),
			connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
				return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
					req.Header().Set("Authorization", "Bearer "+s.tokens[auth.RoleAdmin])
					return next(ctx, req)
				}
			})))
		var grpcErr error
		for i := 0; i < 500; i++ {
			_, grpcErr = client.AddExpectedMachine(context.Background(), connect.NewRequest(&forge.ExpectedMachine{
				BmcMacAddress: fmt.Sprintf("0a:00:00:00:%02x:%02x", i/256, i%256), ChassisSerialNumber: fmt.Sprintf("SN-FULL-%d", i)}))
			if grpcErr != nil {
				break
			}
		}
		if connect.CodeOf(grpcErr) != connect.CodeUnavailable || !strings.Contains(grpcErr.Error(), "storage is full") {
			t.Errorf("gRPC AddExpectedMachine on a full storage: %v, want UNAVAILABLE naming the storage", grpcErr)
		}

		testkit.WaitFor(t, time.Minute, func() bool { return s.readyStatus(t) == http.StatusServiceUnavailable },
			"/readyz to report not ready while writes are refused")
		s.health(t, "SERVING_STATUS_NOT_SERVING")
		if status, body, _ := s.call("GET", "/healthz", ""); status != http.StatusOK {
			t.Errorf("/healthz while the storage is full: %d %s, want 200 (a restart frees no space)", status, body)
		}
		// Reads go on: the API, and the console for a session whose
		// renewal the database cannot store now.
		s.rest(t, "GET", "/api/v1/pools/vni", "", http.StatusOK)
		clock.Advance(10 * time.Minute)
		expect(t, b.get("/pools"), http.StatusOK, "vni")
		metrics := s.metrics(t)
		if !strings.Contains(metrics, "\nipledger_storage_full 1\n") {
			t.Errorf("/metrics while the storage is full:\n%s", grepLines(metrics, "ipledger_storage"))
		}
		if m := regexp.MustCompile(`\nipledger_storage_refused_writes_total ([0-9]+)\n`).FindStringSubmatch(metrics); m == nil || m[1] == "0" {
			t.Errorf("no refused writes counted:\n%s", grepLines(metrics, "ipledger_storage"))
		}

		close(stop)
		wg.Wait()
		stop = make(chan struct{})
		free()
		// Nobody writes now: the server finds out by itself.
		testkit.WaitFor(t, 2*time.Minute, func() bool { return s.readyStatus(t) == http.StatusOK },
			"/readyz to report ready once space returns")
		s.health(t, "SERVING_STATUS_SERVING")
		if !strings.Contains(s.metrics(t), "\nipledger_storage_full 0\n") {
			t.Errorf("/metrics once space returned:\n%s", grepLines(s.metrics(t), "ipledger_storage"))
		}
		s.rest(t, "POST", "/api/v1/pools/vni/allocations", `{"owner_type":"vm","owner_id":"after"}`, http.StatusCreated)
	})
}

// fullSite is a console site served as `ipledger serve` serves (HTTP/1.1
// and cleartext HTTP/2), so that gRPC clients can call it.
type fullSite struct{ *consoleSite }

func storageFullSite(t *testing.T, db *gorm.DB, clock *testkit.Clock) fullSite {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := allocator.New(db, allocator.Options{Logger: quiet})
	au := auth.New(db, auth.Options{Now: clock.Now})
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = web.New(web.Config{Allocator: a, Auth: au, Logger: quiet}).HTTPServer()
	srv.Start()
	t.Cleanup(srv.Close)
	site := &consoleSite{t: t, a: a, auth: au, srv: srv, tokens: map[auth.Role]string{}}
	tok, err := au.CreateToken(context.Background(), "full-admin", auth.RoleAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	site.tokens[auth.RoleAdmin] = tok
	return fullSite{site}
}

func (s fullSite) call(method, path, body string) (int, string, http.Header) {
	req, _ := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.tokens[auth.RoleAdmin])
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

func (s fullSite) rest(t *testing.T, method, path, body string, want int) {
	t.Helper()
	if status, got, _ := s.call(method, path, body); status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, status, got, want)
	}
}

// until503 sends writes until one is answered 503: each answer before it
// must be a success (a write that still found room), and the 503 must
// carry Retry-After and the texts want.
func (s fullSite) until503(t *testing.T, door string, send func(i int) (int, string, http.Header), want ...string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		status, body, h := send(i)
		switch {
		case status == http.StatusServiceUnavailable:
			if h.Get("Retry-After") != web.RetryAfterSeconds {
				t.Errorf("%s: 503 with Retry-After %q, want %s", door, h.Get("Retry-After"), web.RetryAfterSeconds)
			}
			for _, w := range want {
				if !strings.Contains(body, w) {
					t.Errorf("%s: 503 lacks %q:\n%s", door, w, clip(body))
				}
			}
			return
		case status >= 300 && status != http.StatusSeeOther:
			t.Fatalf("%s on a full storage: %d, want 503\n%s", door, status, clip(body))
		}
	}
	t.Fatalf("%s: 500 writes found room on a full storage", door)
}

func (s fullSite) readyStatus(t *testing.T) int {
	status, _, _ := s.call("GET", "/readyz", "")
	return status
}

// ready checks the gRPC health check (Connect protocol, JSON).
func (s fullSite) health(t *testing.T, want string) {
	t.Helper()
	res, err := http.Post(s.srv.URL+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader(`{"service":"forge.Forge"}`))
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, res); res.StatusCode != http.StatusOK || !strings.Contains(body, `"`+want+`"`) {
		t.Errorf("gRPC health: %d %s, want %s", res.StatusCode, body, want)
	}
}

func (s fullSite) metrics(t *testing.T) string {
	t.Helper()
	status, body, _ := s.call("GET", "/metrics", "")
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d", status)
	}
	return body
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func mustExec(t *testing.T, db *gorm.DB, sql string) {
	t.Helper()
	if err := db.Exec(sql).Error; err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
