package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/web"
)

// headerTransport adds fixed headers to every request: a trusted proxy
// in front of the server.
type headerTransport struct {
	base http.RoundTripper
	hdr  http.Header
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.hdr {
		r.Header[k] = v
	}
	return h.base.RoundTrip(r)
}

// proxiedBrowser is a browser whose requests reach the server through a
// trusted proxy on the loopback address that names user with groups; its
// CSRF token is the one the dashboard gives that person.
func proxiedBrowser(t *testing.T, s *consoleSite, user, groups string) *browser {
	t.Helper()
	b := s.anonymous()
	b.c.Transport = headerTransport{http.DefaultTransport, http.Header{"X-Forwarded-User": {user}, "X-Forwarded-Groups": {groups}}}
	body := expect(t, b.get("/"), http.StatusOK, "user:"+user)
	// The page's htmx headers carry it (the dashboard has no form: behind
	// a proxy without a sign-out URL not even the Sign out button).
	m := regexp.MustCompile(`X-CSRF-Token&#34;:&#34;([^&]+)&#34;`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on the proxied dashboard:\n%s", clip(body))
	}
	b.csrf = m[1]
	return b
}

// eventJSON is an event as the API's JSON has it, every member kept, so
// that an absent actor_role can be told from an empty one.
type eventJSON map[string]any

func (e eventJSON) str(k string) string { s, _ := e[k].(string); return s }

// wantActor checks that ev was made by actor with role, as the JSON of
// where shows it.
func wantActor(t *testing.T, where string, ev eventJSON, actor, role string) {
	t.Helper()
	if ev.str("actor") != actor || ev.str("actor_role") != role {
		t.Fatalf("%s: actor %q actor_role %v, want %s with %s (event %v)", where, ev.str("actor"), ev["actor_role"], actor, role, ev)
	}
}

func decodePage(t *testing.T, body string) (items []eventJSON, nextAfter string) {
	t.Helper()
	var p struct {
		Items     []eventJSON  `json:"items"`
		NextAfter *json.Number `json:"next_after"`
	}
	d := json.NewDecoder(strings.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&p); err != nil {
		t.Fatalf("event page %s: %v", clip(body), err)
	}
	if p.NextAfter != nil {
		nextAfter = p.NextAfter.String()
	}
	return p.Items, nextAfter
}

