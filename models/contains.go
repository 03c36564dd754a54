package models

import "strings"

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
