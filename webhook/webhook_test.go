package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/buildinfo"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/internal/testkit/sitekit"
	"github.com/ipledger/ipledger/models"
)

// hookReq is one request a test receiver got.
type hookReq struct {
	delivery, event, signature string
	userAgent                  string
	revision                   int64
	body                       []byte
}

// receiver records requests and answers with answer(n) for the n-th
// (from 0).
type receiver struct {
	mu       sync.Mutex
	reqs     []hookReq
	got      chan struct{}
	inFlight atomic.Int32
	maxIn    atomic.Int32
	srv      *httptest.Server
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{got: make(chan struct{}, 100000)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := rc.inFlight.Add(1)
		defer rc.inFlight.Add(-1)
		for {
			m := rc.maxIn.Load()
			if in <= m || rc.maxIn.CompareAndSwap(m, in) {
				break
			}
		}
		b, _ := io.ReadAll(r.Body)
		rev, _ := strconv.ParseInt(r.Header.Get("X-Ipledger-Revision"), 10, 64)
		rc.mu.Lock()
		n := len(rc.reqs)
		rc.reqs = append(rc.reqs, hookReq{r.Header.Get("X-Ipledger-Delivery"), r.Header.Get("X-Ipledger-Event"), r.Header.Get("X-Ipledger-Signature"), r.Header.Get("User-Agent"), rev, b})
		rc.mu.Unlock()
		rc.got <- struct{}{}
		answer(n, w, r)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// waitFor waits until the receiver has n requests. It gives up after a
// minute without a new one (not after a minute in all: a burst on a busy
// machine takes longer, and speed is the benchmarks' business).
func (rc *receiver) waitFor(t *testing.T, n int) []hookReq {
	t.Helper()
	const quiet = 60 * time.Second
	idle := time.NewTimer(quiet)
	defer idle.Stop()
	for {
		rc.mu.Lock()
		k := len(rc.reqs)
		rc.mu.Unlock()
		if k >= n {
			break
		}
		select {
		case <-rc.got:
			idle.Reset(quiet)
		case <-idle.C:
			t.Fatalf("receiver got %d requests, want %d (none for %s)", k, n, quiet)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hookReq(nil), rc.reqs...)
}

const testSecret = "s3cret-s3cret-s3cret"

// fastHooks are delivery options for tests: millisecond backoff.
func fastHooks() WebhookOptions {
	return WebhookOptions{BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, Poll: 20 * time.Millisecond, Timeout: 2 * time.Second}
}

func runHooks(t *testing.T, wh *Service, o WebhookOptions) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := wh.Run(ctx, o)
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

// proc is one server process of a test: its allocator, feed and
// webhooks, wired as serve wires them.
type proc struct {
	db    *gorm.DB
	a     *allocator.Allocator
	feed  *feed.Feed
	hooks *Service
}

func newProc(db *gorm.DB) *proc {
	fd := feed.New(db, feed.Options{})
	hooks := New(db, Options{OnCommit: fd.Committed})
	fd.SetDeliveries(hooks)
	return &proc{db: db, a: allocator.New(db, allocator.Options{OnCommit: fd.Committed}), feed: fd, hooks: hooks}
}

// fnd is one test's site with its feed and webhooks.
type fnd struct {
	*sitekit.Site
	feed  *feed.Feed
	hooks *Service
}

// runFeed starts fd's sequencer for the test's lifetime with a short
// fallback poll.
func runFeed(t *testing.T, fd *feed.Feed) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := fd.RunFeed(ctx, feed.FeedOptions{Poll: 50 * time.Millisecond})
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

func hookEach(t *testing.T, fn func(t *testing.T, f *fnd)) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		p := newProc(db)
		fn(t, &fnd{Site: sitekit.Over(t, p.a), feed: p.feed, hooks: p.hooks})
	})
}

