package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// InvalidTokenError is a refused bearer JWT: 401 with
// WWW-Authenticate: Bearer error="invalid_token". Its message says what
// failed, never the token.
type InvalidTokenError struct{ Reason string }

func (e *InvalidTokenError) Error() string { return "invalid bearer token: " + e.Reason }

// LooksLikeJWT tells a JWS compact serialization ("xxx.yyy.zzz", the
// header a base64url JSON object) from one of ipledger's own tokens, which
// never hold a dot.
func LooksLikeJWT(tok string) bool {
	return strings.Count(tok, ".") == 2 && strings.HasPrefix(tok, "eyJ")
}

// VerifyBearer checks a bearer JWT from the issuer: signature against the
// issuer's JWKS (asymmetric algorithms only, an unknown key id refreshes
// the set), iss, aud containing the API audience, exp and nbf with Leeway,
// and that it is not an ID token (idTokenMark). The role comes from the
// groups claim through the role map; the actor is user:NAME, or
// service:SUB for a token that names no user.
func (o *OIDC) VerifyBearer(ctx context.Context, raw string) (*Person, error) {
	d, err := o.current()
	if err != nil {
		return nil, &InvalidTokenError{"the issuer has not answered discovery, so no JWT can be verified"}
	}
	t, err := d.apiTokens.Verify(ctx, raw)
	if err != nil {
		return nil, &InvalidTokenError{strings.TrimPrefix(err.Error(), "oidc: ")}
	}
	claims := map[string]any{}
	if err := t.Claims(&claims); err != nil {
		return nil, &InvalidTokenError{"the claims do not parse"}
	}
	if err := checkTimes(claims, o.cfg.Now()); err != nil {
		return nil, &InvalidTokenError{err.Error()}
	}
	if mark := idTokenMark(raw, claims, t.Audience, o.cfg.ClientID); mark != "" {
		return nil, &InvalidTokenError{"an ID token is not an API credential: " + mark}
	}
	groups, _, err := groupsFrom(claims, o.cfg.GroupsClaim)
	if err != nil {
		return nil, &InvalidTokenError{err.Error()}
	}
	actor, name := "", ""
	for _, c := range []string{o.cfg.UsernameClaim, "preferred_username", "email"} {
		if s, ok := nameClaim(claims, c); ok {
			if name, err = checkName(s, c); err != nil {
				return nil, &InvalidTokenError{err.Error()}
			}
			actor = "user:" + name
			break
		}
	}
	if actor == "" {
		if t.Subject == "" {
			return nil, &InvalidTokenError{"the token has neither a user name nor a subject"}
		}
		if name, err = checkName(t.Subject, "sub"); err != nil {
			return nil, &InvalidTokenError{err.Error()}
		}
		actor = "service:" + name
	}
	role, ok := o.cfg.Roles.Role(groups)
	if !ok {
		return nil, &NoRoleError{Name: name, Claim: o.cfg.GroupsClaim, Groups: groups}
	}
	return &Person{Actor: actor, Name: name, Role: role}, nil
}

// idTokenClaims are claims that OpenID Connect defines for ID tokens
// only: the hashes that bind an ID token to the access token, code or
// state issued beside it (OIDC Core 3.1.3.6, 3.3.2.11; FAPI's s_hash).
// An access token never carries them.
var idTokenClaims = []string{"at_hash", "c_hash", "s_hash"}

// idTokenMark says why a verified JWT is an ID token, or "" when nothing
// marks it as one. An ID token says who signed in to a client; it is no
// credential for an API (OIDC Core 2, RFC 9068), and ipledger's sign-in
// ID tokens travel where access tokens do not: sign-out puts one in the
// end-session URL (id_token_hint), so a browser's history or a proxy's
// log would hold a bearer token that outlives the session. Marks:
//   - a header typ naming an ID token ("id_token", "id_token+jwt");
//   - a claim only ID tokens carry (idTokenClaims), or Keycloak's
//     typ claim "ID";
//   - a nonce in a token addressed to ipledger's own client id: ipledger
//     sends a nonce with every sign-in, and the issuer puts it in the ID
//     token; access tokens of client credentials and token exchange carry
//     none. With IPLEDGER_OIDC_API_AUDIENCE left at the client id this is
//     what refuses the sign-in's ID token whatever the issuer.
func idTokenMark(raw string, claims map[string]any, aud []string, clientID string) string {
	if typ := headerTyp(raw); typ == "id_token" || typ == "id_token+jwt" {
		return fmt.Sprintf("its header typ is %q", typ)
	}
	for _, c := range idTokenClaims {
		if _, ok := claims[c]; ok {
			return "it carries " + c + ", a claim only ID tokens carry"
		}
	}
	if typ, _ := claims["typ"].(string); typ == "ID" {
		return `its typ claim is "ID"`
	}
	if _, ok := claims["nonce"]; ok && slices.Contains(aud, clientID) {
		return "it carries a nonce and is addressed to ipledger's client id, as the ID token of a sign-in is"
	}
	return ""
}

// headerTyp is the JWS header's typ, lower-case without "application/"
// (RFC 7515 4.1.9), or "" when it has none. raw has verified already.
func headerTyp(raw string) string {
	h, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return ""
	}
	var hdr struct {
		Typ string `json:"typ"`
	}
	if json.Unmarshal(b, &hdr) != nil {
		return ""
	}
	return strings.TrimPrefix(strings.ToLower(hdr.Typ), "application/")
}

// JWKSFetches reports how many times the issuer's key set was fetched
// (0 before discovery).
func (o *OIDC) JWKSFetches() int {
	o.mu.Lock()
	d := o.d
	o.mu.Unlock()
	if d == nil {
		return 0
	}
	return d.keys.Fetches()
}

// IsInvalidToken reports whether err refuses a bearer JWT.
func IsInvalidToken(err error) bool {
	var e *InvalidTokenError
	return errors.As(err, &e)
}
