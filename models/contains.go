package models

import "strings"

// Contains is the SQL condition "column col contains needle" (needle
// already lower-cased by the caller; col is compared lower-cased) and its
// one argument. On PostgreSQL it is a LIKE with the needle's wildcards
// escaped: PostgreSQL scans LIKE several times faster than strpos(), which
// is what a search over every machine of a site costs
// (docs/benchmarks.md, "Console pages at 100,000 machines"). SQLite keeps
// instr(), whose LIKE would fold case only for ASCII.
func Contains(d Dialect, col, needle string) (string, any) {
	if d == Postgres {
		r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
		return "lower(" + col + ") LIKE ?", "%" + r.Replace(needle) + "%"
	}
	return "instr(lower(" + col + "), ?) > 0", needle
}
