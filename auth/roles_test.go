package auth

import (
	"strings"
	"testing"
	"time"
)

func TestRoleFromGroupsHighestWins(t *testing.T) {
	t.Parallel()
	m := NewRoleMap(SplitList("ipam-admins, netops-leads"), SplitList("netops"), SplitList("noc,staff"))
	for _, c := range []struct {
		groups []string
		want   Role
	}{
		{[]string{"staff"}, RoleViewer},
		{[]string{"staff", "netops"}, RoleOperator},
		{[]string{"netops", "staff", "netops-leads"}, RoleAdmin},
		{[]string{"noc", "ipam-admins"}, RoleAdmin},
	} {
		if got, ok := m.Role(c.groups); !ok || got != c.want {
			t.Errorf("%v: got %q %v, want %s", c.groups, got, ok, c.want)
		}
	}
	for _, g := range [][]string{nil, {}, {"IPAM-ADMINS"}, {"ipam-admins "}, {""}, {"contractors"}} {
		if got, ok := m.Role(g); ok {
			t.Errorf("%q: got role %s, want none (refused)", g, got)
		}
	}
	if !NewRoleMap(nil, []string{" ", ""}, nil).Empty() {
		t.Error("a map of blank names is not empty")
	}
}

func TestGroupsClaimShapes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v       any
		want    string
		present bool
		bad     bool
	}{
		{[]any{"a", "b"}, "a,b", true, false},
		{"a, b", "a,b", true, false},
		{"a", "a", true, false},
		{nil, "", false, false},
		{42.0, "", true, true},
		{[]any{"a", 1.0}, "", true, true},
	} {
		claims := map[string]any{}
		if c.v != nil {
			claims["groups"] = c.v
		}
		g, present, err := groupsFrom(claims, "groups")
		if (err != nil) != c.bad || present != c.present || (!c.bad && strings.Join(g, ",") != c.want) {
			t.Errorf("%v: got %v %v %v", c.v, g, present, err)
		}
	}
}

func TestUsernameClaimOrder(t *testing.T) {
	t.Parallel()
	all := map[string]any{"upn": "a@corp", "preferred_username": "alice", "email": "alice@example.com", "email_verified": true, "sub": "123"}
	for _, c := range []struct {
		claim string
		drop  []string
		want  string
	}{
		{"", nil, "alice"},
		{"upn", nil, "a@corp"},
		{"upn", []string{"upn"}, "alice"},
		{"", []string{"preferred_username"}, "alice@example.com"},
		{"", []string{"preferred_username", "email"}, "123"},
		{"", []string{"preferred_username", "email_verified"}, "123"},
	} {
		m := map[string]any{}
		for k, v := range all {
			m[k] = v
		}
		for _, d := range c.drop {
			delete(m, d)
		}
		if got, err := usernameFrom(m, c.claim); err != nil || got != c.want {
			t.Errorf("%s without %v: got %q %v, want %q", c.claim, c.drop, got, err, c.want)
		}
	}
	if _, err := usernameFrom(map[string]any{"preferred_username": "bad\nname"}, ""); err == nil {
		t.Error("a name with a newline was accepted")
	}
	if _, err := usernameFrom(map[string]any{}, ""); err == nil {
		t.Error("no name was accepted")
	}
}

