package auth

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/ipledger/ipledger/ident"
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
	if !ok || s == "" {
		return "", false
	}
	if c == "email" {
		verified, _ := claims["email_verified"].(bool)
		return s, verified
	}
	return s, true
}

// checkName returns the name s as ipledger records it (NFC), or refuses
// one that cannot be an audit actor or would read as another person's:
//   - longer than MaxUsernameLen bytes, or not UTF-8;
//   - blanks at either end (never trimmed: "alice " is not alice);
//   - the visible-text rule names and serials obey (ident.Invisible:
//     control and invisible format characters), line and paragraph
//     separators, spaces other than U+0020 and two of them in a row
//     (a page shows a run of spaces as one);
//   - characters that render as nothing: variation selectors, the other
//     default-ignorable code points (U+034F, the Hangul fillers U+115F,
//     U+1160, U+3164, U+FFA0 …), the Braille blank U+2800, private-use
//     and unassigned code points;
//   - a combining mark at the start (it would join what precedes the
//     name, "user:" on a page);
//   - compatibility characters: the name must be its own NFKC form, so
//     fullwidth "ａｌｉｃｅ" and ligatures are refused.
//
// Lookalikes across scripts (a Cyrillic "а" in "аlice") are not refused:
// every character is visible and plain, and telling scripts apart is the
// identity provider's job, which owns the namespace (docs/identity.md).
func checkName(s, from string) (string, error) {
	if len(s) > MaxUsernameLen {
		return "", fmt.Errorf("%s is longer than %d bytes", from, MaxUsernameLen)
	}
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("%s is not valid UTF-8", from)
	}
	if s == "" {
		return "", fmt.Errorf("%s is empty", from)
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return "", fmt.Errorf("%s begins or ends with a blank: names are taken as given, never trimmed", from)
	}
	n := norm.NFC.String(s)
	if len(n) > MaxUsernameLen {
		return "", fmt.Errorf("%s is longer than %d bytes", from, MaxUsernameLen)
	}
	if r, bad := ident.Invisible(n, false); bad {
		return "", fmt.Errorf("%s contains a control or invisible format character (U+%04X): want %s", from, r, ident.VisibleRule)
	}
	if r, _ := utf8.DecodeRuneInString(n); unicode.Is(unicode.M, r) {
		return "", fmt.Errorf("%s begins with a combining mark (U+%04X)", from, r)
	}
	if strings.Contains(n, "  ") {
		return "", fmt.Errorf("%s contains two spaces in a row, which a page shows as one", from)
	}
	for _, r := range n {
		switch {
		case unicode.In(r, unicode.Zl, unicode.Zp):
			return "", fmt.Errorf("%s contains a line or paragraph separator (U+%04X)", from, r)
		case unicode.Is(unicode.Zs, r) && r != ' ':
			return "", fmt.Errorf("%s contains a space other than U+0020 (U+%04X)", from, r)
		case blank(r):
			return "", fmt.Errorf("%s contains a character that renders as nothing (U+%04X)", from, r)
		}
	}
	if k := norm.NFKC.String(n); k != n {
		return "", fmt.Errorf("%s contains a compatibility character (%s): it would read as %q; send the plain form", from, firstCompat(n), k)
	}
	return n, nil
}

// blank reports whether r renders as nothing, or as whatever a font
// makes of it: a variation selector, another default-ignorable code point
// (Unicode's Other_Default_Ignorable_Code_Point: the combining grapheme
// joiner, the Hangul fillers, …), the Braille pattern blank, a
// private-use or an unassigned code point.
func blank(r rune) bool {
	return unicode.Is(unicode.Variation_Selector, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		r == '\u2800' || unicode.Is(unicode.Co, r) || unicode.Is(unicode.Cn, r)
}

// firstCompat names the first character of s whose NFKC form differs.
func firstCompat(s string) string {
	for _, r := range s {
		if norm.NFKC.String(string(r)) != string(r) {
			return fmt.Sprintf("U+%04X", r)
		}
	}
	return "a sequence"
}
