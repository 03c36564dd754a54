package models

import (
	"fmt"
	"strings"
)

// Migration 28 backs two rules the code keeps with constraints of the
// database, so that they hold for a writer that bypasses ipledger too.
//
// An ExpectedMachine's BMC MAC is stored only in ident.ParseMAC's
// canonical spelling (six lower-case hex octets joined by ':'), as
// migration 26 made it for the machines' column: a second spelling would
// slip past the unique key. Every door has stored ParseMAC's output (and
// before it net.ParseMAC's, the same form); a row written another way is
// canonicalised when ParseMAC would read it (either case, ':' or '-'
// throughout, blanks around it) and no other row holds the same address.
// A row that cannot be (not a MAC, or its address held by another row
// too) is kept: PostgreSQL's constraint is NOT VALID (checked on every
// new write of a row, not on old rows), SQLite's triggers fire on writes,
// and `ipledger check` (rule bmc_macs) names the row.
//
// A single sign-on session's user name (the NAME of the actor user:NAME)
// obeys, as far as SQL can say it, the rule auth's checkName keeps: 1 to
// MaxUsernameLen (128) bytes of UTF-8, no blank at either end, no two
// spaces in a row, and none of UsernameRefusedRanges (control and
// invisible format characters, line and paragraph separators, spaces
// other than U+0020, characters that render as nothing, private use).
// What needs Unicode tables the databases do not share (normal forms, a
// combining mark at the start, unassigned code points) stays the code's
// alone. A session breaking the rule cannot have been opened by ipledger:
// it is ended (deleted) here, and its person signs in again through the
// rule.
var (
	schemaV28Postgres = schemaV28MACPostgres + `
--;
DELETE FROM user_sessions WHERE NOT (` + usernameRulePostgres + `)
--;
ALTER TABLE user_sessions ADD CONSTRAINT user_sessions_username_rule CHECK (` + usernameRulePostgres + `)
`
	schemaV28SQLite = schemaV28MACSQLite + `
--;
DELETE FROM user_sessions WHERE NOT (` + usernameRuleSQLite + `)
--;
CREATE TRIGGER user_sessions_username_rule_insert BEFORE INSERT ON user_sessions
WHEN NOT (` + strings.ReplaceAll(usernameRuleSQLite, "username", "NEW.username") + `)
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: user_sessions_username_rule'); END
--;
CREATE TRIGGER user_sessions_username_rule_update BEFORE UPDATE OF username ON user_sessions
WHEN NOT (` + strings.ReplaceAll(usernameRuleSQLite, "username", "NEW.username") + `)
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: user_sessions_username_rule'); END
`
)

// macCanonSQL is ParseMAC's spelling of a stored address, when ParseMAC
// reads it: when the result is canonical and macMixedSQL (both separators)
// is false.
const (
	macCanonSQL = `lower(replace(trim(%[1]s), '-', ':'))`
	macMixedSQL = `(trim(%[1]s) LIKE '%%:%%' AND trim(%[1]s) LIKE '%%-%%')`
)

var (
	schemaV28MACPostgres = `
UPDATE expected_machines e SET bmc_mac_address = ` + fmt.Sprintf(macCanonSQL, "e.bmc_mac_address") + `
WHERE e.bmc_mac_address <> ` + fmt.Sprintf(macCanonSQL, "e.bmc_mac_address") + `
  AND ` + fmt.Sprintf(macCanonSQL, "e.bmc_mac_address") + ` ~ '^[0-9a-f]{2}(:[0-9a-f]{2}){5}$'
  AND NOT ` + fmt.Sprintf(macMixedSQL, "e.bmc_mac_address") + `
  AND NOT EXISTS (SELECT 1 FROM expected_machines o WHERE o.id <> e.id
    AND ` + fmt.Sprintf(macCanonSQL, "o.bmc_mac_address") + ` = ` + fmt.Sprintf(macCanonSQL, "e.bmc_mac_address") + `)
--;
ALTER TABLE expected_machines ADD CONSTRAINT expected_machines_bmc_mac_canonical
  CHECK (bmc_mac_address ~ '^[0-9a-f]{2}(:[0-9a-f]{2}){5}$') NOT VALID
`
	schemaV28MACSQLite = `
UPDATE expected_machines SET bmc_mac_address = ` + fmt.Sprintf(macCanonSQL, "bmc_mac_address") + `
WHERE bmc_mac_address <> ` + fmt.Sprintf(macCanonSQL, "bmc_mac_address") + `
  AND ` + fmt.Sprintf(macCanonSQL, "bmc_mac_address") + ` GLOB '` + macGlob + `'
  AND NOT ` + fmt.Sprintf(macMixedSQL, "bmc_mac_address") + `
  AND NOT EXISTS (SELECT 1 FROM expected_machines o WHERE o.id <> expected_machines.id
    AND ` + fmt.Sprintf(macCanonSQL, "o.bmc_mac_address") + ` = ` + fmt.Sprintf(macCanonSQL, "expected_machines.bmc_mac_address") + `)
--;
CREATE TRIGGER expected_machines_bmc_mac_canonical_insert BEFORE INSERT ON expected_machines
WHEN NEW.bmc_mac_address NOT GLOB '` + macGlob + `'
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: expected_machines_bmc_mac_canonical'); END
--;
CREATE TRIGGER expected_machines_bmc_mac_canonical_update BEFORE UPDATE OF bmc_mac_address ON expected_machines
WHEN NEW.bmc_mac_address NOT GLOB '` + macGlob + `'
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: expected_machines_bmc_mac_canonical'); END
`
)

