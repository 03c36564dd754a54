package auth

import (
	"context"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ipledger/ipledger/auth/oidctest"
)

const rpURL = "https://ipledger.example"

var testUsers = map[string]oidctest.User{
	"u-alice": {Username: "alice", Password: "alice-pw", Email: "alice@example.com", Groups: []string{"staff", "ipam-admins"}},
	"u-bob":   {Username: "bob", Password: "bob-pw", Email: "bob@example.com", Groups: []string{"noc"}},
	"u-eve":   {Username: "eve", Password: "eve-pw", Email: "eve@example.com", Groups: []string{"staff"}},
}

var testRoles = NewRoleMap([]string{"ipam-admins"}, []string{"ipam-operators"}, []string{"noc"})

func startRP(t *testing.T, inIDToken bool) (*oidctest.Provider, *OIDC) {
	t.Helper()
	p := oidctest.Start(t, oidctest.Options{Users: testUsers, RedirectURIs: []string{rpURL + CallbackPath}, GroupsInIDToken: inIDToken})
	o := NewOIDC(OIDCConfig{Issuer: p.Issuer, ClientID: p.ClientID, ClientSecret: p.ClientSecret, ExternalURL: rpURL, Roles: testRoles})
	waitReady(t, o)
	return p, o
}

func browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second}
}

// authorize signs in at the provider and returns the callback's state
// and code.
func authorize(t *testing.T, p *oidctest.Provider, o *OIDC, user, pw string) (LoginState, url.Values) {
	t.Helper()
	authURL, st, err := o.Begin(context.Background(), "/pools")
	if err != nil {
		t.Fatal(err)
	}
	au, _ := url.Parse(authURL)
	q := au.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") != st.Nonce || q.Get("state") != st.State {
		t.Fatalf("authorization URL lacks PKCE S256, nonce or state: %s", authURL)
	}
	if q.Get("redirect_uri") != rpURL+CallbackPath {
		t.Fatalf("redirect_uri = %q", q.Get("redirect_uri"))
	}
	cb, err := p.Authorize(browser(t), authURL, user, pw)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cb.String(), rpURL+CallbackPath) {
		t.Fatalf("the provider redirected to %s", cb)
	}
	return st, cb.Query()
}

func TestOIDCSignInRoleFromGroups(t *testing.T) {
	t.Parallel()
	for _, inID := range []bool{true, false} {
		name := "groups in userinfo"
		if inID {
			name = "groups in ID token"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, o := startRP(t, inID)
			for _, c := range []struct {
				user, pw string
				role     Role
			}{{"alice", "alice-pw", RoleAdmin}, {"bob", "bob-pw", RoleViewer}} {
				st, q := authorize(t, p, o, c.user, c.pw)
				who, err := o.Finish(context.Background(), st, q.Get("state"), q.Get("code"))
				if err != nil {
					t.Fatalf("%s: %v", c.user, err)
				}
				if who.Actor != "user:"+c.user || who.Role != c.role {
					t.Fatalf("%s: got %+v, want user:%s with role %s", c.user, who, c.user, c.role)
				}
			}
		})
	}
}

func TestOIDCNoGroupIsRefused(t *testing.T) {
	t.Parallel()
	p, o := startRP(t, true)
	st, q := authorize(t, p, o, "eve", "eve-pw")
	_, err := o.Finish(context.Background(), st, q.Get("state"), q.Get("code"))
	var nr *NoRoleError
	if !errors.As(err, &nr) || nr.Name != "eve" || nr.Claim != "groups" || strings.Join(nr.Groups, ",") != "staff" {
		t.Fatalf("want a NoRoleError for eve naming the groups claim, got %v", err)
	}
}

