package models

// Migration 31 scopes the reserved-count lock of migration 29's triggers
// to the schema (advisory.go): reservedLockKey was one key of the whole
// database, so every schema's reservations waited for every other
// schema's range recounts, and such a wait closed a deadlock with waits
// in other schemas (two tests' schemas in CI). The three functions that
// take it are redefined with the schema's key (LockReserved); their
// triggers, and what they lock and count, are unchanged.
//
// The LOCK TABLE waits for the transactions that still run the old
// functions, so none of them holds the old key once the new ones run.
// SQLite has no advisory locks: nothing to do.
var schemaV31Postgres = `
LOCK TABLE pools, pool_ranges, expected_dpus, allocations IN SHARE ROW EXCLUSIVE MODE
--;
CREATE OR REPLACE FUNCTION ipledger_lock_reservations() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM pools WHERE name IN ` + reservationPoolNames + ` ORDER BY name FOR UPDATE;
  PERFORM ` + scopedLockSQL("pg_advisory_xact_lock_shared", LockReserved) + `;
END $$
--;
CREATE OR REPLACE FUNCTION ipledger_range_recount() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM pools WHERE id = NEW.pool_id AND name IN ` + reservationPoolNames + `) THEN
    PERFORM ` + scopedLockSQL("pg_advisory_xact_lock", LockReserved) + `;
  END IF;
  ` + rangeRecountSQL(Postgres) + `;
  RETURN NULL;
END $$
--;
CREATE OR REPLACE FUNCTION ipledger_pool_reserved_rename() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM ` + scopedLockSQL("pg_advisory_xact_lock", LockReserved) + `;
  ` + reservedRecountPoolSQL + `;
  RETURN NULL;
END $$
`
