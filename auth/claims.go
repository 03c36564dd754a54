package auth

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxUsernameLen bounds a person's name as ipledger stores it in the audit
// log (actor "user:NAME").
const MaxUsernameLen = 128

// groupsFrom reads a groups claim that is a string (one group, or several
// separated by commas, as some providers send it) or an array of strings.
// present is false when the claim is absent, so the caller can fall back
// to the userinfo endpoint.
func groupsFrom(claims map[string]any, claim string) (groups []string, present bool, err error) {
	v, ok := claims[claim]
	if !ok || v == nil {
		return nil, false, nil
	}
	switch g := v.(type) {
	case string:
		return SplitList(g), true, nil
	case []any:
		for i, x := range g {
			s, ok := x.(string)
			if !ok {
				return nil, true, fmt.Errorf("claim %q: item %d is not a string", claim, i)
			}
			if s = strings.TrimSpace(s); s != "" {
				groups = append(groups, s)
			}
		}
		return groups, true, nil
	}
	return nil, true, fmt.Errorf("claim %q is neither a string nor an array of strings", claim)
}

// usernameFrom returns the person's name: the configured claim when it is
// set and present, else preferred_username, else email, else sub.
func usernameFrom(claims map[string]any, claim string) (string, error) {
	order := []string{"preferred_username", "email", "sub"}
	if claim != "" && claim != "preferred_username" {
		order = append([]string{claim}, order...)
	}
	for _, c := range order {
		if s, ok := nameClaim(claims, c); ok {
			return checkName(s, c)
		}
	}
	return "", fmt.Errorf("the token names nobody: none of the claims %s is a non-empty string", strings.Join(order, ", "))
}

// nameClaim is the claim c when it is a non-empty string that may name a
// person. An email address names someone only when the issuer vouches
// for it with email_verified the JSON boolean true (OIDC Core 5.1):
// anyone may type any address into their profile at many providers, and
// a string, a number or no email_verified at all is no such word.
func nameClaim(claims map[string]any, c string) (string, bool) {
	s, ok := claims[c].(string)
	if s = strings.TrimSpace(s); !ok || s == "" {
		return "", false
	}
	if c == "email" {
		verified, _ := claims["email_verified"].(bool)
		return s, verified
	}
	return s, true
}

// checkName refuses a name that cannot be an audit actor: too long, not
// UTF-8, or holding a control character (a forged line in a log), a line
// or paragraph separator, or an invisible format character (a
// bidirectional override or a zero-width space makes one name read as
// another).
func checkName(s, from string) (string, error) {
	if len(s) > MaxUsernameLen {
		return "", fmt.Errorf("%s is longer than %d bytes", from, MaxUsernameLen)
	}
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("%s is not valid UTF-8", from)
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp) {
			return "", fmt.Errorf("%s contains a control character", from)
		}
		if unicode.Is(unicode.Cf, r) {
			return "", fmt.Errorf("%s contains an invisible format character (U+%04X)", from, r)
		}
	}
	return s, nil
}
