package models

// Migration 32: a DPU serial number is declared once whatever its case
// (docs/reservations.md). MT5002X00001 and mt5002x00001 name one DPU —
// serial numbers are printed in upper case and typed in any — so a second
// declaration in another case is a reservation that never matches the
// DPU the site expects. A unique index on lower(serial_number) refuses it
// on both databases, even from writers that bypass the allocator; a
// plain one on the same expression answers the allocator's look-up (and
// this migration's) from an index.
//
// A database may already hold serials that differ only in case: the
// migration must not fail on it, and the server must start and report
// them. As migration 12 did for token names, every row but the oldest
// of each serial is marked serial_case_duplicate and left out of the
// unique index; nothing is deleted. A marked row keeps its serial
// (it can only be deleted, or rewritten unmarked, which the index then
// holds to the rule), no row is ever marked afterwards, and no row may
// take the serial of a marked one in another case — so a kept duplicate
// never lets a new one in, even once the oldest row is gone. The start-up
// log and `ipledger migrate` list them (SerialCaseDuplicates), and
// `ipledger check` (rule declared_once) names them until an operator
// removes one of each.
var migrationV32 = Migration{
	Version: 32, Name: "DPU serials declared once in any case",
	SQL: `
ALTER TABLE expected_dpus ADD COLUMN serial_case_duplicate BOOLEAN NOT NULL DEFAULT FALSE
--;
CREATE INDEX expected_dpus_serial_folded ON expected_dpus (lower(serial_number))
--;
UPDATE expected_dpus SET serial_case_duplicate = TRUE
WHERE EXISTS (SELECT 1 FROM expected_dpus o
  WHERE lower(o.serial_number) = lower(expected_dpus.serial_number) AND o.id < expected_dpus.id)
--;
CREATE UNIQUE INDEX expected_dpus_serial_folded_key ON expected_dpus (lower(serial_number)) WHERE NOT serial_case_duplicate`,
	Postgres: `
CREATE OR REPLACE FUNCTION ipledger_expected_dpu_serial_case() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.serial_case_duplicate AND (TG_OP = 'INSERT' OR NOT OLD.serial_case_duplicate OR NEW.serial_number <> OLD.serial_number) THEN
    RAISE EXCEPTION 'serial_case_duplicate: only a row kept by migration 32 is marked, and it keeps its serial %', NEW.serial_number
      USING ERRCODE = '23505', CONSTRAINT = 'expected_dpus_serial_folded_key';
  END IF;
  IF NOT NEW.serial_case_duplicate AND EXISTS (SELECT 1 FROM expected_dpus o
      WHERE o.serial_case_duplicate AND o.id <> NEW.id AND lower(o.serial_number) = lower(NEW.serial_number)) THEN
    RAISE EXCEPTION 'serial number % is declared in another case', NEW.serial_number
      USING ERRCODE = '23505', CONSTRAINT = 'expected_dpus_serial_folded_key';
  END IF;
  RETURN NEW;
END $$
--;
CREATE TRIGGER expected_dpus_serial_case BEFORE INSERT OR UPDATE ON expected_dpus
  FOR EACH ROW EXECUTE FUNCTION ipledger_expected_dpu_serial_case()`,
	SQLite: `
CREATE TRIGGER expected_dpus_serial_case_insert BEFORE INSERT ON expected_dpus
WHEN NEW.serial_case_duplicate OR EXISTS (SELECT 1 FROM expected_dpus o
  WHERE o.serial_case_duplicate AND lower(o.serial_number) = lower(NEW.serial_number))
BEGIN SELECT RAISE(ABORT, 'UNIQUE constraint failed: expected_dpus_serial_folded_key (serial number declared in another case)'); END
--;
CREATE TRIGGER expected_dpus_serial_case_update BEFORE UPDATE OF serial_number, serial_case_duplicate ON expected_dpus
WHEN (NEW.serial_case_duplicate AND (NOT OLD.serial_case_duplicate OR NEW.serial_number <> OLD.serial_number))
  OR (NOT NEW.serial_case_duplicate AND EXISTS (SELECT 1 FROM expected_dpus o
    WHERE o.serial_case_duplicate AND o.id <> NEW.id AND lower(o.serial_number) = lower(NEW.serial_number)))
BEGIN SELECT RAISE(ABORT, 'UNIQUE constraint failed: expected_dpus_serial_folded_key (serial number declared in another case)'); END`,
}
