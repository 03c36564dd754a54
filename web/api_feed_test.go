package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/webhook"
)

// feedEnv is a server with a running feed, an admin and a viewer token.
type feedEnv struct {
	a      *allocator.Allocator
	feed   *feed.Feed
	hooks  *webhook.Service
	srv    *httptest.Server
	h      http.Handler
	admin  string
	viewer string
}

func newFeedEnv(t *testing.T, db *gorm.DB) *feedEnv {
	e, _ := newFeedServer(t, db, 100*time.Millisecond)
	return e
}

// newFeedServer is newFeedEnv with the Server it serves, its streams'
// keep-alive given. The Server is built before the feed runs, as serve
// does: New sets the feed's hooks, which must not change under a running
// sequencer.
func newFeedServer(t *testing.T, db *gorm.DB, keepAlive time.Duration) (*feedEnv, *Server) {
	fd := feed.New(db, feed.Options{})
	hooks := webhook.New(db, webhook.Options{OnCommit: fd.Committed})
	fd.SetDeliveries(hooks)
	a := allocator.New(db, allocator.Options{OnCommit: fd.Committed})
	au := auth.New(a.DB(), auth.Options{OnCommit: fd.Committed})
	e := &feedEnv{a: a, feed: fd, hooks: hooks, admin: "feed-test-admin-token"}
	ctx := context.Background()
	if _, err := au.EnsureAdminToken(ctx, e.admin); err != nil {
		t.Fatal(err)
	}
	v, err := au.CreateToken(ctx, "feed-viewer", auth.RoleViewer, "")
	if err != nil {
		t.Fatal(err)
	}
	e.viewer = v
	srv := New(Config{Allocator: a, Feed: fd, Webhooks: hooks, StreamKeepAlive: keepAlive})
	e.h = srv.Handler()
	fctx, cancel := context.WithCancel(ctx)
	done := fd.RunFeed(fctx, feed.FeedOptions{Poll: 50 * time.Millisecond})
	t.Cleanup(func() { cancel(); <-done })
	e.srv = httptest.NewServer(e.h)
	t.Cleanup(e.srv.Close)
	return e, srv
}

func (e *feedEnv) call(t *testing.T, method, path, token, body string) (int, []byte) {
	t.Helper()
	return ownersCall(t, e.h, method, path, token, body)
}

func (e *feedEnv) must(t *testing.T, method, path, body string, want int) []byte {
	t.Helper()
	code, b := e.call(t, method, path, e.admin, body)
	if code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	}
	return b
}

type feedPage struct {
	Items []struct {
		Revision   int64  `json:"revision"`
		Action     string `json:"action"`
		ObjectType string `json:"object_type"`
		Pool       string `json:"pool"`
		Value      string `json:"value"`
		Actor      string `json:"actor"`
	} `json:"items"`
	NextAfter *json.Number `json:"next_after"`
}

func decodeFeed(t *testing.T, b []byte) feedPage {
	t.Helper()
	var p feedPage
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(&p); err != nil || p.NextAfter == nil {
		t.Fatalf("feed page %s: %v (next_after must be a JSON integer)", b, err)
	}
	return p
}

