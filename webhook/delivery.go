package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/buildinfo"
	"github.com/ipledger/ipledger/models"
)

// The delivery engine POSTs each queued delivery to its webhook
// (docs/feed.md). Per webhook, one delivery is in flight at a time across
// every server process: a process sends only while it holds the
// webhook's lease (lease_owner, lease_until on its row), renews it before
// each attempt, and sends the oldest pending delivery first, so a
// webhook's events arrive in revision order. A process killed mid-way
// leaves its lease to expire; another process takes the webhook over and
// sends the same delivery again (same X-Ipledger-Delivery): at least
// once.

// WebhookOptions configure RunWebhooks; zero fields take the defaults.
type WebhookOptions struct {
	// Timeout of one attempt, answer included (10s).
	Timeout time.Duration
	// BackoffBase is the wait after the first failed attempt, doubled
	// after each further one (1s) up to BackoffMax (10m).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// GiveUpAfter: a delivery still failing this long after it was queued
	// is marked failed (24h).
	GiveUpAfter time.Duration
	// Lease is how long a process holds a webhook between renewals (30s;
	// more than Timeout, so a live sender never loses it mid-attempt).
	Lease time.Duration
	// Poll is the fallback interval for due retries and other processes'
	// queues (1s).
	Poll time.Duration
	// Concurrency bounds the webhooks this process sends to at once (8).
	Concurrency int
	// Transport, when set, replaces the HTTP transport (tests).
	Transport http.RoundTripper
}

func (o WebhookOptions) withDefaults() WebhookOptions {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Timeout, 10*time.Second)
	def(&o.BackoffBase, time.Second)
	def(&o.BackoffMax, 10*time.Minute)
	def(&o.GiveUpAfter, 24*time.Hour)
	def(&o.Lease, 30*time.Second)
	def(&o.Poll, time.Second)
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	return o
}

// MaxResponseBody bounds the part of a receiver's answer that is stored.
const MaxResponseBody = 4096

type engine struct {
	mu       sync.Mutex
	o        *WebhookOptions
	owner    string
	active   map[int64]bool
	client   *http.Client
	finished chan struct{}
	// onResult counts attempts by outcome (metrics): "delivered",
	// "retry", "failed".
	onResult func(outcome string)
}

func (e *engine) opts() WebhookOptions {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.o == nil {
		return WebhookOptions{}.withDefaults()
	}
	return *e.o
}

// SetOnDelivery sets the hook called after each delivery attempt with its
// outcome: "delivered", "retry" or "failed" (metrics); set it before
// RunWebhooks.
func (wh *Service) SetOnDelivery(fn func(outcome string)) { wh.engine.onResult = fn }

// Run delivers queued webhook deliveries until ctx ends. It
// returns at once; done is closed when every attempt in flight ended.
func (wh *Service) Run(ctx context.Context, opts WebhookOptions) (done <-chan struct{}) {
	o := opts.withDefaults()
	var b [8]byte
	_, _ = rand.Read(b[:])
	e := &wh.engine
	e.mu.Lock()
	e.o = &o
	e.owner = hex.EncodeToString(b[:])
	e.active = map[int64]bool{}
	e.finished = make(chan struct{}, 1)
	tr := o.Transport
	if tr == nil {
		tr = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second, ResponseHeaderTimeout: o.Timeout}
	}
	e.client = &http.Client{Transport: tr, Timeout: o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	e.mu.Unlock()
	d := make(chan struct{})
	go func() {
		defer close(d)
		wh.dispatch(ctx)
	}()
	return d
}

type dueHook struct {
	ID     int64
	NextAt time.Time
}