func (f *fnd) mkHook(url string, actions []string, pools []string) *Webhook {
	f.T.Helper()
	w, err := f.hooks.CreateWebhook(f.Ctx, WebhookSpec{Name: "h" + strconv.Itoa(int(time.Now().UnixNano()%1e6)), URL: url, Secret: testSecret, Actions: actions, Pools: pools})
	if err != nil {
		f.T.Fatal(err)
	}
	return w
}

// A receiver that answers 500 three times and then 200 gets the same
// delivery (id, revision, body, valid signature) four times, then the
// next event; the log shows 4 attempts then 1.
func TestWebhookRetriesThenNextInOrder(t *testing.T) {
	t.Parallel()
	hookEach(t, func(t *testing.T, f *fnd) {
		rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n < 3 {
				w.WriteHeader(500)
				io.WriteString(w, "busy")
				return
			}
			io.WriteString(w, "ok")
		})
		f.Pool("wp", "integer", 0, sitekit.Range("1", "100", true))
		hook := f.mkHook(rc.srv.URL+"/in", []string{"allocation.*"}, []string{"wp"})
		runFeed(t, f.feed)
		runHooks(t, f.hooks, fastHooks())
		f.Allocate("wp", "m1", "")
		f.Allocate("wp", "m2", "")
		reqs := rc.waitFor(t, 5)
		// Every attempt names the build that sent it.
		for _, r := range reqs {
			if want := buildinfo.UserAgent("ipledger-webhook"); r.userAgent != want {
				t.Fatalf("User-Agent %q, want %q", r.userAgent, want)
			}
		}
		for i := 1; i < 4; i++ {
			if reqs[i].delivery != reqs[0].delivery || reqs[i].revision != reqs[0].revision || string(reqs[i].body) != string(reqs[0].body) {
				t.Fatalf("attempt %d differs from the first: %+v vs %+v", i+1, reqs[i], reqs[0])
			}
		}
		if reqs[4].delivery == reqs[0].delivery || reqs[4].revision <= reqs[0].revision {
			t.Fatalf("fifth request is not the next event: %+v after %+v", reqs[4], reqs[0])
		}
		for _, r := range reqs {
			if r.signature != Signature(testSecret, r.body) || r.event != "allocation.create" {
				t.Fatalf("bad signature or event header: %+v", r)
			}
			var ev audit.Event
			if err := json.Unmarshal(r.body, &ev); err != nil || ev.Revision == nil || *ev.Revision != r.revision || ev.Pool != "wp" || ev.Value == "" {
				t.Fatalf("body %s: %v", r.body, err)
			}
			if strings.Contains(string(r.body), testSecret) {
				t.Fatal("the secret is in the body")
			}
		}
		page, err := f.hooks.ListDeliveries(f.Ctx, hook.ID, DeliveryFilter{})
		if err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 30*time.Second, func() bool {
			page, _ = f.hooks.ListDeliveries(f.Ctx, hook.ID, DeliveryFilter{})
			return len(page.Items) == 2 && page.Items[0].State == models.DeliveryDelivered
		}, "both deliveries to be delivered")
		old, nw := page.Items[1], page.Items[0]
		if old.Attempts != 4 || old.State != models.DeliveryDelivered || old.StatusCode == nil || *old.StatusCode != 200 || old.Response != "ok" || old.DeliveredAt == nil || old.NextAttemptAt != nil {
			t.Fatalf("first delivery: %+v", old)
		}
		if nw.Attempts != 1 || nw.DeliveryID != reqs[4].delivery {
			t.Fatalf("second delivery: %+v", nw)
		}
		// Redeliver sends the first again, with its id.
		if _, err := f.hooks.Redeliver(f.Ctx, hook.ID, old.DeliveryID); err != nil {
			t.Fatal(err)
		}
		reqs = rc.waitFor(t, 6)
		if reqs[5].delivery != old.DeliveryID {
			t.Fatalf("redelivery sent %s, want %s", reqs[5].delivery, old.DeliveryID)
		}
		_, err = f.hooks.Redeliver(f.Ctx, hook.ID, "nope")
		testkit.WantCode(t, err, fault.CodeNotFound, "")
	})
}

