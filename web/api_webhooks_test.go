package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
)

const hookSecret = "webhook-secret-never-shown"

// Webhooks over REST: admin only (for reading too), the secret is
// write-only and appears in no answer or event, bad fields are 422
// naming them, a duplicate name 409, If-Match honoured.
func TestWebhookAPI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		e := newFeedEnv(t, db)
		recv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		defer recv.Close()
		var bodies []string
		call := func(method, path, token, body string, want int) []byte {
			t.Helper()
			code, b := e.call(t, method, path, token, body)
			bodies = append(bodies, string(b))
			if code != want {
				t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
			}
			return b
		}
		call("POST", "/api/v1/pools", e.admin, `{"name":"lo-ip","type":"ipv4","ranges":[{"first":"10.180.62.1","last":"10.180.62.9"}]}`, 201)
		create := `{"name":"vpc","url":"` + recv.URL + `/hook?token=abc","secret":"` + hookSecret + `","actions":["allocation.*"],"pools":["lo-ip"]}`
		call("POST", "/api/v1/webhooks", e.viewer, create, 403)
		req := httptest.NewRequest("POST", "/api/v1/webhooks", strings.NewReader(create))
		req.Header.Set("Authorization", "Bearer "+e.admin)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		if rec.Code != 201 || rec.Header().Get("ETag") != `"1"` {
			t.Fatalf("create: %d %s", rec.Code, rec.Body)
		}
		bodies = append(bodies, rec.Body.String())
		var w struct {
			ID        string   `json:"id"`
			URL       string   `json:"url"`
			Pools     []string `json:"pools"`
			Enabled   bool     `json:"enabled"`
			SecretSet bool     `json:"secret_set"`
		}
		json.Unmarshal(rec.Body.Bytes(), &w)
		if loc := rec.Header().Get("Location"); loc != "/api/v1/webhooks/"+w.ID || !w.Enabled || !w.SecretSet || len(w.Pools) != 1 {
			t.Fatalf("created %s at %s", rec.Body, loc)
		}
		call("GET", "/api/v1/webhooks/"+w.ID, e.admin, "", 200)
		call("GET", "/api/v1/webhooks", e.viewer, "", 403)
		call("GET", "/api/v1/webhooks", e.admin, "", 200)
		call("POST", "/api/v1/webhooks", e.admin, create, 409)
		for _, c := range []struct{ body, field string }{
			{`{"name":"x","url":"ftp://h/","secret":"` + hookSecret + `","actions":["*"]}`, "url"},
			{`{"name":"x","url":"http://u:p@h/","secret":"` + hookSecret + `","actions":["*"]}`, "url"},
			{`{"name":"x","url":"http://h/","secret":"short","actions":["*"]}`, "secret"},
			{`{"name":"x","url":"http://h/","secret":"` + hookSecret + `","actions":[]}`, "actions"},
			{`{"name":"x","url":"http://h/","secret":"` + hookSecret + `","actions":["*","allocation*"]}`, "actions[1]"},
			{`{"name":"x","url":"http://h/","secret":"` + hookSecret + `","actions":["allocation.%"]}`, "actions[0]"},
			{`{"name":"x","url":"http://h/","secret":"` + hookSecret + `","actions":["*"],"pools":[]}`, "pools"},
			{`{"name":"x","url":"http://h/","secret":"` + hookSecret + `","actions":["*"],"pools":["a b"]}`, "pools[0]"},
			{`{"name":"x","url":"http://h/","secret":"` + hookSecret + `","actions":["*"],"pools":["lo-ip","no-such-pool"]}`, "pools[1]"},
			{`{"name":"x y","url":"http://h/","secret":"` + hookSecret + `","actions":["*"]}`, "name"},
			{`{"url":"http://h/","secret":"` + hookSecret + `","actions":["*"]}`, "name"},
			{`{"name":"x","url":"http://h/","actions":["*"]}`, "secret"},
			{`{"name":"x","url":"http://h/","secret":"` + hookSecret + `","actions":["*"],"enabeld":true}`, "enabeld"},
		} {
			code, b := e.call(t, "POST", "/api/v1/webhooks", e.admin, c.body)
			var eb struct {
				Error struct{ Code, Field string }
			}
			json.Unmarshal(b, &eb)
			if code != 422 || eb.Error.Field != c.field {
				t.Errorf("%s: %d %s, want 422 naming %s", c.body, code, b, c.field)
			}
		}
		// A pool that does not exist is refused on PATCH too, naming it,
		// and the webhook is left as it was.
		if code, b := e.call(t, "PATCH", "/api/v1/webhooks/"+w.ID, e.admin, `{"pools":["no-such-pool"],"enabled":false}`); code != 422 ||
			!strings.Contains(string(b), `"field":"pools[0]"`) || !strings.Contains(string(b), `\"no-such-pool\"`) {
			t.Errorf("PATCH to an unknown pool: %d %s, want 422 naming pools[0] and the value", code, b)
		}
		if b := call("GET", "/api/v1/webhooks/"+w.ID, e.admin, "", 200); !strings.Contains(string(b), `"pools":["lo-ip"]`) || !strings.Contains(string(b), `"version":1`) {
			t.Errorf("a refused PATCH changed the webhook: %s", b)
		}
		// PATCH: If-Match stale is 412; pools null means every pool.
		req = httptest.NewRequest("PATCH", "/api/v1/webhooks/"+w.ID, strings.NewReader(`{"enabled":false}`))
		req.Header.Set("Authorization", "Bearer "+e.admin)
		req.Header.Set("If-Match", `"7"`)
		rec = httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		if rec.Code != 412 {
			t.Fatalf("stale If-Match: %d %s", rec.Code, rec.Body)
		}
		b := call("PATCH", "/api/v1/webhooks/"+w.ID, e.admin, `{"pools":null,"secret":"another-secret-0123456789"}`, 200)
		json.Unmarshal(b, &w)
		if w.Pools != nil || !w.Enabled {
			t.Fatalf("patched: %s", b)
		}
		call("GET", "/api/v1/webhooks/"+w.ID+"/deliveries", e.admin, "", 200)
		call("GET", "/api/v1/webhooks/"+w.ID+"/deliveries?state=lost", e.admin, "", 422)
		call("POST", "/api/v1/webhooks/"+w.ID+"/deliveries/nope:redeliver", e.admin, "", 404)
		call("GET", "/api/v1/webhooks/999", e.admin, "", 404)
		call("GET", "/api/v1/webhooks/abc", e.admin, "", 404)
		waitNumbered(t, e.feed)
		call("GET", "/api/v1/events?after=0&object_type=webhook", e.viewer, "", 200)
		call("GET", "/api/v1/events", e.viewer, "", 200)
		call("DELETE", "/api/v1/webhooks/"+w.ID, e.admin, "", 204)
		call("GET", "/api/v1/webhooks/"+w.ID, e.admin, "", 404)
		for _, b := range bodies {
			for _, s := range []string{hookSecret, "another-secret", "token=abc"} {
				if strings.Contains(b, s) && !strings.Contains(b, `"url":`) {
					t.Fatalf("an answer shows %q: %s", s, b)
				}
				if strings.Contains(b, s) && s != "token=abc" {
					t.Fatalf("an answer shows the secret: %s", b)
				}
			}
		}
		var events []string
		db.Raw(`SELECT COALESCE(before_json, '') || COALESCE(after_json, '') FROM audit_events WHERE object_type = 'webhook'`).Scan(&events)
		if len(events) < 3 {
			t.Fatalf("%d webhook events", len(events))
		}
		for _, ev := range events {
			if strings.Contains(ev, hookSecret) || strings.Contains(ev, "another-secret") || strings.Contains(ev, "token=abc") || strings.Contains(ev, "/hook") {
				t.Fatalf("an event shows the secret or the URL's path: %s", ev)
			}
		}
	})
}
