package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/webhook"
)

// The webhooks console page (admin): the nav link only for admins, a
// refused form keeps its fields (not the secret) with the message beside
// the field, the delivery log shows attempts and redeliver queues a
// delivery again; the secret is on no page.
func TestConsoleWebhooks(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		env := newSecEnv(t, db)
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
		defer recv.Close()
		ctx, cancel := contextWithCancel()
		defer cancel()
		fd := env.feed.RunFeed(ctx, feed.FeedOptions{Poll: 20 * time.Millisecond})
		hd := env.hooks.Run(ctx, webhook.WebhookOptions{BackoffBase: time.Hour, Poll: 20 * time.Millisecond})
		defer func() { cancel(); <-fd; <-hd }()
		cookies, csrf := env.login(env.tok.admin)
		page := env.do(secReq{method: "GET", path: "/", cookies: cookies})
		if !strings.Contains(page.Body.String(), `href="/webhooks"`) {
			t.Fatal("admin nav lacks Webhooks")
		}
		vc, _ := env.login(env.tok.viewer)
		if strings.Contains(env.do(secReq{method: "GET", path: "/", cookies: vc}).Body.String(), `href="/webhooks"`) {
			t.Fatal("viewer nav shows Webhooks")
		}
		if rec := env.do(secReq{method: "GET", path: "/webhooks", cookies: vc}); rec.Code != 403 {
			t.Fatalf("viewer GET /webhooks: %d", rec.Code)
		}
		const secret = "console-secret-0123456789"
		post := func(path string, form url.Values) *httptest.ResponseRecorder {
			form.Set("csrf_token", csrf)
			return env.do(secReq{method: "POST", path: path, body: form.Encode(), contentType: "application/x-www-form-urlencoded", cookies: cookies})
		}
		rec := post("/webhooks", url.Values{"name": {"ctl"}, "url": {"ftp://nope/"}, "secret": {secret}, "actions": {"allocation.*"}, "enabled": {"true"}})
		body := rec.Body.String()
		if rec.Code != 422 || !strings.Contains(body, `data-field="url"`) || !strings.Contains(body, `value="ctl"`) || strings.Contains(body, secret) {
			t.Fatalf("refused form: %d %s", rec.Code, body)
		}
		// A pool filter naming a pool that does not exist is refused beside
		// the pools field, naming the value; nothing is stored.
		rec = post("/webhooks", url.Values{"name": {"ctl"}, "url": {recv.URL}, "secret": {secret}, "actions": {"allocation.*"}, "pools": {"no-such-pool"}, "enabled": {"true"}})
		body = rec.Body.String()
		if rec.Code != 422 || !strings.Contains(body, `data-field="pools"`) || !strings.Contains(body, "no-such-pool") || strings.Contains(body, "Webhook ctl created") {
			t.Fatalf("unknown pool: %d %s", rec.Code, body)
		}
		if ws, err := env.hooks.ListWebhooks(context.Background()); err != nil || len(ws) != 0 {
			t.Fatalf("a refused webhook was stored: %v %v", ws, err)
		}
		rec = post("/webhooks", url.Values{"name": {"ctl"}, "url": {recv.URL}, "secret": {secret}, "actions": {"pool.*, allocation.*"}, "enabled": {"true"}})
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("create: %d %s", rec.Code, rec.Body)
		}
		hookURL := rec.Header().Get("Location")
		if _, err := env.a.CreatePool(audit.WithActor(ctx, "test", ""), allocator.PoolSpec{Name: "cw", Type: "integer", Ranges: []allocator.RangeSpec{{First: "1", Last: "3"}}}); err != nil {
			t.Fatal(err)
		}
		var view string
		deadline := time.Now().Add(10 * time.Second)
		for {
			view = env.do(secReq{method: "GET", path: hookURL, cookies: cookies}).Body.String()
			if strings.Contains(view, "answered 503") || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !strings.Contains(view, "answered 503") || !strings.Contains(view, "pool.create") || strings.Contains(view, secret) {
			t.Fatalf("delivery log: %s", view)
		}
		hooks, _ := env.hooks.ListWebhooks(ctx)
		page1, _ := env.hooks.ListDeliveries(ctx, hooks[0].ID, webhook.DeliveryFilter{})
		rec = post(hookURL+"/redeliver", url.Values{"delivery": {page1.Items[0].DeliveryID}})
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("redeliver: %d %s", rec.Code, rec.Body)
		}
		rec = post(hookURL+"/delete", url.Values{})
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/webhooks" {
			t.Fatalf("delete: %d", rec.Code)
		}
		if list := env.do(secReq{method: "GET", path: "/webhooks", cookies: cookies}).Body.String(); strings.Contains(list, ">ctl<") {
			t.Fatal("deleted webhook still listed")
		}
	})
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