// A 301 is a failed attempt: the redirect is not followed, the error
// names it, and the delivery stays pending for a retry.
func TestWebhookRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	hookEach(t, func(t *testing.T, f *fnd) {
		var elsewhere atomic.Int32
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { elsewhere.Add(1) }))
		defer other.Close()
		rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL, http.StatusMovedPermanently)
		})
		hook := f.mkHook(rc.srv.URL, []string{"*"}, nil)
		runFeed(t, f.feed)
		runHooks(t, f.hooks, fastHooks())
		f.Pool("rp", "integer", 0, sitekit.Range("1", "10", true))
		rc.waitFor(t, 3)
		page, _ := f.hooks.ListDeliveries(f.Ctx, hook.ID, DeliveryFilter{})
		d := page.Items[len(page.Items)-1]
		if d.State != models.DeliveryPending || d.StatusCode == nil || *d.StatusCode != 301 || !strings.Contains(d.Error, "not followed") {
			t.Fatalf("delivery after 301s: %+v", d)
		}
		if elsewhere.Load() != 0 {
			t.Fatal("the redirect was followed")
		}
	})
}

// A receiver that hangs costs one timed-out attempt; the retry succeeds.
func TestWebhookHangingReceiverTimesOut(t *testing.T) {
	t.Parallel()
	hookEach(t, func(t *testing.T, f *fnd) {
		release := make(chan struct{})
		defer close(release)
		rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 0 {
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
		})
		hook := f.mkHook(rc.srv.URL, []string{"pool.create"}, nil)
		runFeed(t, f.feed)
		o := fastHooks()
		o.Timeout = 200 * time.Millisecond
		runHooks(t, f.hooks, o)
		f.Pool("hp", "integer", 0, sitekit.Range("1", "10", true))
		rc.waitFor(t, 2)
		var d Delivery
		testkit.WaitFor(t, 30*time.Second, func() bool {
			page, _ := f.hooks.ListDeliveries(f.Ctx, hook.ID, DeliveryFilter{})
			d = page.Items[0]
			return d.State == models.DeliveryDelivered
		}, "the delivery to be delivered")
		if d.Attempts != 2 {
			t.Fatalf("delivery: %+v", d)
		}
	})
}

// Three processes deliver one webhook's queue: never two requests at
// once, revisions strictly increasing, every event once.
func TestWebhookOneInFlightAcrossProcesses(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			var as []*proc
			for _, db := range dbtest.Handles(t, dbtest.NewURL(t, d), 3) {
				as = append(as, newProc(db))
			}
			ctx := audit.WithActor(context.Background(), "test", "")
			rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { time.Sleep(2 * time.Millisecond) })
			if _, err := as[0].hooks.CreateWebhook(ctx, WebhookSpec{Name: "one", URL: rc.srv.URL, Secret: testSecret, Actions: []string{"allocation.create"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := as[0].a.CreatePool(ctx, allocator.PoolSpec{Name: "op", Type: "integer", Ranges: []allocator.RangeSpec{sitekit.Range("1", "1000", true)}}); err != nil {
				t.Fatal(err)
			}
			for _, a := range as {
				runFeed(t, a.feed)
				runHooks(t, a.hooks, fastHooks())
			}
			const n = 60
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					if _, _, err := as[i%3].a.Allocate(ctx, "op", sitekit.Machine(fmt.Sprint("o", i)), ""); err != nil {
						t.Error(err)
					}
				}(i)
			}
			wg.Wait()
			rc.waitFor(t, n)
			time.Sleep(100 * time.Millisecond)
			reqs := rc.waitFor(t, n)
			if len(reqs) != n || rc.maxIn.Load() != 1 {
				t.Fatalf("%d requests (want %d), at most %d at once (want 1)", len(reqs), n, rc.maxIn.Load())
			}
			for i := 1; i < len(reqs); i++ {
				if reqs[i].revision <= reqs[i-1].revision {
					t.Fatalf("request %d: revision %d after %d", i, reqs[i].revision, reqs[i-1].revision)
				}
			}
		})
	}
}