func TestOIDCCallbackAttacks(t *testing.T) {
	t.Parallel()
	p, o := startRP(t, true)
	ctx := context.Background()
	refused := func(t *testing.T, err error) {
		t.Helper()
		var le *LoginError
		if !errors.As(err, &le) {
			t.Fatalf("want a refused sign-in, got %v", err)
		}
	}
	t.Run("tampered state", func(t *testing.T) {
		st, q := authorize(t, p, o, "alice", "alice-pw")
		_, err := o.Finish(ctx, st, q.Get("state")+"x", q.Get("code"))
		refused(t, err)
	})
	t.Run("another browser's state (CSRF on the callback)", func(t *testing.T) {
		_, q := authorize(t, p, o, "alice", "alice-pw") // the attacker's own code
		_, stVictim, _ := o.Begin(ctx, "/")
		_, err := o.Finish(ctx, stVictim, q.Get("state"), q.Get("code"))
		refused(t, err)
	})
	t.Run("replayed code", func(t *testing.T) {
		st, q := authorize(t, p, o, "alice", "alice-pw")
		if _, err := o.Finish(ctx, st, q.Get("state"), q.Get("code")); err != nil {
			t.Fatal(err)
		}
		_, err := o.Finish(ctx, st, q.Get("state"), q.Get("code"))
		refused(t, err)
	})
	t.Run("wrong nonce", func(t *testing.T) {
		st, q := authorize(t, p, o, "alice", "alice-pw")
		st.Nonce = random()
		_, err := o.Finish(ctx, st, q.Get("state"), q.Get("code"))
		refused(t, err)
		if !strings.Contains(err.Error(), "nonce") {
			t.Fatalf("want the nonce named, got %v", err)
		}
	})
	t.Run("wrong PKCE verifier", func(t *testing.T) {
		st, q := authorize(t, p, o, "alice", "alice-pw")
		st.Verifier = random()
		_, err := o.Finish(ctx, st, q.Get("state"), q.Get("code"))
		refused(t, err)
	})
	t.Run("ID token for another client (wrong aud)", func(t *testing.T) {
		other := NewOIDC(OIDCConfig{Issuer: p.Issuer, ClientID: "another-client", ClientSecret: p.ClientSecret, ExternalURL: rpURL, Roles: testRoles})
		waitReady(t, other)
		st, q := authorize(t, p, o, "alice", "alice-pw")
		_, err := other.Finish(ctx, st, q.Get("state"), q.Get("code"))
		refused(t, err)
	})
}

// TestOIDCUnreachableIssuer: an issuer that does not answer leaves the
// relying party unavailable, not broken; discovery is retried and sign-in
// works once the issuer answers.
func TestOIDCUnreachableIssuer(t *testing.T) {
	t.Parallel()
	p := oidctest.Start(t, oidctest.Options{Users: testUsers, RedirectURIs: []string{rpURL + CallbackPath}, GroupsInIDToken: true})
	p.SetDown(true)
	o := NewOIDC(OIDCConfig{Issuer: p.Issuer, ClientID: p.ClientID, ClientSecret: p.ClientSecret, ExternalURL: rpURL, Roles: testRoles, DiscoveryRetry: time.Millisecond})
	ctx := context.Background()
	if o.Ready() {
		t.Fatal("ready while the issuer is down")
	}
	if _, _, err := o.Begin(ctx, "/"); err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("Begin: want unavailable, got %v", err)
	}
	if _, err := o.VerifyBearer(ctx, "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", noSignIns); !IsInvalidToken(err) {
		t.Fatalf("VerifyBearer: want invalid_token, got %v", err)
	}
	if o.EndSessionURL("") != "" {
		t.Fatal("end session URL without an issuer")
	}
	p.SetDown(false)
	waitReady(t, o)
	st, q := authorize(t, p, o, "alice", "alice-pw")
	if _, err := o.Finish(ctx, st, q.Get("state"), q.Get("code")); err != nil {
		t.Fatalf("sign-in after the issuer came back: %v", err)
	}
}