// dispatch starts a sender for each webhook whose oldest pending delivery
// is due and whose lease is free or already this process's (a sender that
// lost the database returns without releasing it: the lease must not
// keep the process's own deliveries waiting until it expires), and sleeps until the next due time, a
// new delivery, a sender's end or the poll.
func (wh *Service) dispatch(ctx context.Context) {
	e := &wh.engine
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		now := wh.now()
		wake := now.Add(e.o.Poll)
		var due []dueHook
		err := wh.read(ctx, func(db *gorm.DB) error {
			return db.Raw(`SELECT w.id AS id, h.next_attempt_at AS next_at FROM webhooks w
JOIN webhook_deliveries h ON h.webhook_id = w.id AND h.state = 'pending'
 AND h.revision = (SELECT MIN(d.revision) FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.state = 'pending')
WHERE w.enabled AND (w.lease_until IS NULL OR w.lease_until < ? OR w.lease_owner = ?)`, now, e.owner).Scan(&due).Error
		})
		if err != nil && ctx.Err() == nil {
			wh.log.Warn("webhook dispatcher: reading the queues failed", "error", err)
		}
		for _, h := range due {
			if h.NextAt.After(now) {
				if h.NextAt.Before(wake) {
					wake = h.NextAt
				}
				continue
			}
			e.mu.Lock()
			busy := e.active[h.ID] || len(e.active) >= e.o.Concurrency
			e.mu.Unlock()
			if busy || !wh.takeLease(ctx, h.ID) {
				continue
			}
			e.mu.Lock()
			e.active[h.ID] = true
			e.mu.Unlock()
			wg.Add(1)
			go func(id int64) {
				defer wg.Done()
				wh.sendQueue(ctx, id)
				e.mu.Lock()
				delete(e.active, id)
				e.mu.Unlock()
				signal(e.finished)
			}(h.ID)
		}
		t := time.NewTimer(max(time.Until(wake), time.Millisecond))
		select {
		case <-ctx.Done():
		case <-wh.wake:
		case <-e.finished:
		case <-t.C:
		}
		t.Stop()
	}
}

func (wh *Service) takeLease(ctx context.Context, id int64) bool {
	now := wh.now()
	e := &wh.engine
	res := wh.db.WithContext(ctx).Model(&models.Webhook{}).
		Where("id = ? AND enabled AND (lease_until IS NULL OR lease_until < ? OR lease_owner = ?)", id, now, e.owner).
		Updates(map[string]any{"lease_owner": e.owner, "lease_until": now.Add(e.o.Lease)})
	return res.Error == nil && res.RowsAffected == 1
}

func (wh *Service) renewLease(ctx context.Context, id int64) bool {
	now := wh.now()
	e := &wh.engine
	res := wh.db.WithContext(ctx).Model(&models.Webhook{}).
		Where("id = ? AND enabled AND lease_owner = ?", id, e.owner).
		Update("lease_until", now.Add(e.o.Lease))
	return res.Error == nil && res.RowsAffected == 1
}

func (wh *Service) releaseLease(id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wh.db.WithContext(ctx).Model(&models.Webhook{}).Where("id = ? AND lease_owner = ?", id, wh.engine.owner).
		Updates(map[string]any{"lease_owner": nil, "lease_until": nil})
}

// queued is a webhook's oldest pending delivery with what sending it needs.
type queued struct {
	models.WebhookDelivery
	URL    string
	Secret string
}

// sendQueue sends one webhook's pending deliveries in revision order while
// it holds the lease, until the queue is empty or its head is not due. It
// reads the queue a page at a time and renews the lease every third of
// its duration (each attempt is shorter than that), so a delivery costs
// one write: its result.
func (wh *Service) sendQueue(ctx context.Context, id int64) {
	defer wh.releaseLease(id)
	var renewed time.Time
	lease := wh.engine.o.Lease
	for ctx.Err() == nil {
		var page []queued
		err := wh.read(ctx, func(db *gorm.DB) error {
			return db.Raw(`SELECT d.*, w.url AS url, w.secret AS secret FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
WHERE d.webhook_id = ? AND d.state = 'pending' ORDER BY d.revision LIMIT 50`, id).Scan(&page).Error
		})
		if err != nil || len(page) == 0 {
			return
		}
		events := map[int64]*models.AuditEvent{}
		ids := make([]int64, len(page))
		for i := range page {
			ids[i] = page[i].EventID
		}
		var rows []models.AuditEvent
		if err := wh.read(ctx, func(db *gorm.DB) error { return db.Where("id IN ?", ids).Find(&rows).Error }); err != nil {
			return
		}
		for i := range rows {
			events[rows[i].ID] = &rows[i]
		}
		for i := range page {
			q := &page[i]
			if q.NextAttemptAt == nil || q.NextAttemptAt.After(wh.now()) {
				return // the dispatcher wakes at its time
			}
			if time.Since(renewed) > lease/3 {
				if !wh.renewLease(ctx, id) {
					return // deleted, disabled, or taken over
				}
				renewed = time.Now()
			}
			ev, ok := events[q.EventID]
			if !ok {
				return
			}
			body, err := json.Marshal(audit.EventOut(ev))
			if err != nil {
				return
			}
			status, answer, sendErr := wh.engine.send(ctx, q, body)
			if ctx.Err() != nil {
				return // shutting down: the attempt is not counted, it is made again
			}
			if !wh.recordAttempt(ctx, q, status, answer, sendErr) {
				return
			}
			if sendErr != nil {
				break // the head waits for its retry: read the queue again
			}
		}
	}
}

