package upgrade_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/dbcheck"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/internal/testkit/serverkit"
	"github.com/ipledger/ipledger/internal/upgrade"
	"github.com/ipledger/ipledger/webhook"
)

// upgradeChecks runs today's server over the migrated fixture database db
// and holds it to the old build's answers f.
func upgradeChecks(t *testing.T, f upgrade.Fixture, db *gorm.DB) {
	admin := tokenOf(t, f, "admin")
	s := serverkit.Start(t, db, serverkit.Options{Admin: admin.Value})
	ctx := context.Background()
	check := func(when string) {
		t.Helper()
		res, err := dbcheck.Check(ctx, s.A.DB())
		if err != nil {
			t.Fatalf("check %s: %v", when, err)
		}
		if !res.OK() {
			t.Fatalf("check %s finds: %+v", when, res.Findings)
		}
	}
	check("after the upgrade")

	c := upgrade.Client{Base: s.URL, Token: admin.Value}
	for _, path := range sortedPaths(f.Lists) {
		got, err := c.Walk(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		for _, d := range upgrade.Diff(f.Lists[path], got) {
			t.Errorf("GET %s %s", path, d)
		}
	}

	for _, tok := range f.Tokens {
		got, err := s.Auth.Authenticate(ctx, tok.Value)
		if err != nil || got.Name != tok.Name || string(got.Role) != tok.Role {
			t.Errorf("token %s (%s) after the upgrade: %+v, %v", tok.Name, tok.Role, got, err)
		}
		st, _, err := upgrade.Client{Base: s.URL, Token: tok.Value}.Do(http.MethodGet, "pools", nil)
		if err != nil || st != http.StatusOK {
			t.Errorf("GET pools with token %s: %d, %v", tok.Name, st, err)
		}
	}

	sessionsCarried(t, f, s.URL)
	actorRolesCarried(t, f, c)

	clients := map[string]upgrade.Client{}
	for _, tok := range f.Tokens {
		clients[tok.Role] = upgrade.Client{Base: s.URL, Token: tok.Value}
	}
	for _, e := range f.Next {
		who := clients["operator"]
		if e.Method == http.MethodGet || strings.HasSuffix(e.Path, ":unquarantine") {
			who = clients["admin"]
		}
		var (
			st  int
			got []byte
			err error
		)
		if e.Method == http.MethodGet {
			st = http.StatusOK
			got, err = who.Walk(e.Path)
		} else {
			st, got, err = who.Do(e.Method, e.Path, e.Body)
		}
		if err != nil {
			t.Errorf("%s %s: %v", e.Method, e.Path, err)
			continue
		}
		if st != e.Status {
			t.Errorf("%s %s: %d %s; the old build answered %d %s", e.Method, e.Path, st, got, e.Status, e.Answer)
			continue
		}
		if len(e.Answer) == 0 {
			continue
		}
		skip := volatile
		if e.Status == http.StatusCreated {
			skip = append(skip, "id") // a new object's id is the server's choice
		}
		for _, d := range upgrade.Diff(e.Answer, got, skip...) {
			t.Errorf("%s %s %s", e.Method, e.Path, d)
		}
	}
	check("after new writes")
	feedContinues(t, f, db)
	check("after the feed numbered the new events")
}

// feedContinues numbers the events written since the upgrade, as the
// feed's sequencer does, queueing them for the webhooks that match, and
// requires the feed to hold every event in id order with revisions that
// only grow: the new ones after the old.
func feedContinues(t *testing.T, f upgrade.Fixture, db *gorm.DB) {
	ctx := context.Background()
	fd := feed.New(db, feed.Options{})
	fd.SetDeliveries(webhook.New(db, webhook.Options{}))
	for {
		n, err := fd.SequenceOnce(ctx)
		if err != nil {
			t.Fatalf("sequence the new events: %v", err)
		}
		if n == 0 {
			break
		}
	}
	var old []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(f.Lists["events"], &old); err != nil {
		t.Fatalf("recorded events: %v", err)
	}
	var last int64
	n := 0
	for {
		page, err := fd.ReadFeed(ctx, feed.FeedQuery{After: last, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) == 0 {
			break
		}
		for _, e := range page.Items {
			if e.Revision == nil || *e.Revision <= last {
				t.Fatalf("feed event %d (id %s) has revision %v after %d", n, e.ID, e.Revision, last)
			}
			last = *e.Revision
			n++
		}
	}
	if n <= len(old) {
		t.Fatalf("the feed holds %d events; the old build had %d, and new writes were made since", n, len(old))
	}
}

// sessionsCarried requires every console session the old build opened to
// sign its holder in now with the same role, until the time the old build
// gave it, and to be refused after (or at once, for the cookie-only
// sessions of builds before schema 9).
func sessionsCarried(t *testing.T, f upgrade.Fixture, base string) {
	rank := map[string]int{"viewer": 1, "operator": 2, "admin": 3}
	for _, ss := range f.Sessions {
		left := time.Until(ss.Expires)
		if left > -2*time.Minute && left < 2*time.Minute {
			continue // expiring as the test runs: either answer is right
		}
		valid := left > 0
		if ss.Kind == "token" && f.Schema < 9 {
			// Before migration 9 a console session lived in its signed
			// cookie alone; since then it is a row that sign-out deletes,
			// and a cookie without its row is refused. Sign-ins made by
			// such a build end at the upgrade (docs/operations.md).
			valid = false
		}
		for _, r := range []struct{ path, role string }{{"pools", "viewer"}, {"webhooks", "admin"}} {
			req, err := http.NewRequest(http.MethodGet, base+"/api/v1/"+r.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Cookie", ss.Cookie)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			want := http.StatusUnauthorized
			switch {
			case valid && rank[ss.Role] >= rank[r.role]:
				want = http.StatusOK
			case valid:
				want = http.StatusForbidden
			}
			if res.StatusCode != want {
				t.Errorf("GET %s with the %s session of %s (%s, until %s): %d, want %d", r.path, ss.Kind, ss.Name, ss.Role, ss.Expires, res.StatusCode, want)
			}
		}
	}
}

// actorRolesCarried requires each token's audit events to show the
// token's role where the old build stored it (schema 21 on), and none
// where it did not.
func actorRolesCarried(t *testing.T, f upgrade.Fixture, c upgrade.Client) {
	roles := map[string]string{}
	for _, tok := range f.Tokens {
		roles["token:"+tok.Name] = tok.Role
	}
	raw, err := c.Walk("events")
	if err != nil {
		t.Fatal(err)
	}
	var events []struct {
		ID        string `json:"id"`
		Actor     string `json:"actor"`
		ActorRole string `json:"actor_role"`
	}
	if err := json.Unmarshal(raw, &events); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if !strings.HasPrefix(e.Actor, "token:") {
			continue
		}
		n++
		want := ""
		if f.Schema >= 21 {
			want = roles[e.Actor]
		}
		if e.ActorRole != want {
			t.Errorf("audit event %s by %s has actor role %q, want %q", e.ID, e.Actor, e.ActorRole, want)
		}
	}
	if n == 0 {
		t.Error("no audit event of a token after the upgrade")
	}
}

func tokenOf(t *testing.T, f upgrade.Fixture, role string) upgrade.Token {
	t.Helper()
	for _, tok := range f.Tokens {
		if tok.Role == role {
			return tok
		}
	}
	t.Fatalf("fixture %s/%s has no %s token", f.Rev, f.Dialect, role)
	return upgrade.Token{}
}

func sortedPaths(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
