package models

// schemaV25 backs the visible-text rule of host names, chassis serial
// numbers and SKUs (ident.Invisible): no control character and no
// invisible format character, so that no name reads as another's. The
// character class lists ident.InvisibleRanges (NUL apart: PostgreSQL text
// cannot hold it, SQLite's triggers look for it on its own).
//
// Rows written before this migration are kept: PostgreSQL's constraints
// are NOT VALID (checked on every new write, not on old rows) and SQLite's
// triggers fire on writes; `ipledger check` names old rows that break the
// rule.
const schemaV25Postgres = `
ALTER TABLE expected_machines ADD CONSTRAINT expected_machines_visible_text CHECK (
  metadata_name !~ '` + invisibleClassPostgres + `'
  AND chassis_serial_number !~ '` + invisibleClassPostgres + `'
  AND (sku_id IS NULL OR sku_id !~ '` + invisibleClassPostgres + `')) NOT VALID
--;
ALTER TABLE machines ADD CONSTRAINT machines_visible_text CHECK (
  chassis_serial_number !~ '` + invisibleClassPostgres + `') NOT VALID
`

const invisibleClassPostgres = `[\u0001-\u001f\u007f-\u009f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]`

// invisibleSQLite is true for a text holding a character of the rule
// (GLOB compares code points in a class's ranges; 45 is '-').
func invisibleSQLite(col string) string {
	return `(` + col + ` GLOB '*[' || char(1,45,31,127,45,159,173,1536,45,1541,1564,1757,1807,2192,45,2193,2274,6158,8203,45,8207,8234,45,8238,8288,45,8292,8294,45,8303,65279,65529,45,65531,69821,69837,78896,45,78911,113824,45,113827,119155,45,119162,917505,917536,45,917631) || ']*' OR instr(` + col + `, char(0)) > 0)`
}

var schemaV25SQLite = `
CREATE TRIGGER expected_machines_visible_text_insert BEFORE INSERT ON expected_machines
WHEN ` + invisibleSQLite("NEW.metadata_name") + ` OR ` + invisibleSQLite("NEW.chassis_serial_number") + ` OR ` + invisibleSQLite("NEW.sku_id") + `
BEGIN SELECT RAISE(ABORT, 'invisible_character: a name, chassis serial number or SKU holds a control or invisible format character'); END
--;
CREATE TRIGGER expected_machines_visible_text_update BEFORE UPDATE OF metadata_name, chassis_serial_number, sku_id ON expected_machines
WHEN ` + invisibleSQLite("NEW.metadata_name") + ` OR ` + invisibleSQLite("NEW.chassis_serial_number") + ` OR ` + invisibleSQLite("NEW.sku_id") + `
BEGIN SELECT RAISE(ABORT, 'invisible_character: a name, chassis serial number or SKU holds a control or invisible format character'); END
--;
CREATE TRIGGER machines_visible_text_insert BEFORE INSERT ON machines
WHEN ` + invisibleSQLite("NEW.chassis_serial_number") + `
BEGIN SELECT RAISE(ABORT, 'invisible_character: a chassis serial number holds a control or invisible format character'); END
--;
CREATE TRIGGER machines_visible_text_update BEFORE UPDATE OF chassis_serial_number ON machines
WHEN ` + invisibleSQLite("NEW.chassis_serial_number") + `
BEGIN SELECT RAISE(ABORT, 'invisible_character: a chassis serial number holds a control or invisible format character'); END
`
