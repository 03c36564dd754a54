package auth

import (
	"context"
	"errors"
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

// SignIns knows the ID tokens ipledger received at console sign-ins
// (People, signin_tokens.go).
type SignIns interface {
	ReceivedAtSignIn(ctx context.Context, raw string) (bool, error)
}

// VerifyBearer checks a bearer JWT from the issuer: signature against the
// issuer's JWKS (asymmetric algorithms only, an unknown key id refreshes
// the set), iss, aud containing the API audience, exp and nbf with Leeway,
// and that it is not an ID token ipledger itself received at a console
// sign-in (signIns). Nothing else about its shape matters: an issuer's
// access token may look like an ID token (Dex's carry at_hash), and an ID
// token a client got for ipledger's audience is its to present. The role
// comes from the groups claim through the role map; the actor is
// user:NAME, or service:SUB for a token that names no user. A database
// that cannot answer whether the token is a sign-in's refuses it with
// its error (503), never lets it through.
func (o *OIDC) VerifyBearer(ctx context.Context, raw string, signIns SignIns) (*Person, error) {
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
	received, err := signIns.ReceivedAtSignIn(ctx, raw)
	if err != nil {
		return nil, err
	}
	if received {
		return nil, &InvalidTokenError{ReceivedAtSignIn}
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

// ReceivedAtSignIn is the reason a refused ID token of a console sign-in
// gives.
const ReceivedAtSignIn = "this is the ID token of a console sign-in to ipledger, and such a token is never an API credential: use an access token"

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