// UsernameRefusedRanges are the code points a person's name never holds
// (auth's checkName refuses each anywhere in a name), first and last of
// each range, by Unicode 15: the control and invisible format characters
// of ident.InvisibleRanges, line and paragraph separators (Zl, Zp),
// spaces other than U+0020 (Zs), variation selectors and the other
// default-ignorable code points, the Braille pattern blank U+2800 and the
// private-use planes (Co). Migration 28's constraint spells them out; a
// test of auth holds them to checkName and Go's Unicode tables.
var UsernameRefusedRanges = [][2]rune{
	{0x0000, 0x001F}, {0x007F, 0x00A0}, {0x00AD, 0x00AD}, {0x034F, 0x034F},
	{0x0600, 0x0605}, {0x061C, 0x061C}, {0x06DD, 0x06DD}, {0x070F, 0x070F},
	{0x0890, 0x0891}, {0x08E2, 0x08E2}, {0x115F, 0x1160}, {0x1680, 0x1680},
	{0x17B4, 0x17B5}, {0x180B, 0x180F}, {0x2000, 0x200F}, {0x2028, 0x202F},
	{0x205F, 0x206F}, {0x2800, 0x2800}, {0x3000, 0x3000}, {0x3164, 0x3164},
	{0xE000, 0xF8FF}, {0xFE00, 0xFE0F}, {0xFEFF, 0xFEFF}, {0xFFA0, 0xFFA0},
	{0xFFF0, 0xFFFB}, {0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x1343F},
	{0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0000, 0xE0FFF}, {0xF0000, 0xFFFFD},
	{0x100000, 0x10FFFD},
}

// usernameRule{Postgres,SQLite} hold for a user name column "username"
// that obeys the rule: byte length, blanks, then the refused characters
// (NUL apart on PostgreSQL, whose text cannot hold it).
var (
	usernameRulePostgres = `octet_length(username) BETWEEN 1 AND 128
  AND username NOT LIKE ' %' AND username NOT LIKE '% ' AND username NOT LIKE '%  %'
  AND username !~ '` + usernameClassPostgres() + `'`
	usernameRuleSQLite = `length(CAST(username AS BLOB)) BETWEEN 1 AND 128
  AND username NOT LIKE ' %' AND username NOT LIKE '% ' AND username NOT LIKE '%  %'
  AND username NOT GLOB '*[' || ` + usernameClassSQLite() + ` || ']*' AND instr(username, char(0)) = 0`
)

// usernameClassPostgres is UsernameRefusedRanges as a regular expression
// bracket, NUL left out.
func usernameClassPostgres() string {
	esc := func(r rune) string {
		if r > 0xFFFF {
			return fmt.Sprintf(`\U%08x`, r)
		}
		return fmt.Sprintf(`\u%04x`, r)
	}
	var b strings.Builder
	b.WriteString("[")
	for _, rg := range UsernameRefusedRanges {
		first := max(rg[0], 1)
		b.WriteString(esc(first))
		if rg[1] != first {
			b.WriteString("-" + esc(rg[1]))
		}
	}
	b.WriteString("]")
	return b.String()
}

// usernameClassSQLite is UsernameRefusedRanges as the inside of a GLOB
// bracket, built with char() (45 is '-'), NUL left out (instr finds it).
func usernameClassSQLite() string {
	var codes []string
	for _, rg := range UsernameRefusedRanges {
		first := max(rg[0], 1)
		codes = append(codes, fmt.Sprint(first))
		if rg[1] != first {
			codes = append(codes, "45", fmt.Sprint(rg[1]))
		}
	}
	return "char(" + strings.Join(codes, ",") + ")"
}
