package ident

import (
	"testing"
	"unicode"
)

// InvisibleRanges (and the migration that writes them as constraints)
// list exactly what Invisible refuses: a Go release with a newer Unicode
// that adds a format character fails here, and the constraints get a new
// migration.
func TestInvisibleRangesMatchUnicode(t *testing.T) {
	listed := func(r rune) bool {
		for _, rg := range InvisibleRanges {
			if rg[0] <= r && r <= rg[1] {
				return true
			}
		}
		return false
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		_, refused := Invisible(string(r), false)
		if r >= 0xD800 && r <= 0xDFFF {
			continue // surrogates are not characters of a Go string
		}
		if refused != listed(r) {
			t.Fatalf("U+%04X: Invisible refuses it %v, InvisibleRanges lists it %v", r, refused, listed(r))
		}
	}
}

func TestInvisible(t *testing.T) {
	for _, c := range []struct {
		s        string
		newlines bool
		want     rune
		refused  bool
	}{
		{"r01-u10", false, 0, false},
		{"Rack 7 / Ünit 10 — 机架", false, 0, false},
		{"r01\u202eu10", false, 0x202E, true},
		{"r01\u200bu10", false, 0x200B, true},
		{"\ufeffr01", false, 0xFEFF, true},
		{"a\nb", false, '\n', true},
		{"a\nb\tc\r\n", true, 0, false},
		{"a\nb\x00", true, 0, true},
		{"tag\U000E0041", true, 0xE0041, true},
	} {
		r, refused := Invisible(c.s, c.newlines)
		if refused != c.refused || r != c.want {
			t.Errorf("Invisible(%q, %v) = U+%04X %v, want U+%04X %v", c.s, c.newlines, r, refused, c.want, c.refused)
		}
	}
}
