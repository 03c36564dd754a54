package ident

import "unicode"

// VisibleRule says in messages what Invisible refuses.
const VisibleRule = "no control characters and no invisible format characters (Unicode Cc and Cf)"

// InvisibleRanges are the code points Invisible refuses, first and last of
// each range: the control characters (Unicode Cc) and the invisible format
// characters (Cf: zero-width spaces and joiners, bidirectional overrides,
// the byte order mark, tags …) of Unicode 15. The database constraints of
// migration 25 spell out the same ranges, so that the rule holds for a
// writer that bypasses ipledger too; a test keeps the two and Go's Unicode
// tables in step.
var InvisibleRanges = [][2]rune{
	{0x0000, 0x001F}, {0x007F, 0x009F}, {0x00AD, 0x00AD}, {0x0600, 0x0605},
	{0x061C, 0x061C}, {0x06DD, 0x06DD}, {0x070F, 0x070F}, {0x0890, 0x0891},
	{0x08E2, 0x08E2}, {0x180E, 0x180E}, {0x200B, 0x200F}, {0x202A, 0x202E},
	{0x2060, 0x2064}, {0x2066, 0x206F}, {0xFEFF, 0xFEFF}, {0xFFF9, 0xFFFB},
	{0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3},
	{0x1D173, 0x1D17A}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F},
}

// Invisible returns the first character of s an operator could not see
// or that would change how the text around it reads: a control character
// or an invisible format character. A host is shown by its name and a
// force delete is confirmed by typing it, so a bidirectional override or
// a zero-width space would make one host's name read as another's. Names,
// serial numbers, SKUs and label keys and values follow this rule (a
// description may hold tabs and line breaks: allowNewlines).
func Invisible(s string, allowNewlines bool) (rune, bool) {
	for _, r := range s {
		if allowNewlines && (r == '\t' || r == '\n' || r == '\r') {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return r, true
		}
	}
	return 0, false
}