func TestLoginStateSealed(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Now()
	st := LoginState{State: "s", Nonce: "n", Verifier: "v", Next: "/pools"}
	v := SealLoginState(key, st, now)
	if got, err := OpenLoginState(key, v, now.Add(time.Minute)); err != nil || got != st {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if _, err := OpenLoginState(key, v, now.Add(LoginStateTTL+time.Minute)); err == nil {
		t.Error("an expired sign-in cookie was accepted")
	}
	forged := SealLoginState([]byte("another key, another site, 32 b!"), LoginState{State: "s", Next: "https://evil.example"}, now)
	for _, bad := range []string{"", "x", v + "x", v[:len(v)-2], forged, strings.Replace(v, ".", "A.", 1)} {
		if _, err := OpenLoginState(key, bad, now); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

// lookalikeNames are names that would read as another (mostly as
// "alice") on a page or in an audit line; each is refused.
var lookalikeNames = map[string]string{
	"bidirectional override":        "alice\u202euser:admin",
	"zero-width space":              "ad\u200bmin",
	"line separator":                "alice\u2028user:admin",
	"paragraph separator":           "alice\u2029x",
	"byte order mark":               "\ufeffadmin",
	"variation selector":            "alice\ufe0f",
	"variation selector supplement": "alice\U000E0101",
	"combining grapheme joiner":     "alice\u034f",
	"Hangul filler":                 "alice\u3164",
	"Hangul choseong filler":        "alice\u115f",
	"Hangul jungseong filler":       "alice\u1160",
	"halfwidth Hangul filler":       "alice\uffa0",
	"Braille blank":                 "alice\u2800",
	"Mongolian vowel separator":     "alice\u180e",
	"private use":                   "alice\ue000",
	"unassigned":                    "alice\u0378",
	"trailing spaces":               "alice   ",
	"leading space":                 " alice",
	"trailing tab":                  "alice\t",
	"no-break space":                "alice\u00a0",
	"ideographic space":             "alice\u3000",
	"em space inside":               "alice\u2003smith",
	"two spaces in a row":           "alice  smith",
	"combining mark first":          "\u0301alice",
	"fullwidth":                     "\uff41\uff4c\uff49\uff43\uff45",
	"fullwidth one letter":          "alic\uff45",
	"ligature":                      "\ufb01le",
	"superscript":                   "x\u00b2",
}

// TestUsernameRefusesLookalikes refuses names whose characters change how
// an audit line reads without being seen, or make one name read as
// another: the visible-text rule of names and serials, blank-rendering
// and default-ignorable characters, blanks at the ends (never trimmed),
// a leading combining mark, compatibility forms. A name in decomposed form
// is recorded composed (NFC); other scripts are names like any.
func TestUsernameRefusesLookalikes(t *testing.T) {
	t.Parallel()
	for what, n := range lookalikeNames {
		if got, err := usernameFrom(map[string]any{"preferred_username": n}, ""); err == nil {
			t.Errorf("%s: %q was accepted as %q", what, n, got)
		}
	}
	for in, want := range map[string]string{
		"José Ñúñez":                     "José Ñúñez",
		"Jose\u0301":                     "José",
		"alice smith":                    "alice smith",
		"alice@example.com":              "alice@example.com",
		"o'brien":                        "o'brien",
		"\u0410\u043b\u0438\u0441\u0430": "\u0410\u043b\u0438\u0441\u0430",
		"\u674e\u96f7":                   "\u674e\u96f7",
	} {
		if got, err := usernameFrom(map[string]any{"preferred_username": in}, ""); err != nil || got != want {
			t.Errorf("%q: got %q %v, want %q", in, got, err, want)
		}
	}
	// A blank claim is no name: the next claim names the person.
	if got, err := usernameFrom(map[string]any{"preferred_username": "", "sub": "u-1"}, ""); err != nil || got != "u-1" {
		t.Errorf("an empty preferred_username: got %q %v", got, err)
	}
}

// TestUsernameSkipsUnverifiedEmail never names a person by an email
// address the issuer has not vouched for with email_verified the JSON
// boolean true: anyone may type any address into their profile at many
// providers. A string (even "true"), a number, null or no claim at all
// leaves the name to sub.
func TestUsernameSkipsUnverifiedEmail(t *testing.T) {
	t.Parallel()
	for _, v := range []any{false, "false", "False ", "true", "TRUE", "1", "yes", float64(1), float64(0), nil, []any{true}, map[string]any{"v": true}, "absent"} {
		m := map[string]any{"email": "ceo@example.com", "email_verified": v, "sub": "u-123"}
		if v == "absent" {
			delete(m, "email_verified")
		}
		if got, err := usernameFrom(m, ""); err != nil || got != "u-123" {
			t.Errorf("email_verified %v: got %q %v, want the sub", v, got, err)
		}
		if got, err := usernameFrom(m, "email"); err != nil || got != "u-123" {
			t.Errorf("email claim configured, email_verified %v: got %q %v, want the sub", v, got, err)
		}
	}
	m := map[string]any{"email": "ceo@example.com", "email_verified": true, "sub": "u-123"}
	if got, err := usernameFrom(m, ""); err != nil || got != "ceo@example.com" {
		t.Errorf("verified email: got %q %v", got, err)
	}
}
