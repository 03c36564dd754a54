package web_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/web"
)

// TestJWTAttacksOnREST: the bearer JWT attacks, through the assembled
// server against the in-process provider. A token signed with the
// provider's own key but for another audience, or expired beyond the
// leeway; an HMAC token "signed" with the client secret the server is
// configured with; an unsigned one (alg none) — each is 401 with
// WWW-Authenticate: Bearer error="invalid_token" and writes nothing. After
// the provider rotates its key, a token with the new key id is refused
// until the server may refresh the key set (30 s after its last fetch),
// then accepted.
func TestJWTAttacksOnREST(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		clk := testkit.NewClock(time.Now())
		s := newSSOSiteOpts(t, db, ssoOptions{inIDToken: true, now: clk.Now})
		claims := func(extra map[string]any) map[string]any {
			now := clk.Now()
			c := map[string]any{"iss": s.idp.Issuer, "sub": "u-alice", "aud": s.idp.ClientID,
				"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "preferred_username": "alice", "groups": []string{"ipam-admins"}}
			for k, v := range extra {
				c[k] = v
			}
			return c
		}
		create := func(tok, name string) (*http.Response, string) {
			return apiCall(t, s.srv.URL, "POST", "/api/v1/pools", tok, `{"name":"`+name+`","type":"integer","ranges":[{"first":"1","last":"9"}]}`)
		}
		refused := func(t *testing.T, what, tok string) {
			t.Helper()
			res, body := create(tok, "refused")
			if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != web.WWWAuthenticateInvalid || !strings.Contains(body, `"unauthorized"`) {
				t.Fatalf("%s: %d %q %s", what, res.StatusCode, res.Header.Get("WWW-Authenticate"), body)
			}
		}
		// The control: the same claims, signed with the provider's key.
		if res, body := create(s.idp.Sign(t, claims(nil)), "signed"); res.StatusCode != http.StatusCreated {
			t.Fatalf("a token signed by the provider: %d %s", res.StatusCode, body)
		}
		enc := base64.RawURLEncoding.EncodeToString
		payload, _ := json.Marshal(claims(nil))
		// HS256 by hand: go-jose refuses a key shorter than 32 bytes, and
		// the client secret may be one.
		signingInput := enc([]byte(`{"alg":"HS256","typ":"JWT","kid":"`+s.idp.ClientID+`"}`)) + "." + enc(payload)
		mac := hmac.New(sha256.New, []byte(s.idp.ClientSecret))
		mac.Write([]byte(signingInput))
		hs256 := signingInput + "." + enc(mac.Sum(nil))
		for what, tok := range map[string]string{
			"another audience":                   s.idp.Sign(t, claims(map[string]any{"aud": "another-client"})),
			"expired beyond the leeway":          s.idp.Sign(t, claims(map[string]any{"exp": clk.Now().Add(-2 * time.Minute).Unix()})),
			"HMAC signed with the client secret": hs256,
			"alg none":                           enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(payload) + ".",
		} {
			refused(t, what, tok)
		}

		// Key rotation.
		kid := s.idp.RotateKey(t)
		rotated := s.accessToken(t, "alice", "alice-pw")
		if h, _ := jose.ParseSignedCompact(rotated, []jose.SignatureAlgorithm{jose.RS256}); h == nil || h.Signatures[0].Header.KeyID != kid {
			t.Fatalf("the provider's new access token does not name the new key %s", kid)
		}
		refused(t, "a new key id within 30 s of the last key set fetch", rotated)
		clk.Advance(auth.JWKSRefreshEvery)
		if res, body := create(rotated, "rotated"); res.StatusCode != http.StatusCreated {
			t.Fatalf("the new key after the refresh: %d %s", res.StatusCode, body)
		}
		var names []string
		db.Raw(`SELECT name FROM pools ORDER BY name`).Scan(&names)
		if strings.Join(names, ",") != "rotated,signed" {
			t.Fatalf("pools %v: a refused token wrote", names)
		}
	})
}
