package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// jwtIssuer serves discovery and a JWKS whose keys a test rotates, and
// signs tokens: the other side of the bearer JWT checks.
type jwtIssuer struct {
	srv      *httptest.Server
	mu       sync.Mutex
	keys     []jose.JSONWebKey // private
	jwksHits atomic.Int64
	// gate, when set, holds every JWKS answer until it is closed (an
	// issuer that is slow to answer).
	gate chan struct{}
	// idToken is what the token endpoint answers any code with.
	idToken string
}

func newJWTIssuer(t *testing.T) *jwtIssuer {
	is := &jwtIssuer{}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]any{
				"issuer": is.srv.URL, "authorization_endpoint": is.srv.URL + "/authorize",
				"token_endpoint": is.srv.URL + "/token", "jwks_uri": is.srv.URL + "/jwks",
				"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
			})
		case "/jwks":
			is.jwksHits.Add(1)
			is.mu.Lock()
			gate := is.gate
			is.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-r.Context().Done():
					return
				}
			}
			is.mu.Lock()
			var set jose.JSONWebKeySet
			for _, k := range is.keys {
				set.Keys = append(set.Keys, k.Public())
			}
			is.mu.Unlock()
			_ = json.NewEncoder(w).Encode(set)
		case "/token":
			is.mu.Lock()
			idt := is.idToken
			is.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "opaque-access-token", "token_type": "Bearer", "expires_in": 300, "id_token": idt})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(is.srv.Close)
	is.rotate(t, "key-1", "RS256")
	return is
}