// TestActorRoleInEventJSON: the role a person acted with reaches every
// place the actor does. A console edit by a person signed in through
// single sign-on and one by a person behind the trusted proxy show
// user:NAME and the role in the REST event list, in a long poll of the
// change feed and in a webhook delivery's body; events of a system actor
// carry no actor_role member.
func TestActorRoleInEventJSON(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		trusted, err := auth.ParseCIDRs("127.0.0.1, ::1")
		if err != nil {
			t.Fatal(err)
		}
		s := newSSOSiteOpts(t, db, ssoOptions{inIDToken: true, feed: true, id: web.Identity{OIDCName: "Test IdP", Proxy: &auth.Proxy{
			UserHeader: "X-Forwarded-User", GroupsHeader: "X-Forwarded-Groups", Trusted: trusted,
			Roles: auth.NewRoleMap([]string{"ipam-admins"}, []string{"ipam-operators"}, []string{"noc"})}}})
		admin := s.tokens[auth.RoleAdmin]

		var mu sync.Mutex
		var delivered []eventJSON
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var ev eventJSON
			b, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Errorf("webhook body %s: %v", b, err)
			}
			mu.Lock()
			delivered = append(delivered, ev)
			mu.Unlock()
		}))
		t.Cleanup(recv.Close)
		if res, body := apiCall(t, s.srv.URL, "POST", "/api/v1/webhooks", admin,
			`{"name":"roles","url":"`+recv.URL+`","secret":"role-hook-secret-0123456789","actions":["pool.create","expected_machine.create"]}`); res.StatusCode != http.StatusCreated {
			t.Fatalf("create webhook: %d %s", res.StatusCode, body)
		}

		// longPoll waits on the feed for the first event of action after
		// revision after.
		longPoll := func(after, action string) <-chan string {
			out := make(chan string, 1)
			go func() {
				res, body := apiCall(t, s.srv.URL, "GET", "/api/v1/events?after="+after+"&action="+action+"&wait=20s", admin, "")
				if res.StatusCode != http.StatusOK {
					t.Errorf("long poll: %d %s", res.StatusCode, body)
				}
				out <- body
			}()
			return out
		}
		polled := func(ch <-chan string) ([]eventJSON, string) {
			t.Helper()
			select {
			case body := <-ch:
				items, next := decodePage(t, body)
				if len(items) != 1 {
					t.Fatalf("long poll: %s", clip(body))
				}
				return items, next
			case <-time.After(30 * time.Second):
				t.Fatal("the long poll did not answer")
			}
			return nil, ""
		}

		// alice (single sign-on, admin) creates a pool in the console.
		poll := longPoll("0", "pool.create")
		time.Sleep(100 * time.Millisecond)
		alice := newJarBrowser(s.consoleSite)
		s.finish(alice, s.signIn(alice, "", "alice", "alice-pw"))
		if res := alice.post("/pools", url.Values{"name": {"role-vlans"}, "type": {"integer"}, "first": {"100"}, "last": {"199"}}, true); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("alice creates a pool: %d %s", res.StatusCode, clip(readBody(t, res)))
		}
		items, next := polled(poll)
		wantActor(t, "feed", items[0], "user:alice", "admin")

		// carol (trusted proxy, operator) declares an ExpectedMachine in
		// the console.
		poll = longPoll(next, "expected_machine.create")
		time.Sleep(100 * time.Millisecond)
		carol := proxiedBrowser(t, s.consoleSite, "carol", "staff,ipam-operators")
		if res := carol.post("/expected-machines", url.Values{"mac": {"1a:1b:1c:1d:1e:2f"}, "username": {"root"}, "password": {"role-test-pw"},
			"chassis": {"SN-ROLE"}, "name": {"rack1-u1"}}, true); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("carol saves an ExpectedMachine: %d %s", res.StatusCode, clip(readBody(t, res)))
		}
		items, _ = polled(poll)
		wantActor(t, "feed", items[0], "user:carol", "operator")

		// The REST event list (newest first, the audit log).
		for action, who := range map[string][2]string{"pool.create": {"user:alice", "admin"}, "expected_machine.create": {"user:carol", "operator"}} {
			res, body := apiCall(t, s.srv.URL, "GET", "/api/v1/events?action="+action, admin, "")
			items, _ := decodePage(t, body)
			if res.StatusCode != http.StatusOK || len(items) != 1 {
				t.Fatalf("GET /api/v1/events?action=%s: %d %s", action, res.StatusCode, clip(body))
			}
			wantActor(t, "REST events", items[0], who[0], who[1])
		}
		_, body := apiCall(t, s.srv.URL, "GET", "/api/v1/events?actor=system", admin, "")
		sys, _ := decodePage(t, body)
		if len(sys) == 0 {
			t.Fatalf("no event of the system actor to look at: %s", clip(body))
		}
		for _, ev := range sys {
			if _, ok := ev["actor_role"]; ok {
				t.Fatalf("an event of the system actor carries actor_role: %v", ev)
			}
		}

		// Each webhook delivery's body.
		testkit.WaitFor(t, 20*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(delivered) >= 2
		}, "two webhook deliveries")
		mu.Lock()
		defer mu.Unlock()
		byAction := map[string]eventJSON{}
		for _, ev := range delivered {
			byAction[ev.str("action")] = ev
		}
		wantActor(t, "webhook", byAction["pool.create"], "user:alice", "admin")
		wantActor(t, "webhook", byAction["expected_machine.create"], "user:carol", "operator")
	})
}
