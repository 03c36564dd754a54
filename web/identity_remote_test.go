package web_test

import (
	"encoding/json"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
)

// remotesLogged returns the "remote" of every request log line.
func remotesLogged(t *testing.T, logs string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != "request" {
			continue
		}
		r, _ := m["remote"].(string)
		out = append(out, r)
	}
	return out
}

// TestLoggedRemoteIsNotForged: the address in the request log is the TCP
// peer's; X-Forwarded-For and X-Real-IP are believed only from the
// trusted proxy. Otherwise anyone could write another address into the
// log line of a refused proxy header or sign-in.
func TestLoggedRemoteIsNotForged(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		p := newProxySite(t, db)
		p.do("203.0.113.9:1", "GET", "/healthz", "", "X-Forwarded-For", "10.9.9.9", "X-Real-Ip", "10.9.9.8")
		p.do("203.0.113.9:1", "GET", "/", "", "X-Forwarded-User", "carol", "X-Forwarded-For", "192.0.2.10")
		p.do("192.0.2.10:1", "GET", "/healthz", "", "X-Forwarded-For", "198.51.100.7")
		got := remotesLogged(t, p.log.String())
		want := []string{"203.0.113.9", "203.0.113.9", "198.51.100.7"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("logged remotes %q, want %q", got, want)
		}
	})
}