// A lease held by a process that died is taken over once it expires, and
// not before; the delivery it had in flight is sent again.
func TestWebhookExpiredLeaseTakenOver(t *testing.T) {
	t.Parallel()
	hookEach(t, func(t *testing.T, f *fnd) {
		rc := newReceiver(t, func(int, http.ResponseWriter, *http.Request) {})
		hook := f.mkHook(rc.srv.URL, []string{"*"}, nil)
		id, _ := strconv.ParseInt(hook.ID, 10, 64)
		until := time.Now().UTC().Add(700 * time.Millisecond)
		if err := f.DB.Model(&models.Webhook{}).Where("id = ?", id).Updates(map[string]any{"lease_owner": "killed", "lease_until": until}).Error; err != nil {
			t.Fatal(err)
		}
		runFeed(t, f.feed)
		runHooks(t, f.hooks, fastHooks())
		f.Pool("lp", "integer", 0, sitekit.Range("1", "10", true))
		rc.waitFor(t, 1)
		if time.Now().Before(until) {
			t.Fatal("delivered while another process held the lease")
		}
	})
}

// A lease this process still holds — its sender met a lost database and
// could not release it — does not hold back its deliveries until it
// expires (after a PostgreSQL failover they resumed only 30 s later).
func TestWebhookOwnLeaseTakenAtOnce(t *testing.T) {
	t.Parallel()
	hookEach(t, func(t *testing.T, f *fnd) {
		rc := newReceiver(t, func(int, http.ResponseWriter, *http.Request) {})
		hook := f.mkHook(rc.srv.URL, []string{"*"}, nil)
		id, _ := strconv.ParseInt(hook.ID, 10, 64)
		runFeed(t, f.feed)
		runHooks(t, f.hooks, fastHooks())
		until := time.Now().UTC().Add(time.Hour)
		if err := f.DB.Model(&models.Webhook{}).Where("id = ?", id).Updates(map[string]any{"lease_owner": f.hooks.engine.owner, "lease_until": until}).Error; err != nil {
			t.Fatal(err)
		}
		f.Pool("lp", "integer", 0, sitekit.Range("1", "10", true))
		rc.waitFor(t, 1)
	})
}

// Deleting a webhook while its delivery is in flight drops the queue and
// the result; the engine goes on with the other webhooks.
func TestWebhookDeletedWhileInFlight(t *testing.T) {
	t.Parallel()
	hookEach(t, func(t *testing.T, f *fnd) {
		entered, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
			once.Do(func() { close(entered); <-release })
		})
		rc2 := newReceiver(t, func(int, http.ResponseWriter, *http.Request) {})
		hook := f.mkHook(rc.srv.URL, []string{"*"}, nil)
		runFeed(t, f.feed)
		runHooks(t, f.hooks, fastHooks())
		f.Pool("dp", "integer", 0, sitekit.Range("1", "10", true))
		f.Allocate("dp", "m1", "")
		<-entered
		if err := f.hooks.DeleteWebhook(f.Ctx, hook.ID, nil); err != nil {
			t.Fatal(err)
		}
		close(release)
		f.mkHook(rc2.srv.URL, []string{"*"}, nil)
		f.Allocate("dp", "m2", "")
		rc2.waitFor(t, 1)
		if n := f.Count(&models.WebhookDelivery{}, "webhook_id = ?", hook.ID); n != 0 {
			t.Fatalf("%d deliveries left for the deleted webhook", n)
		}
		if got := len(rc.waitFor(t, 1)); got != 1 {
			t.Fatalf("deleted webhook got %d requests", got)
		}
	})
}