// waitHead waits until the feed's head reaches the stored events.
func waitNumbered(t *testing.T, fd *feed.Feed) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, _, err := fd.Lag(context.Background())
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events still without a revision", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The feed's shapes, filters and errors, read by a viewer.
func TestFeedAPI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		e := newFeedEnv(t, db)
		e.must(t, "POST", "/api/v1/pools", `{"name":"fa","type":"integer","ranges":[{"first":"1","last":"9"}]}`, 201)
		e.must(t, "POST", "/api/v1/pools", `{"name":"fb","type":"ipv4","ranges":[{"first":"10.0.0.1","last":"10.0.0.9"}]}`, 201)
		e.must(t, "POST", "/api/v1/pools/fa/allocations", `{"owner_type":"machine","owner_id":"m1"}`, 201)
		e.must(t, "POST", "/api/v1/pools/fb/allocations", `{"owner_type":"machine","owner_id":"m1"}`, 201)
		e.must(t, "DELETE", "/api/v1/pools/fb/allocations/10.0.0.1?owner_type=machine&owner_id=m1", "", 204)
		waitNumbered(t, e.feed)

		code, b := e.call(t, "GET", "/api/v1/events?after=0", e.viewer, "")
		if code != 200 {
			t.Fatalf("viewer reads the feed: %d %s", code, b)
		}
		all := decodeFeed(t, b)
		var last int64
		for _, it := range all.Items {
			if it.Revision <= last {
				t.Fatalf("revisions not increasing: %s", b)
			}
			last = it.Revision
		}
		if n, _ := all.NextAfter.Int64(); n != last || len(all.Items) < 5 {
			t.Fatalf("next_after %d, last revision %d, %d items: %s", n, last, len(all.Items), b)
		}
		alloc := decodeFeed(t, e.must(t, "GET", "/api/v1/events?after=0&action=allocation.*&pool=fb", "", 200))
		if len(alloc.Items) != 2 || alloc.Items[0].Action != "allocation.create" || alloc.Items[1].Action != "allocation.release" ||
			alloc.Items[0].Pool != "fb" || alloc.Items[0].Value != "10.0.0.1" {
			t.Fatalf("allocation events of fb: %+v", alloc.Items)
		}
		if n, _ := alloc.NextAfter.Int64(); n != last {
			t.Fatalf("a filtered page that reached the head resumes from the head %d, not %d", last, n)
		}
		pools := decodeFeed(t, e.must(t, "GET", "/api/v1/events?after=0&object_type=pool&pool=fa", "", 200))
		if len(pools.Items) != 1 || pools.Items[0].Action != "pool.create" || pools.Items[0].Pool != "fa" {
			t.Fatalf("pool events of fa: %+v", pools.Items)
		}
		exact := decodeFeed(t, e.must(t, "GET", "/api/v1/events?after=0&action=allocation.release", "", 200))
		if len(exact.Items) != 1 {
			t.Fatalf("exact action: %+v", exact.Items)
		}
		// Paging with limit and after visits every event once.
		var got []int64
		for after := int64(0); ; {
			p := decodeFeed(t, e.must(t, "GET", fmt.Sprintf("/api/v1/events?after=%d&limit=2", after), "", 200))
			for _, it := range p.Items {
				got = append(got, it.Revision)
			}
			n, _ := p.NextAfter.Int64()
			if len(p.Items) == 0 {
				if n != after {
					t.Fatalf("empty page moved next_after from %d to %d", after, n)
				}
				break
			}
			after = n
		}
		if len(got) != len(all.Items) {
			t.Fatalf("paged %v, want %d events", got, len(all.Items))
		}
		// Beyond the head: empty, next_after stays.
		far := decodeFeed(t, e.must(t, "GET", "/api/v1/events?after=999999", "", 200))
		if n, _ := far.NextAfter.Int64(); len(far.Items) != 0 || n != 999999 {
			t.Fatalf("after beyond the head: %+v", far)
		}
		// Without after it stays the newest-first audit log, now with revisions.
		var log struct {
			Items []struct {
				Revision *int64 `json:"revision"`
			} `json:"items"`
		}
		json.Unmarshal(e.must(t, "GET", "/api/v1/events?limit=2", "", 200), &log)
		if len(log.Items) != 2 || log.Items[0].Revision == nil || *log.Items[0].Revision != last {
			t.Fatalf("audit log: %+v", log.Items)
		}
		for _, c := range []struct{ query, field string }{
			{"after=0&cursor=5", "cursor"},
			{"after=-1", "after"},
			{"after=x", "after"},
			{"after=0&wait=61s", "wait"},
			{"after=0&wait=30", "wait"},
			{"after=0&action=allocation.", "action"},
			{"after=0&action=Allocation.*", "action"},
			{"after=0&pool=no%20such", "pool"},
			{"after=0&actor=test", "actor"},
			{"wait=1s", "wait"},
			{"pool=fa", "pool"},
		} {
			code, b := e.call(t, "GET", "/api/v1/events?"+c.query, e.admin, "")
			var eb struct {
				Error struct{ Code, Field string }
			}
			json.Unmarshal(b, &eb)
			if code != 422 || eb.Error.Code != "invalid" || eb.Error.Field != c.field {
				t.Errorf("%s: %d %s, want 422 naming %s", c.query, code, b, c.field)
			}
		}
		if code, _ := e.call(t, "GET", "/api/v1/events?after=0", "", ""); code != 401 {
			t.Fatalf("no token: %d", code)
		}
	})
}

