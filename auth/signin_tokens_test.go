package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/auth/oidctest"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// TestBearerSignInIDToken: the ID token ipledger received at a console
// sign-in is refused as a bearer token — while the session lives, after
// sign-out, after the session expired and with a new relying party and
// People over the same database (a restart) — until the token's own exp;
// any other token of the same issuer that passes the checks is accepted,
// whatever its shape: another ID token of the same person for ipledger's
// audience, the access token, a client-credentials token.
func TestBearerSignInIDToken(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		p := oidctest.Start(t, oidctest.Options{Users: testUsers, RedirectURIs: []string{rpURL + CallbackPath},
			GroupsInIDToken: true, JWTAccessTokens: true, ServiceGroups: []string{"ipam-operators"}})
		clk := &clock{}
		clk.t.Store(time.Now().UnixNano())
		start := func() (*OIDC, *People) {
			o := NewOIDC(OIDCConfig{Issuer: p.Issuer, ClientID: p.ClientID, ClientSecret: p.ClientSecret, ExternalURL: rpURL, Roles: testRoles, Now: clk.now})
			waitReady(t, o)
			return o, &People{Service: New(db, Options{Now: clk.now}), TTL: time.Hour}
		}
		o, people := start()
		ctx := context.Background()
		refused := func(t *testing.T, o *OIDC, people *People, what, tok string) {
			t.Helper()
			if _, err := o.VerifyBearer(ctx, tok, people); !IsInvalidToken(err) || !strings.Contains(err.Error(), ReceivedAtSignIn) {
				t.Fatalf("%s: %v", what, err)
			}
		}
		accepted := func(t *testing.T, o *OIDC, people *People, what, tok, actor string) {
			t.Helper()
			if who, err := o.VerifyBearer(ctx, tok, people); err != nil || who.Actor != actor {
				t.Fatalf("%s: %+v %v", what, who, err)
			}
		}

		// alice signs in: ipledger receives her ID token and opens a
		// session with it.
		st, q := authorize(t, p, o, "alice", "alice-pw")
		who, err := o.Finish(ctx, st, q.Get("state"), q.Get("code"))
		if err != nil {
			t.Fatal(err)
		}
		if c := jwtClaimsOf(t, who.IDToken.Reveal()); c["at_hash"] == nil || c["nonce"] == nil {
			t.Fatalf("the provider's ID token lacks at_hash or nonce: %v", c)
		}
		id, _, err := people.Open(ctx, who, "oidc")
		if err != nil {
			t.Fatal(err)
		}
		signIn := who.IDToken.Reveal()
		refused(t, o, people, "the session's ID token", signIn)
		refused(t, o, people, "the session's ID token spelled another way", respell(t, signIn))

		// Another sign-in of alice's that ipledger never received (a
		// client of the same issuer got it) is hers to present, and so
		// are access tokens and a service's token.
		st2, q2 := authorize(t, p, o, "alice", "alice-pw")
		other, access, err := p.Tokens(rpURL+CallbackPath, q2.Get("code"), st2.Verifier)
		if err != nil {
			t.Fatal(err)
		}
		accepted(t, o, people, "an ID token ipledger never received", other, "user:alice")
		accepted(t, o, people, "an access token", access, "user:alice")
		svc, err := p.ServiceToken()
		if err != nil {
			t.Fatal(err)
		}
		accepted(t, o, people, "a client-credentials token", svc, "service:"+oidctest.ServiceClientID)

		// Signed out: the hint sign-out hands out is the same token.
		hint, err := people.Close(ctx, id)
		if err != nil || hint.Reveal() != signIn {
			t.Fatalf("close: hint is the sign-in's token %v, %v", hint.Reveal() == signIn, err)
		}
		refused(t, o, people, "the ID token after sign-out", signIn)

		// A restart: a new relying party and People over the database.
		o2, people2 := start()
		refused(t, o2, people2, "the ID token after a restart", signIn)

		// Past the session's TTL, still refused until the token's exp.
		clk.advance(time.Hour + time.Second)
		exp := jwtClaimsOf(t, signIn)["exp"].(float64)
		if left := time.Unix(int64(exp), 0).Sub(clk.now()); left > 0 {
			refused(t, o2, people2, "the ID token after its session's TTL", signIn)
		}
		// Past exp and the leeway the token is expired, and its row is
		// swept at the next sign-in.
		clk.t.Store(time.Unix(int64(exp), 0).Add(Leeway + time.Second).UnixNano())
		if _, err := o2.VerifyBearer(ctx, signIn, people2); !IsInvalidToken(err) || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("the expired ID token: %v", err)
		}
		if err := people2.RememberIDToken(ctx, "", time.Time{}); err != nil {
			t.Fatal(err)
		}
		var n int64
		db.Raw(`SELECT COUNT(*) FROM signin_id_tokens`).Scan(&n)
		if n != 1 {
			t.Fatalf("%d rows remembered; want only the token that has not expired", n)
		}
	})
}

