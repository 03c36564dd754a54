package models

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// Contains is the SQL condition "column col contains needle" (needle
// already lower-cased by the caller; col is compared lower-cased) and its
// one argument. On PostgreSQL it is a LIKE with the needle's wildcards
// escaped: the trigram indexes of search_index.go answer lower(col) LIKE
// from the index, and without them PostgreSQL scans LIKE several times
// faster than strpos() (docs/benchmarks.md, "Console pages at 100,000
// machines"). SQLite keeps instr() over ipledger_lower (sqlite_lower.go):
// its own lower() and LIKE fold case only for ASCII.
func Contains(d Dialect, col, needle string) (string, any) {
	if d == Postgres {
		r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
		return "lower(" + col + ") LIKE ?", "%" + r.Replace(needle) + "%"
	}
	// An ASCII text is found the same through SQLite's lower(), which
	// runs without a call into Go per row (the Kelvin sign and a dotted
	// capital I, which Go folds to ASCII, are the exceptions).
	for i := 0; i < len(needle); i++ {
		if needle[i] >= 0x80 {
			return "instr(" + sqliteLower + "(" + col + "), ?) > 0", needle
		}
	}
	return "instr(lower(" + col + "), ?) > 0", needle
}

// SearchForms are the spellings of a search text that a search looks for,
// so that it finds a name however its accents are encoded: the text in
// Unicode normalization form C ("é" as one code point, what keyboards
// type) and in form D ("e" then a combining acute, what some tools and
// file systems write), one text when both are the same (any text without
// accents or other combining marks). Stored names keep the bytes they were
// written with; the search, exact or for part of a text, tests each form
// (docs/console.md "Names in any Unicode form").
func SearchForms(s string) []string {
	c, d := norm.NFC.String(s), norm.NFD.String(s)
	if c == d {
		return []string{c}
	}
	return []string{c, d}
}

// ContainsForm reports whether v, lower-cased, holds one of forms (lower
// case, as SearchForms gives them): the Go side of Contains, for saying
// which field of a found row matched.
func ContainsForm(v string, forms []string) bool {
	if v == "" {
		return false
	}
	lv := strings.ToLower(v)
	for _, f := range forms {
		if strings.Contains(lv, f) {
			return true
		}
	}
	return false
}
