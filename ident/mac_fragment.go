package ident

import "strings"

// MACFragments returns what part of a MAC address s may be, spelled as
// ipledger stores MACs (lower-case hex octets joined by ':'), so that a
// substring search of the stored column finds it whatever notation the
// operator typed: two-digit groups joined by ':' or '-' (00-50-0), Cisco's
// four-digit groups joined by '.' (0050.0), or bare hex digits (00500),
// in any case, starting and ending on an octet boundary or inside an
// octet. A fragment with separators says where its octets begin and has
// one spelling (0050.0 is 00:50:0, 0-50 is 0:50); bare hex digits may
// begin on a boundary or inside an octet and have two (00500 is 00:50:0
// or 0:05:00; a single digit one). It returns nil when s is no such part:
// another character, two kinds of separator, a group of the wrong width
// inside it, or more digits than a MAC has.
//
// This reads search text only: a MAC that is stored or looked up exactly
// goes through ParseMAC, which takes one spelling alone.
func MACFragments(s string) []string {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return nil
	}
	var sep byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isHex(c):
		case c == ':' || c == '-' || c == '.':
			if sep != 0 && sep != c {
				return nil
			}
			sep = c
		default:
			return nil
		}
	}
	if sep == 0 {
		if len(s) > 12 {
			return nil
		}
		return uniqStrings(colonize(s, 0, "", ""), colonize(s, 1, "", ""))
	}
	width := 2
	if sep == '.' {
		width = 4
	}
	parts := strings.Split(s, string(sep))
	last := len(parts) - 1
	digits := 0
	for i, p := range parts {
		if (i > 0 && i < last && len(p) != width) || len(p) > width {
			return nil
		}
		digits += len(p)
	}
	if digits == 0 {
		return nil
	}
	// Where the first digit lies in the address (0 to 11): a separator
	// before it means a group before it; a shorter first group ends where
	// a group does.
	start := width - len(parts[0])
	end := start + digits
	if len(parts[last]) == 0 {
		end += width // a group follows the trailing separator
	}
	if end > 12 {
		return nil
	}
	lead, trail := "", ""
	if parts[0] == "" {
		lead = ":"
	}
	if parts[last] == "" {
		trail = ":"
	}
	return []string{colonize(strings.Join(parts, ""), start%2, lead, trail)}
}

// colonize spells hex digits as part of a stored MAC: a ':' before each
// digit that begins an octet, the first digit lying odd digits into one
// when odd is 1.
func colonize(hex string, odd int, lead, trail string) string {
	var b strings.Builder
	b.WriteString(lead)
	for i := 0; i < len(hex); i++ {
		if i > 0 && (i+odd)%2 == 0 {
			b.WriteByte(':')
		}
		b.WriteByte(hex[i])
	}
	b.WriteString(trail)
	return b.String()
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

func uniqStrings(a, b string) []string {
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}
