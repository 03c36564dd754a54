package views

import (
	"strconv"
	"strings"
)

// Count shows a count for people: a decimal string with a thousands
// separator every three digits ("18,446,744,073,709,551,616"), however
// long (pool sizes and counts are decimal strings because an IPv6 pool
// does not fit in 64 bits). Anything that is not a plain decimal integer
// is returned as it is. Counts only: addresses, VLAN ids, VNIs,
// revisions and versions are identifiers and are shown as stored.
func Count(s string) string {
	digits := strings.TrimPrefix(s, "-")
	if len(digits) <= 3 || strings.Trim(digits, "0123456789") != "" {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(digits)/3)
	if len(digits) != len(s) {
		b.WriteByte('-')
	}
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// CountInt is Count of an integer.
func CountInt[T ~int | ~int64](n T) string { return Count(strconv.FormatInt(int64(n), 10)) }