// TestOIDCSilentIssuerNeverWaits: an issuer that accepts connections and
// never answers holds up no caller: while discovery waits on it in the
// background, Ready, Begin, VerifyBearer and EndSessionURL answer at once
// that single sign-on is unavailable.
func TestOIDCSilentIssuerNeverWaits(t *testing.T) {
	t.Parallel()
	o := NewOIDC(OIDCConfig{Issuer: oidctest.Silent(t), ClientID: "ipledger", ExternalURL: rpURL, Roles: testRoles})
	ctx := context.Background()
	for i := range 3 {
		start := time.Now()
		if o.Ready() {
			t.Fatal("ready with a silent issuer")
		}
		if _, _, err := o.Begin(ctx, "/"); err == nil || !strings.Contains(err.Error(), "unavailable") {
			t.Fatalf("Begin: want unavailable, got %v", err)
		}
		if _, err := o.VerifyBearer(ctx, "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", noSignIns); !IsInvalidToken(err) {
			t.Fatalf("VerifyBearer: want invalid_token, got %v", err)
		}
		if o.EndSessionURL("") != "" {
			t.Fatal("end session URL without discovery")
		}
		// A correctness bound far below discovery's 10 s timeout, not a
		// measurement: waiting on the attempt would take all of it.
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("round %d: the callers waited %s on the silent issuer", i, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestOIDCEndSessionURL(t *testing.T) {
	t.Parallel()
	p, o := startRP(t, true)
	u, err := url.Parse(o.EndSessionURL(""))
	if err != nil || !strings.HasPrefix(u.String(), p.Issuer) {
		t.Fatalf("end session URL %v, %v", u, err)
	}
	if u.Query().Get("client_id") != p.ClientID || u.Query().Get("post_logout_redirect_uri") != rpURL+"/login" || u.Query().Has("id_token_hint") {
		t.Fatalf("end session URL parameters: %s", u.RawQuery)
	}
	// The ID token of the sign-in goes along as id_token_hint.
	st, q := authorize(t, p, o, "alice", "alice-pw")
	who, err := o.Finish(context.Background(), st, q.Get("state"), q.Get("code"))
	if err != nil || who.IDToken == "" {
		t.Fatalf("sign-in: %+v %v", who, err)
	}
	u, _ = url.Parse(o.EndSessionURL(who.IDToken))
	if u.Query().Get("id_token_hint") != who.IDToken.Reveal() || u.Query().Get("client_id") != p.ClientID {
		t.Fatalf("end session URL parameters with a hint: %.200s", u.RawQuery)
	}
	// A token that would make the URL too long for the issuer's front
	// end is left out rather than breaking the sign-out.
	u, _ = url.Parse(o.EndSessionURL(Secret(strings.Repeat("x", maxEndSessionURL))))
	if u.Query().Has("id_token_hint") || u.Query().Get("client_id") != p.ClientID {
		t.Fatalf("end session URL with an oversized hint: %.200s", u.RawQuery)
	}
}

// waitReady waits for discovery (started in the background by NewOIDC).
func waitReady(t *testing.T, o *OIDC) {
	t.Helper()
	o.mu.Lock()
	o.retryEvery = time.Millisecond
	o.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for !o.Ready() {
		if time.Now().After(deadline) {
			t.Fatalf("discovery of the test provider failed: %v", o.lastErr)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestOIDCSignInChecksAZP: an ID token with several audiences must name
// ipledger's client as its authorized party (azp), and an azp must be the
// client id (OIDC Core 3.1.3.7): an ID token another client of the issuer
// obtained, listing ipledger among its audiences, signs nobody in.
func TestOIDCSignInChecksAZP(t *testing.T) {
	t.Parallel()
	is := newJWTIssuer(t)
	o, c := newBearerRP(t, is, "ipledger")
	for _, tc := range []struct {
		name string
		aud  any
		azp  any
		ok   bool
	}{
		{"one audience, no azp", "ipledger", nil, true},
		{"one audience, azp the client", []string{"ipledger"}, "ipledger", true},
		{"several audiences, azp the client", []string{"ipledger", "grafana"}, "ipledger", true},
		{"several audiences, no azp", []string{"grafana", "ipledger"}, nil, false},
		{"several audiences, azp another client", []string{"grafana", "ipledger"}, "grafana", false},
		{"one audience, azp another client", "ipledger", "grafana", false},
		{"azp not a string", []string{"ipledger", "grafana"}, []string{"ipledger"}, false},
	} {
		st := LoginState{State: "st-" + tc.name, Nonce: "n-" + tc.name, Verifier: "v"}
		idt := is.sign(t, is.claims(c, map[string]any{"aud": tc.aud, "azp": tc.azp, "nonce": st.Nonce, "groups": []string{"ipam-admins"}}))
		is.mu.Lock()
		is.idToken = idt
		is.mu.Unlock()
		who, err := o.Finish(context.Background(), st, st.State, "code")
		var le *LoginError
		switch {
		case tc.ok && (err != nil || who.Actor != "user:alice"):
			t.Errorf("%s: refused: %+v %v", tc.name, who, err)
		case !tc.ok && (!errors.As(err, &le) || !strings.Contains(err.Error(), "azp")):
			t.Errorf("%s: want a LoginError naming azp, got %+v %v", tc.name, who, err)
		}
	}
}