// A burst of events written by one statement (10,000 on PostgreSQL) is
// numbered in several passes and delivered in order, each once.
func TestWebhookBurstDeliveredInOrder(t *testing.T) {
	t.Parallel()
	hookEach(t, func(t *testing.T, f *fnd) {
		n := 2000
		if f.hooks.dialect == models.Postgres {
			n = 10000
		}
		rc := newReceiver(t, func(int, http.ResponseWriter, *http.Request) {})
		f.mkHook(rc.srv.URL, []string{"token.*"}, nil)
		if err := f.DB.Exec(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?)
INSERT INTO audit_events (at, actor, action, object_type, object_id, request_id) SELECT ?, 'test', 'token.create', 'token', CAST(i AS TEXT), '' FROM s`, n, time.Now().UTC()).Error; err != nil {
			t.Fatal(err)
		}
		runFeed(t, f.feed)
		start := time.Now()
		o := fastHooks()
		runHooks(t, f.hooks, o)
		reqs := rc.waitFor(t, n)
		t.Logf("%d deliveries in %s (%.0f/s)", n, time.Since(start), float64(n)/time.Since(start).Seconds())
		for i := 1; i < len(reqs); i++ {
			if reqs[i].revision <= reqs[i-1].revision {
				t.Fatalf("request %d: revision %d after %d", i, reqs[i].revision, reqs[i-1].revision)
			}
		}
	})
}

// A slow receiver holds only its own queue: a fast webhook gets every
// event while the slow one is still on its first.
func TestWebhookSlowReceiverDelaysOnlyItself(t *testing.T) {
	t.Parallel()
	hookEach(t, func(t *testing.T, f *fnd) {
		slow := newReceiver(t, func(int, http.ResponseWriter, *http.Request) { time.Sleep(700 * time.Millisecond) })
		fast := newReceiver(t, func(int, http.ResponseWriter, *http.Request) {})
		f.mkHook(slow.srv.URL, []string{"allocation.*"}, nil)
		f.mkHook(fast.srv.URL, []string{"allocation.*"}, nil)
		f.Pool("sp", "integer", 0, sitekit.Range("1", "100", true))
		runFeed(t, f.feed)
		runHooks(t, f.hooks, fastHooks())
		for i := 0; i < 5; i++ {
			f.Allocate("sp", fmt.Sprint("m", i), "")
		}
		fast.waitFor(t, 5)
		slow.mu.Lock()
		n := len(slow.reqs)
		slow.mu.Unlock()
		if n > 2 {
			t.Fatalf("the slow receiver got %d requests before the fast one had all 5", n)
		}
		if got := slow.waitFor(t, 5); got[4].revision <= got[0].revision {
			t.Fatal("slow receiver's order")
		}
	})
}

// A receiver's answer is stored truncated to 4 KiB, as valid text (NULs
// and invalid UTF-8 dropped or replaced: PostgreSQL refuses them), however
// large or binary it is.
func TestWebhookHugeBinaryAnswerStoredTruncated(t *testing.T) {
	t.Parallel()
	hookEach(t, func(t *testing.T, f *fnd) {
		rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte("\x00\xff\xfeé"))
			w.Write([]byte(strings.Repeat("x", 1<<20)))
		})
		hook := f.mkHook(rc.srv.URL, []string{"*"}, nil)
		runFeed(t, f.feed)
		runHooks(t, f.hooks, fastHooks())
		f.Pool("bp", "integer", 0, sitekit.Range("1", "10", true))
		rc.waitFor(t, 1)
		var d Delivery
		testkit.WaitFor(t, 30*time.Second, func() bool {
			page, _ := f.hooks.ListDeliveries(f.Ctx, hook.ID, DeliveryFilter{})
			d = page.Items[0]
			return d.State == models.DeliveryDelivered
		}, "the delivery to be delivered")
		if len(d.Response) > MaxResponseBody || len(d.Response) < MaxResponseBody-8 || strings.ContainsRune(d.Response, 0) || !strings.HasPrefix(d.Response, "\uFFFD") {
			t.Fatalf("stored answer: %d bytes, starts %q", len(d.Response), d.Response[:min(12, len(d.Response))])
		}
	})
}

// An action filter no event can match is refused, naming the field and
// the value, and nothing is stored: "allocate" or "allocation" (meant as
// allocation.*) would make a webhook that never fires.
func TestWebhookRefusesActionsMatchingNoEvent(t *testing.T) {
	t.Parallel()
	hookEach(t, func(t *testing.T, f *fnd) {
		for _, bad := range []string{"allocate", "allocation", "allocation.explode", "explode.*", "pool.range"} {
			_, err := f.hooks.CreateWebhook(f.Ctx, WebhookSpec{Name: "bad", URL: "https://example.com/h", Secret: testSecret, Actions: []string{"pool.create", bad}})
			var ke *fault.Error
			if !errors.As(err, &ke) || ke.Code != fault.CodeInvalid || ke.Field != "actions[1]" || !strings.Contains(ke.Message, strconv.Quote(bad)) {
				t.Errorf("actions %q: got %v, want invalid naming actions[1] and the value", bad, err)
			}
		}
		for _, good := range []string{"*", "allocation.*", "pool.range.*", "machine.force_delete", "webhook.update"} {
			if _, err := f.hooks.CreateWebhook(f.Ctx, WebhookSpec{Name: "good-" + strings.NewReplacer("*", "all", ".", "-").Replace(good), URL: "https://example.com/h", Secret: testSecret, Actions: []string{good}}); err != nil {
				t.Errorf("actions %q: %v", good, err)
			}
		}
		var n int64
		if err := f.DB.Model(&models.Webhook{}).Where("name = ?", "bad").Count(&n).Error; err != nil || n != 0 {
			t.Errorf("refused webhooks stored: %d (%v)", n, err)
		}
	})
}

// A redeliver asked while an attempt of the same delivery is in flight (the
// receiver has the body, its answer is not recorded yet) is not absorbed by
// that attempt's success: the delivery is sent once more, with its id.
func TestWebhookRedeliverDuringAttempt(t *testing.T) {
	t.Parallel()
	hookEach(t, func(t *testing.T, f *fnd) {
		entered, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
			once.Do(func() { close(entered); <-release })
		})
		hook := f.mkHook(rc.srv.URL, []string{"pool.*"}, nil)
		runFeed(t, f.feed)
		runHooks(t, f.hooks, fastHooks())
		f.Pool("rp", "integer", 0, sitekit.Range("1", "10", true))
		select {
		case <-entered:
		case <-time.After(time.Minute):
			t.Fatal("the first attempt never reached the receiver")
		}
		first := rc.waitFor(t, 1)[0]
		page, err := f.hooks.ListDeliveries(f.Ctx, hook.ID, DeliveryFilter{})
		if err != nil || len(page.Items) != 1 {
			t.Fatalf("deliveries: %v %+v", err, page)
		}
		if _, err := f.hooks.Redeliver(f.Ctx, hook.ID, page.Items[0].DeliveryID); err != nil {
			t.Fatal(err)
		}
		close(release)
		reqs := rc.waitFor(t, 2)
		if reqs[1].delivery != first.delivery {
			t.Fatalf("redelivered %q, want the delivery %q again", reqs[1].delivery, first.delivery)
		}
		var d models.WebhookDelivery
		testkit.WaitFor(t, 30*time.Second, func() bool {
			return f.DB.Where("delivery_id = ?", first.delivery).Take(&d).Error == nil && d.State == models.DeliveryDelivered
		}, "the delivery to be delivered")
		if d.Attempts != 2 || d.Redeliveries != 1 {
			t.Fatalf("after the redelivery: attempts %d, redeliveries %d; want 2 and 1", d.Attempts, d.Redeliveries)
		}
	})
}