// Signature is the X-Ipledger-Signature header of body for secret.
func Signature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (e *engine) send(ctx context.Context, q *queued, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, q.URL, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", buildinfo.UserAgent("ipledger-webhook"))
	h.Set("X-Ipledger-Event", q.Action)
	h.Set("X-Ipledger-Revision", strconv.FormatInt(q.Revision, 10))
	h.Set("X-Ipledger-Delivery", q.DeliveryID)
	h.Set("X-Ipledger-Signature", Signature(q.Secret, body))
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	answer := storableText(b)
	if err != nil {
		return resp.StatusCode, answer, err
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return resp.StatusCode, answer, fmt.Errorf("answered %d (redirect to %q, not followed)", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, answer, fmt.Errorf("answered %d", resp.StatusCode)
	}
	return resp.StatusCode, answer, nil
}

// storableText keeps valid UTF-8 without NULs (both databases store it as
// text), at most MaxResponseBody bytes.
func storableText(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	for len(s) > MaxResponseBody {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

// attemptError is the stored text of a failed attempt: the transport's
// reason without the URL (which may carry a token in its path).
func attemptError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout") {
		return "timed out"
	}
	return storableText([]byte(err.Error()))
}

// recordAttempt stores an attempt's result while the lease is still ours
// (a webhook deleted meanwhile drops it) and tells whether it did.
func (wh *Service) recordAttempt(ctx context.Context, q *queued, status int, answer string, sendErr error) bool {
	e := &wh.engine
	now := wh.now()
	up := map[string]any{"attempts": gorm.Expr("attempts + 1"), "response_body": answer}
	if status > 0 {
		up["status_code"] = status
	} else {
		up["status_code"] = nil
	}
	outcome := "delivered"
	switch {
	case sendErr == nil:
		up["state"], up["error"], up["delivered_at"], up["next_attempt_at"] = models.DeliveryDelivered, "", now, nil
	case !now.Before(q.GiveUpAt):
		outcome = "failed"
		up["state"], up["error"], up["next_attempt_at"] = models.DeliveryFailed, attemptError(sendErr), nil
	default:
		outcome = "retry"
		up["error"], up["next_attempt_at"] = attemptError(sendErr), now.Add(backoff(e.o.BackoffBase, e.o.BackoffMax, q.Attempts+1))
	}
	leased := "id = ? AND state = ? AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = ? AND w.lease_owner = ?)"
	res := wh.db.WithContext(ctx).Model(&models.WebhookDelivery{}).
		Where(leased+" AND redeliveries = ?", q.ID, models.DeliveryPending, q.WebhookID, e.owner, q.Redeliveries).
		Updates(up)
	if res.Error != nil {
		wh.log.Warn("webhook delivery: recording the attempt failed; it will be made again", "webhook_id", q.WebhookID, "delivery_id", q.DeliveryID, "error", res.Error)
		return false
	}
	if res.RowsAffected != 1 {
		// A redeliver was asked while this attempt was in flight: the
		// attempt is counted, but the delivery stays pending, due when the
		// redeliver said, and is made again.
		wh.db.WithContext(ctx).Model(&models.WebhookDelivery{}).
			Where(leased+" AND redeliveries <> ?", q.ID, models.DeliveryPending, q.WebhookID, e.owner, q.Redeliveries).
			Updates(map[string]any{"attempts": gorm.Expr("attempts + 1"), "status_code": up["status_code"], "response_body": answer})
		return false
	}
	if e.onResult != nil {
		e.onResult(outcome)
	}
	return true
}

// backoff is the wait after the n-th failed attempt: base, doubling, at
// most limit.
func backoff(base, limit time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
