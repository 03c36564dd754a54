package auth

import (
	"testing"
	"unicode"

	"github.com/ipledger/ipledger/models"
)

// The database's user-name rule (migration 28, models.UsernameRefusedRanges)
// never refuses a name checkName takes: every code point it lists is one
// checkName refuses inside a name. And it lists every code point refused
// by character class (rather than by the normal forms, a leading
// combining mark or being unassigned, which need Unicode tables the
// databases do not share), by Go's Unicode tables.
func TestUsernameRefusedRangesMatchCheckName(t *testing.T) {
	listed := func(r rune) bool {
		for _, rg := range models.UsernameRefusedRanges {
			if rg[0] <= r && r <= rg[1] {
				return true
			}
		}
		return false
	}
	byClass := func(r rune) bool {
		return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.In(r, unicode.Zl, unicode.Zp) ||
			(unicode.Is(unicode.Zs, r) && r != ' ') || blank(r) && !unicode.Is(unicode.Cn, r) ||
			unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue // surrogates: not in UTF-8
		}
		l := listed(r)
		if l {
			if _, err := checkName("al"+string(r)+"ice", "name"); err == nil {
				t.Errorf("U+%04X is listed, but checkName takes a name holding it", r)
			}
		}
		if byClass(r) != l {
			t.Errorf("U+%04X: refused by its class %v, listed %v", r, byClass(r), l)
		}
	}
	for _, ok := range []string{"alice", "Zoë Ångström", "机架 管理员", "o'brien@example.com"} {
		if _, err := checkName(ok, "name"); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}