// A long poll answers as soon as a matching event is numbered, and only
// then: an event of another pool does not end it.
func TestFeedLongPoll(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		e := newFeedEnv(t, db)
		e.must(t, "POST", "/api/v1/pools", `{"name":"la","type":"integer","ranges":[{"first":"1","last":"9"}]}`, 201)
		e.must(t, "POST", "/api/v1/pools", `{"name":"lb","type":"integer","ranges":[{"first":"1","last":"9"}]}`, 201)
		waitNumbered(t, e.feed)
		head := decodeFeed(t, e.must(t, "GET", "/api/v1/events?after=0", "", 200)).NextAfter
		type res struct {
			code int
			b    []byte
			at   time.Time
		}
		out := make(chan res, 1)
		go func() {
			code, b := e.call(t, "GET", "/api/v1/events?after="+head.String()+"&wait=20s&pool=lb", e.viewer, "")
			out <- res{code, b, time.Now()}
		}()
		time.Sleep(200 * time.Millisecond)
		e.must(t, "POST", "/api/v1/pools/la/allocations", `{"owner_type":"machine","owner_id":"m1"}`, 201)
		select {
		case r := <-out:
			t.Fatalf("an event of another pool ended the long poll: %d %s", r.code, r.b)
		case <-time.After(300 * time.Millisecond):
		}
		sent := time.Now()
		e.must(t, "POST", "/api/v1/pools/lb/allocations", `{"owner_type":"machine","owner_id":"m1"}`, 201)
		answered := time.Now()
		r := <-out
		p := decodeFeed(t, r.b)
		if r.code != 200 || len(p.Items) != 1 || p.Items[0].Pool != "lb" {
			t.Fatalf("long poll: %d %s", r.code, r.b)
		}
		t.Logf("woken %s after the allocation was sent (%s after its answer)", r.at.Sub(sent), r.at.Sub(answered))
		// A wait that ends empty answers with next_after at the head.
		start := time.Now()
		p = decodeFeed(t, e.must(t, "GET", "/api/v1/events?after="+fmt.Sprint(p.Items[0].Revision)+"&wait=300ms&pool=la", "", 200))
		if len(p.Items) != 0 || time.Since(start) < 300*time.Millisecond {
			t.Fatalf("empty long poll: %+v after %s", p, time.Since(start))
		}
	})
}

// The event stream: starts at the head without after or Last-Event-ID,
// sends id/event/data per event, keeps an idle stream open with
// comments, and Last-Event-ID wins over after.
func TestEventStream(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		e := newFeedEnv(t, db)
		e.must(t, "POST", "/api/v1/pools", `{"name":"sa","type":"integer","ranges":[{"first":"1","last":"9"}]}`, 201)
		waitNumbered(t, e.feed)
		open := func(query, lastID string) (*bufio.Reader, func()) {
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/v1/events:stream"+query, nil)
			req.Header.Set("Authorization", "Bearer "+e.viewer)
			if lastID != "" {
				req.Header.Set("Last-Event-ID", lastID)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			return bufio.NewReader(resp.Body), func() { cancel(); resp.Body.Close() }
		}
		// next returns the next event's id, event and data lines, counting
		// the comments before it.
		next := func(r *bufio.Reader) (id, event, data string, comments int) {
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					t.Fatalf("stream ended: %v", err)
				}
				line = strings.TrimRight(line, "\n")
				switch {
				case strings.HasPrefix(line, ":"):
					comments++
				case strings.HasPrefix(line, "id: "):
					id = line[4:]
				case strings.HasPrefix(line, "event: "):
					event = line[7:]
				case strings.HasPrefix(line, "data: "):
					data = line[6:]
				case line == "" && id != "":
					return
				}
			}
		}
		r, closeStream := open("?action=allocation.*", "")
		defer closeStream()
		time.Sleep(350 * time.Millisecond) // a few keep-alive periods
		e.must(t, "POST", "/api/v1/pools/sa/allocations", `{"owner_type":"machine","owner_id":"m1"}`, 201)
		id, event, data, comments := next(r)
		if event != "allocation.create" || !strings.Contains(data, `"revision":`+id) || !strings.Contains(data, `"pool":"sa"`) {
			t.Fatalf("event %s %s %s", id, event, data)
		}
		if comments < 2 {
			t.Fatalf("%d keep-alive comments while idle, want at least 2", comments)
		}
		closeStream()
		// Reconnect: Last-Event-ID (the one before) wins over after.
		var prev int64
		fmt.Sscan(id, &prev)
		r2, close2 := open("?after=999999", fmt.Sprint(prev-1))
		defer close2()
		id2, _, _, _ := next(r2)
		if id2 != id {
			t.Fatalf("resumed at %s, want %s", id2, id)
		}
		code, _ := e.call(t, "GET", "/api/v1/events:stream?action=nope!", e.viewer, "")
		if code != 422 {
			t.Fatalf("bad filter on the stream: %d", code)
		}
	})
}

// /metrics shows the feed's lag and head, webhook outcomes and each
// webhook's queue depth.
func TestFeedMetrics(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		e := newFeedEnv(t, db)
		e.must(t, "POST", "/api/v1/webhooks", `{"name":"m1","url":"http://127.0.0.1:9/","secret":"metrics-secret-0123456789","actions":["*"]}`, 201)
		waitNumbered(t, e.feed)
		code, b := e.call(t, "GET", "/metrics", "", "")
		for _, want := range []string{"ipledger_feed_lag_events 0", "ipledger_feed_lag_seconds 0", "ipledger_feed_head_revision ",
			`ipledger_webhook_deliveries_total{outcome="delivered"} 0`, `ipledger_webhook_queue_depth{webhook="m1"} `, "ipledger_feed_pass_events_count "} {
			if code != 200 || !strings.Contains(string(b), want) {
				t.Fatalf("/metrics lacks %q (%d):\n%s", want, code, b)
			}
		}
	})
}