// rotate replaces the issuer's keys with a new one.
func (is *jwtIssuer) rotate(t *testing.T, kid, alg string) {
	var key any
	var err error
	if alg == "ES256" {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	is.keys = []jose.JSONWebKey{{Key: key, KeyID: kid, Algorithm: alg, Use: "sig"}}
	is.mu.Unlock()
}

func (is *jwtIssuer) sign(t *testing.T, claims map[string]any) string {
	is.mu.Lock()
	k := is.keys[0]
	is.mu.Unlock()
	return signWith(t, jose.SigningKey{Algorithm: jose.SignatureAlgorithm(k.Algorithm), Key: k}, claims)
}

func signWith(t *testing.T, key jose.SigningKey, claims map[string]any) string {
	s, err := jose.NewSigner(key, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// noSignIns is an empty set of sign-in ID tokens, for the checks that do
// not depend on it (People keeps the real set, signin_tokens_test.go).
var noSignIns = signInSet{}

type signInSet map[string]bool

func (s signInSet) ReceivedAtSignIn(_ context.Context, raw string) (bool, error) {
	return s[signInTokenHash(raw)], nil
}

type clock struct{ t atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.t.Load()) }
func (c *clock) advance(d time.Duration) { c.t.Add(int64(d)) }

func newBearerRP(t *testing.T, is *jwtIssuer, aud string) (*OIDC, *clock) {
	c := &clock{}
	c.t.Store(time.Now().UnixNano())
	o := NewOIDC(OIDCConfig{Issuer: is.srv.URL, ClientID: "ipledger", APIAudience: aud, ExternalURL: rpURL, Roles: testRoles, Now: c.now})
	waitReady(t, o)
	return o, c
}

func (is *jwtIssuer) claims(c *clock, extra map[string]any) map[string]any {
	m := map[string]any{
		"iss": is.srv.URL, "sub": "0123-alice", "aud": []string{"ipledger-api", "something-else"},
		"exp": c.now().Add(5 * time.Minute).Unix(), "iat": c.now().Unix(),
		"preferred_username": "alice", "groups": []string{"ipam-operators"},
	}
	for k, v := range extra {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

func TestBearerJWT(t *testing.T) {
	t.Parallel()
	is := newJWTIssuer(t)
	o, c := newBearerRP(t, is, "ipledger-api")
	ctx := context.Background()
	accept := func(t *testing.T, raw, actor string, role Role) {
		t.Helper()
		who, err := o.VerifyBearer(ctx, raw, noSignIns)
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		if who.Actor != actor || who.Role != role {
			t.Fatalf("got %+v, want %s %s", who, actor, role)
		}
	}
	refuse := func(t *testing.T, raw, why string) {
		t.Helper()
		_, err := o.VerifyBearer(ctx, raw, noSignIns)
		if !IsInvalidToken(err) {
			t.Fatalf("want invalid_token, got %v", err)
		}
		if !strings.Contains(err.Error(), why) {
			t.Fatalf("want %q in %q", why, err)
		}
	}
	t.Run("valid", func(t *testing.T) {
		accept(t, is.sign(t, is.claims(c, nil)), "user:alice", RoleOperator)
	})
	t.Run("no user name is a service", func(t *testing.T) {
		accept(t, is.sign(t, is.claims(c, map[string]any{"preferred_username": nil, "groups": "noc"})), "service:0123-alice", RoleViewer)
	})
	t.Run("an email is a name only when email_verified is true", func(t *testing.T) {
		accept(t, is.sign(t, is.claims(c, map[string]any{"preferred_username": nil, "email": "alice@example.com", "email_verified": true})), "user:alice@example.com", RoleOperator)
		for _, v := range []any{"true", "False ", 1, nil} {
			accept(t, is.sign(t, is.claims(c, map[string]any{"preferred_username": nil, "email": "ceo@example.com", "email_verified": v})), "service:0123-alice", RoleOperator)
		}
	})
	t.Run("wrong aud", func(t *testing.T) {
		refuse(t, is.sign(t, is.claims(c, map[string]any{"aud": "ipledger"})), "audience")
	})
	t.Run("another issuer", func(t *testing.T) {
		refuse(t, is.sign(t, is.claims(c, map[string]any{"iss": "https://evil.example"})), "issued by a different provider")
	})
	t.Run("expired beyond the leeway", func(t *testing.T) {
		refuse(t, is.sign(t, is.claims(c, map[string]any{"exp": c.now().Add(-61 * time.Second).Unix()})), "expired")
	})
	t.Run("expired within the leeway", func(t *testing.T) {
		accept(t, is.sign(t, is.claims(c, map[string]any{"exp": c.now().Add(-50 * time.Second).Unix()})), "user:alice", RoleOperator)
	})
	t.Run("no exp", func(t *testing.T) {
		refuse(t, is.sign(t, is.claims(c, map[string]any{"exp": nil})), "exp")
	})
	t.Run("not yet valid", func(t *testing.T) {
		refuse(t, is.sign(t, is.claims(c, map[string]any{"nbf": c.now().Add(2 * time.Minute).Unix()})), "not valid before")
	})
	t.Run("alg none", func(t *testing.T) {
		enc := base64.RawURLEncoding.EncodeToString
		body, _ := json.Marshal(is.claims(c, nil))
		refuse(t, enc([]byte(`{"alg":"none","typ":"JWT","kid":"key-1"}`))+"."+enc(body)+".", "malformed")
	})
	t.Run("HMAC signed with the client secret", func(t *testing.T) {
		raw := signWith(t, jose.SigningKey{Algorithm: jose.HS256, Key: []byte("the-client-secret-of-ipledger-0123")}, is.claims(c, nil))
		refuse(t, raw, "malformed")
	})
	t.Run("forged signature", func(t *testing.T) {
		raw := is.sign(t, is.claims(c, nil))
		parts := strings.Split(raw, ".")
		body, _ := json.Marshal(is.claims(c, map[string]any{"groups": []string{"ipam-admins"}}))
		refuse(t, parts[0]+"."+base64.RawURLEncoding.EncodeToString(body)+"."+parts[2], "signature")
	})
	t.Run("no role", func(t *testing.T) {
		_, err := o.VerifyBearer(ctx, is.sign(t, is.claims(c, map[string]any{"groups": []string{"staff"}})), noSignIns)
		var nr *NoRoleError
		if !errors.As(err, &nr) {
			t.Fatalf("want NoRoleError, got %v", err)
		}
	})
}

// TestBearerKeyRotation: a token signed with a key the cached JWKS does
// not hold refreshes the set once — at most once per JWKSRefreshEvery,
// so made-up key ids cannot make ipledger hammer the issuer.
func TestBearerKeyRotation(t *testing.T) {
	t.Parallel()
	is := newJWTIssuer(t)
	o, c := newBearerRP(t, is, "ipledger-api")
	ctx := context.Background()
	if _, err := o.VerifyBearer(ctx, is.sign(t, is.claims(c, nil)), noSignIns); err != nil {
		t.Fatal(err)
	}
	if n := is.jwksHits.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times, want 1", n)
	}
	is.rotate(t, "key-2", "ES256")
	tok2 := is.sign(t, is.claims(c, nil))
	if _, err := o.VerifyBearer(ctx, tok2, noSignIns); !IsInvalidToken(err) || !strings.Contains(err.Error(), "key-2") {
		t.Fatalf("within 30 s of the last fetch: want refused naming key-2, got %v", err)
	}
	if n := is.jwksHits.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times within the refresh interval, want 1", n)
	}
	c.advance(JWKSRefreshEvery)
	if _, err := o.VerifyBearer(ctx, tok2, noSignIns); err != nil {
		t.Fatalf("after rotation and the interval: %v", err)
	}
	for range 5 {
		bogus := signWith(t, jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: mustRSA(t), KeyID: "made-up"}}, is.claims(c, nil))
		if _, err := o.VerifyBearer(ctx, bogus, noSignIns); !IsInvalidToken(err) {
			t.Fatalf("made-up kid: %v", err)
		}
	}
	if n := is.jwksHits.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2 (made-up key ids must not refresh within the interval)", n)
	}
}

