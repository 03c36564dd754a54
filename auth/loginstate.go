package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// LoginCookie holds a sign-in's LoginState between /auth/oidc/login and the
// callback: HttpOnly, SameSite=Lax (the issuer's redirect back is a
// top-level GET, which Lax lets through), scoped to /auth/oidc, for
// LoginStateTTL, and cleared by the callback whatever its outcome.
const LoginCookie = "ipledger_oidc"

// LoginStateTTL is how long a person may spend at the issuer's page.
const LoginStateTTL = 10 * time.Minute

// SealLoginState signs st and its expiry under key: the cookie's value.
// The browser may read it (it is its own sign-in) but not change it.
func SealLoginState(key []byte, st LoginState, now time.Time) string {
	body, _ := json.Marshal(struct {
		LoginState
		Exp int64 `json:"e"`
	}{st, now.Add(LoginStateTTL).Unix()})
	p := base64.RawURLEncoding.EncodeToString(body)
	return p + "." + base64.RawURLEncoding.EncodeToString(loginMAC(key, p))
}

// OpenLoginState verifies and decodes a SealLoginState value.
func OpenLoginState(key []byte, v string, now time.Time) (LoginState, error) {
	p, sig, ok := strings.Cut(v, ".")
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if !ok || err != nil || !hmac.Equal(got, loginMAC(key, p)) {
		return LoginState{}, errors.New("the sign-in cookie is missing or was altered: start again")
	}
	body, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return LoginState{}, errors.New("the sign-in cookie does not decode")
	}
	var s struct {
		LoginState
		Exp int64 `json:"e"`
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return LoginState{}, errors.New("the sign-in cookie does not decode")
	}
	if now.Unix() > s.Exp {
		return LoginState{}, errors.New("the sign-in took longer than 10 minutes: start again")
	}
	return s.LoginState, nil
}

func loginMAC(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("oidc-login\x00"))
	m.Write([]byte(payload))
	return m.Sum(nil)
}