// TestSignInTokensKeepNoToken: what the database keeps of a sign-in's ID
// token is a hash: no part of the token is stored, and the database
// refuses anything but 64 lower-case hex digits (a token written there by
// another path, say).
func TestSignInTokensKeepNoToken(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		is := newJWTIssuer(t)
		clk := testkit.NewClock(time.Now())
		people := &People{Service: New(db, Options{Now: clk.Now}), TTL: time.Hour}
		c := &clock{}
		c.t.Store(clk.Now().UnixNano())
		tok := is.sign(t, is.claims(c, nil))
		if _, _, err := people.Open(context.Background(), &Person{Actor: "user:alice", Name: "alice", Role: RoleAdmin,
			IDToken: Secret(tok), IDTokenExpires: c.now().Add(5 * time.Minute)}, "oidc"); err != nil {
			t.Fatal(err)
		}
		var rows []struct {
			Hash      string
			ExpiresAt int64
		}
		db.Raw(`SELECT hash, expires_at FROM signin_id_tokens`).Scan(&rows)
		if len(rows) != 1 || rows[0].ExpiresAt != c.now().Add(5*time.Minute+Leeway).Unix()+1 {
			t.Fatalf("rows %+v", rows)
		}
		for _, part := range strings.Split(tok, ".") {
			if strings.Contains(rows[0].Hash, part[:16]) {
				t.Fatal("the row holds part of the token")
			}
		}
		for _, bad := range []string{tok, strings.ToUpper(rows[0].Hash[:63]) + "0", rows[0].Hash[:63], rows[0].Hash + "0", strings.Repeat("g", 64)} {
			if err := db.Exec(`INSERT INTO signin_id_tokens (hash, expires_at) VALUES (?, ?)`, bad, 1).Error; err == nil {
				t.Errorf("the database took %.20q… as a hash", bad)
			}
		}
	})
}

// TestBearerSignInCheckFailsClosed: when the database cannot say whether a
// JWT is the ID token of a sign-in, the JWT is refused with the
// database's error, never accepted.
func TestBearerSignInCheckFailsClosed(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, models.SQLite)
	is := newJWTIssuer(t)
	o, c := newBearerRP(t, is, "ipledger-api")
	people := &People{Service: New(db, Options{}), TTL: time.Hour}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.Close()
	who, err := o.VerifyBearer(context.Background(), is.sign(t, is.claims(c, nil)), people)
	if who != nil || err == nil || IsInvalidToken(err) {
		t.Fatalf("with the database closed: %+v, %v", who, err)
	}
}

// TestBearerAcceptsAnyShape: no claim or header makes a verified JWT an
// ID token: the marks OpenID Connect defines for ID tokens (at_hash,
// c_hash, s_hash, a nonce), Keycloak's typ claim ID and a header typ
// id_token are accepted like any other, on the client id as API audience
// and on a separate one. Dex's access tokens carry at_hash; Kubernetes
// style setups present ID tokens on purpose.
func TestBearerAcceptsAnyShape(t *testing.T) {
	t.Parallel()
	is := newJWTIssuer(t)
	ctx := context.Background()
	for _, apiAud := range []string{"ipledger", "ipledger-api"} {
		o, c := newBearerRP(t, is, apiAud)
		claims := func(extra map[string]any) map[string]any {
			return is.claims(c, mergeClaims(map[string]any{"aud": []string{apiAud}}, extra))
		}
		for what, tok := range map[string]string{
			"at_hash":                  is.sign(t, claims(map[string]any{"at_hash": "x2eSvl3kh5NbYn7N3HSu0g"})),
			"c_hash":                   is.sign(t, claims(map[string]any{"c_hash": "LDktKdoQak3Pk0cnXxCltA"})),
			"s_hash":                   is.sign(t, claims(map[string]any{"s_hash": "LDktKdoQak3Pk0cnXxCltA"})),
			"Keycloak's typ ID":        is.sign(t, claims(map[string]any{"typ": "ID"})),
			"typ claim Bearer":         is.sign(t, claims(map[string]any{"typ": "Bearer"})),
			"header typ id_token":      is.signTyp(t, "id_token", claims(nil)),
			"header typ at+jwt":        is.signTyp(t, "at+jwt", claims(nil)),
			"nonce, aud the client id": is.sign(t, claims(map[string]any{"nonce": "n-0S6_WzA2Mj", "aud": []string{apiAud, "ipledger"}, "azp": "kubectl"})),
		} {
			if who, err := o.VerifyBearer(ctx, tok, noSignIns); err != nil || who.Actor != "user:alice" {
				t.Errorf("aud %s, %s: %+v %v", apiAud, what, who, err)
			}
		}
	}
}

// respell writes the same token another way: base64url leaves the low
// bits of the signature's last character unused, so flipping them gives
// a different text that decodes, and verifies, as the same token.
func respell(t *testing.T, tok string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	sig := tok[strings.LastIndexByte(tok, '.')+1:]
	want, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		t.Fatal(err)
	}
	last := strings.IndexByte(alphabet, sig[len(sig)-1])
	for flip := 1; flip < 4; flip++ {
		alt := sig[:len(sig)-1] + string(alphabet[last^flip])
		if got, err := base64.RawURLEncoding.DecodeString(alt); err == nil && string(got) == string(want) {
			return tok[:len(tok)-len(sig)] + alt
		}
	}
	t.Fatalf("the signature of %d bytes has no unused bits", len(want))
	return ""
}

// jwtClaimsOf reads a JWT's claims without verifying it (the test's own
// look at a token it already has).
func jwtClaimsOf(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