// TestBearerRefreshDoesNotBlockKnownKeys: while a refresh of the JWKS
// hangs at the issuer, tokens signed with a cached key keep verifying,
// tokens naming unknown key ids wait for that one refresh instead of
// starting their own, and the new key verifies once the refresh answers.
func TestBearerRefreshDoesNotBlockKnownKeys(t *testing.T) {
	t.Parallel()
	is := newJWTIssuer(t)
	o, c := newBearerRP(t, is, "ipledger-api")
	ctx := context.Background()
	tok1 := is.sign(t, is.claims(c, nil))
	if _, err := o.VerifyBearer(ctx, tok1, noSignIns); err != nil {
		t.Fatal(err)
	}
	// The issuer publishes a second key beside the first and becomes slow.
	is.mu.Lock()
	old := is.keys[0]
	is.mu.Unlock()
	is.rotate(t, "key-2", "ES256")
	tok2 := is.sign(t, is.claims(c, nil))
	gate := make(chan struct{})
	var release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	t.Cleanup(open)
	is.mu.Lock()
	is.keys = append(is.keys, old)
	is.gate = gate
	is.mu.Unlock()
	c.advance(JWKSRefreshEvery)

	type result struct {
		who *Person
		err error
	}
	verify := func(raw string) <-chan result {
		out := make(chan result, 1)
		go func() {
			who, err := o.VerifyBearer(ctx, raw, noSignIns)
			out <- result{who, err}
		}()
		return out
	}
	rotated := verify(tok2)
	deadline := time.Now().Add(10 * time.Second)
	for is.jwksHits.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the unknown key id did not start a refresh")
		}
		time.Sleep(time.Millisecond)
	}
	bogus := verify(signWith(t, jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: mustRSA(t), KeyID: "made-up"}}, is.claims(c, nil)))
	for i := range 20 {
		select {
		case r := <-verify(tok1):
			if r.err != nil || r.who.Actor != "user:alice" {
				t.Fatalf("known key %d during the refresh: %+v %v", i, r.who, r.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a token signed with a cached key waits for the hanging refresh")
		}
	}
	select {
	case r := <-rotated:
		t.Fatalf("the new key's token answered before the refresh did: %+v %v", r.who, r.err)
	default:
	}
	open()
	if r := <-rotated; r.err != nil || r.who.Actor != "user:alice" {
		t.Fatalf("the new key after the refresh: %+v %v", r.who, r.err)
	}
	if r := <-bogus; !IsInvalidToken(r.err) || !strings.Contains(r.err.Error(), "made-up") {
		t.Fatalf("made-up key id: %v", r.err)
	}
	if n := is.jwksHits.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2: tokens waiting on a refresh must share it", n)
	}
}

func mustRSA(t *testing.T) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mergeClaims(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// signTyp signs claims with the header typ given.
func (is *jwtIssuer) signTyp(t *testing.T, typ string, claims map[string]any) string {
	is.mu.Lock()
	k := is.keys[0]
	is.mu.Unlock()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(k.Algorithm), Key: k}, (&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
