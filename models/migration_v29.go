package models

import "strings"

// Migration 29 keeps the reserved count of the reservation pools on write,
// so that a pool's stats cost O(ranges + quarantines) whatever the size of
// the fleet (docs/decisions.md "Pool pages cost O(1) in allocations").
//
// range_counts.reserved_unheld is, per range of lo-ip (lo-ip-v6), the
// number of ExpectedDpu loopback_ip_key (loopback_ip_v6_key) values in the
// range that no allocation row of the pool holds, in any state. A read
// adds the quarantines whose hold has run out and whose value is reserved
// (an expired quarantine no longer holds its value: docs/api.md), which
// are few and read through the partial index of quarantines.
//
// Triggers keep it in the writing transaction, whichever path writes:
//
//   - expected_dpus INSERT, DELETE (cascades from expected_machines
//     included) and UPDATE of a key: ±1 on the range of the reservation
//     pool that holds the key, unless an allocation of that pool holds it;
//   - allocations INSERT, DELETE and UPDATE of pool_id or value_key in a
//     reservation pool: ∓1 on the value's range when an ExpectedDpu
//     reserves the value;
//   - pool_ranges INSERT and UPDATE of bounds or pool: the range's recount
//     (migration 6's trigger, which creates the range_counts row) counts
//     it too;
//   - pools UPDATE of name to or from a reservation pool's name: its ranges
//     are recounted.
//
// PostgreSQL (READ COMMITTED): a reservation and an allocation of one
// value written by two transactions must not both miss the other. Each
// trigger locks before it looks, and looks in a statement of its own
// (which takes a fresh snapshot once the lock is granted):
//
//   - expected_dpus triggers take the reservation pools' rows FOR UPDATE,
//     allocation triggers their pool's row FOR SHARE (as migration 11's
//     range check does), so a reservation and an allocation, or their
//     removals, wait for one another;
//   - a range cannot gain an allocation before it commits, but it can gain
//     a reservation, and a pool that becomes a reservation pool (created,
//     or renamed) has no row under that name the expected_dpus triggers
//     could lock yet: those triggers also take the advisory lock
//     reservedLockKey shared, and a recount of a reservation pool's range
//     and a rename to or from a reservation pool's name take it exclusive.
//
// The allocator holds the pool rows already (it locks lo-ip and lo-ip-v6
// before any ExpectedMachine write or ingestion, and a pool before writing
// in it), so its writes wait for nothing new. TestReservedCountRacesOnPostgres
// holds each pair of writers in both orders. SQLite has one writer at a
// time.
//
// The column is backfilled after the triggers exist, under their locks.

// reservedLockKey is the advisory lock taken by the PostgreSQL triggers
// of this migration: one key of the whole database, which migration 31
// replaces with the schema's key (models.LockReserved).
const reservedLockKey = "7243518193"

// reservationPools pairs each reservation pool with the expected_dpus key
// column that reserves its values (allocator.reservationColumn).
var reservationPools = [][2]string{{"lo-ip", "loopback_ip_key"}, {"lo-ip-v6", "loopback_ip_v6_key"}}

// reservedUnheldSQL counts the reservations that no allocation holds in
// the range row r (NEW, or an alias of pool_ranges).
func reservedUnheldSQL(r string) string {
	var parts []string
	for _, rp := range reservationPools {
		parts = append(parts, strings.NewReplacer("$POOL", rp[0], "$COL", rp[1], "$R", r).Replace(
			`(SELECT COUNT(*) FROM expected_dpus d WHERE d.$COL BETWEEN $R.first_key AND $R.last_key`+
				` AND EXISTS (SELECT 1 FROM pools p WHERE p.id = $R.pool_id AND p.name = '$POOL')`+
				` AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = $R.pool_id AND a.value_key = d.$COL))`))
	}
	return "(" + strings.Join(parts, " + ") + ")"
}

// reservedDeltaSQL adds to reserved_unheld, per range, the sum of s over
// the rows that parts select (each a range id and s).
func reservedDeltaSQL(parts []string) string {
	// No alias on range_counts: SQLite before 3.45 or so (the sqlite3
	// tool of Debian 12 among them) refuses one in a trigger's UPDATE and
	// then cannot open the database at all.
	return `UPDATE range_counts SET reserved_unheld = range_counts.reserved_unheld + d.n
FROM (SELECT x.id, SUM(x.s) AS n FROM (` + strings.Join(parts, "\n  UNION ALL\n  ") + `) x GROUP BY x.id) d
WHERE range_counts.range_id = d.id AND d.n <> 0`
}

// reservedDPUDeltaSQL: src has the columns loopback_ip_key,
// loopback_ip_v6_key and s (+1 for a reservation made, -1 for one
// removed); each key counts on its reservation pool's range unless an
// allocation of the pool holds it.
func reservedDPUDeltaSQL(src string) string {
	var parts []string
	for _, rp := range reservationPools {
		parts = append(parts, strings.NewReplacer("$POOL", rp[0], "$COL", rp[1], "$SRC", src).Replace(
			`SELECT r.id, e.s FROM $SRC e JOIN pools p ON p.name = '$POOL'`+
				` JOIN pool_ranges r ON r.pool_id = p.id AND r.first_key <= e.$COL AND e.$COL <= r.last_key`+
				` WHERE NOT EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = p.id AND a.value_key = e.$COL)`))
	}
	return reservedDeltaSQL(parts)
}

// reservedAllocationDeltaSQL: src has the columns pool_id, value_key and s
// (-1 for an allocation made, +1 for one removed); each counts on its
// range when its pool is a reservation pool and an ExpectedDpu reserves
// its value.
func reservedAllocationDeltaSQL(src string) string {
	var held []string
	for _, rp := range reservationPools {
		held = append(held, strings.NewReplacer("$POOL", rp[0], "$COL", rp[1]).Replace(
			`(p.name = '$POOL' AND EXISTS (SELECT 1 FROM expected_dpus d WHERE d.$COL = e.value_key))`))
	}
	return reservedDeltaSQL([]string{strings.NewReplacer("$SRC", src).Replace(
		`SELECT r.id, e.s FROM $SRC e JOIN pools p ON p.id = e.pool_id` +
			` JOIN pool_ranges r ON r.pool_id = e.pool_id AND r.first_key <= e.value_key AND e.value_key <= r.last_key` +
			` WHERE ` + strings.Join(held, " OR "))})
}

// reservationPoolNames is the SQL list of the reservation pools' names.
const reservationPoolNames = `('lo-ip', 'lo-ip-v6')`

// rangeRecountSQL is migration 6's recount of the range row NEW, with the
// reservations no allocation holds. PostgreSQL and SQLite spell the
// upsert and the counts differently.
func rangeRecountSQL(d Dialect) string {
	if d == Postgres {
		return `INSERT INTO range_counts (range_id, allocated, quarantined, reserved_unheld)
  SELECT NEW.id, COUNT(*) FILTER (WHERE a.state = 'allocated'), COUNT(*) FILTER (WHERE a.state = 'quarantined'), ` + reservedUnheldSQL("NEW") + `
  FROM allocations a WHERE a.pool_id = NEW.pool_id AND a.value_key BETWEEN NEW.first_key AND NEW.last_key
  ON CONFLICT (range_id) DO UPDATE SET allocated = EXCLUDED.allocated, quarantined = EXCLUDED.quarantined,
    reserved_unheld = EXCLUDED.reserved_unheld`
	}
	return `INSERT OR REPLACE INTO range_counts (range_id, allocated, quarantined, reserved_unheld)
  SELECT NEW.id, COALESCE(SUM(a.state = 'allocated'), 0), COALESCE(SUM(a.state = 'quarantined'), 0), ` + reservedUnheldSQL("NEW") + `
  FROM allocations a WHERE a.pool_id = NEW.pool_id AND a.value_key BETWEEN NEW.first_key AND NEW.last_key`
}

// reservedRecountPoolSQL recounts every range of the pool row NEW.
var reservedRecountPoolSQL = `UPDATE range_counts SET reserved_unheld = (SELECT ` + reservedUnheldSQL("r") +
	` FROM pool_ranges r WHERE r.id = range_counts.range_id)
  WHERE range_id IN (SELECT id FROM pool_ranges WHERE pool_id = NEW.id)`

const schemaV29Column = `ALTER TABLE range_counts ADD COLUMN reserved_unheld BIGINT NOT NULL DEFAULT 0`

// schemaV29Backfill counts every range.
var schemaV29Backfill = `UPDATE range_counts SET reserved_unheld = (SELECT ` + reservedUnheldSQL("r") +
	` FROM pool_ranges r WHERE r.id = range_counts.range_id)`

var schemaV29Postgres = `
LOCK TABLE pools, pool_ranges, expected_dpus, allocations IN SHARE ROW EXCLUSIVE MODE
--;
` + schemaV29Column + `
--;
CREATE FUNCTION ipledger_lock_reservations() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM pools WHERE name IN ` + reservationPoolNames + ` ORDER BY name FOR UPDATE;
  PERFORM pg_advisory_xact_lock_shared(` + reservedLockKey + `);
END $$
--;
` + pgDPUReservedTrigger("INSERT", "NEW", "new_dpus", "1") + `
--;
` + pgDPUReservedTrigger("DELETE", "OLD", "old_dpus", "-1") + `
--;
CREATE FUNCTION ipledger_expected_dpus_reserved_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM ipledger_lock_reservations();
  ` + reservedDPUDeltaSQL(`(SELECT OLD.loopback_ip_key AS loopback_ip_key, OLD.loopback_ip_v6_key AS loopback_ip_v6_key, -1 AS s
    UNION ALL SELECT NEW.loopback_ip_key, NEW.loopback_ip_v6_key, 1)`) + `;
  RETURN NULL;
END $$
--;
CREATE TRIGGER expected_dpus_reserved_update AFTER UPDATE OF loopback_ip_key, loopback_ip_v6_key ON expected_dpus
  FOR EACH ROW WHEN (OLD.loopback_ip_key IS DISTINCT FROM NEW.loopback_ip_key OR OLD.loopback_ip_v6_key IS DISTINCT FROM NEW.loopback_ip_v6_key)
  EXECUTE FUNCTION ipledger_expected_dpus_reserved_update()
--;
` + pgAllocationReservedTrigger("INSERT", "NEW", "new_allocations", "-1") + `
--;
` + pgAllocationReservedTrigger("DELETE", "OLD", "old_allocations", "1") + `
--;
CREATE FUNCTION ipledger_allocations_reserved_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM pools WHERE name IN ` + reservationPoolNames + ` AND id IN (OLD.pool_id, NEW.pool_id) ORDER BY name FOR SHARE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  ` + reservedAllocationDeltaSQL(`(SELECT OLD.pool_id AS pool_id, OLD.value_key AS value_key, 1 AS s
    UNION ALL SELECT NEW.pool_id, NEW.value_key, -1)`) + `;
  RETURN NULL;
END $$
--;
CREATE TRIGGER allocations_reserved_update AFTER UPDATE OF pool_id, value_key ON allocations
  FOR EACH ROW WHEN (OLD.pool_id <> NEW.pool_id OR OLD.value_key <> NEW.value_key)
  EXECUTE FUNCTION ipledger_allocations_reserved_update()
--;
CREATE OR REPLACE FUNCTION ipledger_range_recount() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM pools WHERE id = NEW.pool_id AND name IN ` + reservationPoolNames + `) THEN
    PERFORM pg_advisory_xact_lock(` + reservedLockKey + `);
  END IF;
  ` + rangeRecountSQL(Postgres) + `;
  RETURN NULL;
END $$
--;
CREATE FUNCTION ipledger_pool_reserved_rename() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(` + reservedLockKey + `);
  ` + reservedRecountPoolSQL + `;
  RETURN NULL;
END $$
--;
CREATE TRIGGER pools_reserved_rename AFTER UPDATE OF name ON pools
  FOR EACH ROW WHEN (OLD.name <> NEW.name AND (OLD.name IN ` + reservationPoolNames + ` OR NEW.name IN ` + reservationPoolNames + `))
  EXECUTE FUNCTION ipledger_pool_reserved_rename()
--;
` + schemaV29Backfill

var schemaV29SQLite = schemaV29Column + `
--;
DROP TRIGGER pool_ranges_recount_insert
--;
CREATE TRIGGER pool_ranges_recount_insert AFTER INSERT ON pool_ranges
BEGIN
  ` + rangeRecountSQL(SQLite) + `;
END
--;
DROP TRIGGER pool_ranges_recount_update
--;
CREATE TRIGGER pool_ranges_recount_update AFTER UPDATE OF first_key, last_key, pool_id ON pool_ranges
BEGIN
  ` + rangeRecountSQL(SQLite) + `;
END
--;
CREATE TRIGGER expected_dpus_reserved_insert AFTER INSERT ON expected_dpus
WHEN NEW.loopback_ip_key IS NOT NULL OR NEW.loopback_ip_v6_key IS NOT NULL
BEGIN
  ` + reservedDPUDeltaSQL(`(SELECT NEW.loopback_ip_key AS loopback_ip_key, NEW.loopback_ip_v6_key AS loopback_ip_v6_key, 1 AS s)`) + `;
END
--;
CREATE TRIGGER expected_dpus_reserved_delete AFTER DELETE ON expected_dpus
WHEN OLD.loopback_ip_key IS NOT NULL OR OLD.loopback_ip_v6_key IS NOT NULL
BEGIN
  ` + reservedDPUDeltaSQL(`(SELECT OLD.loopback_ip_key AS loopback_ip_key, OLD.loopback_ip_v6_key AS loopback_ip_v6_key, -1 AS s)`) + `;
END
--;
CREATE TRIGGER expected_dpus_reserved_update AFTER UPDATE OF loopback_ip_key, loopback_ip_v6_key ON expected_dpus
WHEN OLD.loopback_ip_key IS NOT NEW.loopback_ip_key OR OLD.loopback_ip_v6_key IS NOT NEW.loopback_ip_v6_key
BEGIN
  ` + reservedDPUDeltaSQL(`(SELECT OLD.loopback_ip_key AS loopback_ip_key, OLD.loopback_ip_v6_key AS loopback_ip_v6_key, -1 AS s
    UNION ALL SELECT NEW.loopback_ip_key, NEW.loopback_ip_v6_key, 1)`) + `;
END
--;
CREATE TRIGGER allocations_reserved_insert AFTER INSERT ON allocations
WHEN NEW.pool_id IN (SELECT id FROM pools WHERE name IN ` + reservationPoolNames + `)
BEGIN
  ` + reservedAllocationDeltaSQL(`(SELECT NEW.pool_id AS pool_id, NEW.value_key AS value_key, -1 AS s)`) + `;
END
--;
CREATE TRIGGER allocations_reserved_delete AFTER DELETE ON allocations
WHEN OLD.pool_id IN (SELECT id FROM pools WHERE name IN ` + reservationPoolNames + `)
BEGIN
  ` + reservedAllocationDeltaSQL(`(SELECT OLD.pool_id AS pool_id, OLD.value_key AS value_key, 1 AS s)`) + `;
END
--;
CREATE TRIGGER allocations_reserved_update AFTER UPDATE OF pool_id, value_key ON allocations
WHEN OLD.pool_id <> NEW.pool_id OR OLD.value_key <> NEW.value_key
BEGIN
  ` + reservedAllocationDeltaSQL(`(SELECT OLD.pool_id AS pool_id, OLD.value_key AS value_key, 1 AS s
    UNION ALL SELECT NEW.pool_id, NEW.value_key, -1)`) + `;
END
--;
CREATE TRIGGER pools_reserved_rename AFTER UPDATE OF name ON pools
WHEN OLD.name <> NEW.name AND (OLD.name IN ` + reservationPoolNames + ` OR NEW.name IN ` + reservationPoolNames + `)
BEGIN
  ` + reservedRecountPoolSQL + `;
END
--;
` + schemaV29Backfill

// pgReservedStatementTrigger is the AFTER statement trigger
// TABLE_reserved_EVENT (event INSERT or DELETE, its transition table ref
// of kind NEW or OLD) and its function, which runs body.
func pgReservedStatementTrigger(table, event, kind, ref, body string) string {
	name := table + "_reserved_" + strings.ToLower(event)
	return `CREATE FUNCTION ipledger_` + name + `() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
` + body + `
  RETURN NULL;
END $$
--;
CREATE TRIGGER ` + name + ` AFTER ` + event + ` ON ` + table + `
  REFERENCING ` + kind + ` TABLE AS ` + ref + `
  FOR EACH STATEMENT EXECUTE FUNCTION ipledger_` + name + `()`
}

// pgDPUReservedTrigger counts the reservations a statement on
// expected_dpus made (sign 1) or removed (sign -1), after taking the
// reservation pools' locks (ipledger_lock_reservations).
func pgDPUReservedTrigger(event, kind, ref, sign string) string {
	return pgReservedStatementTrigger("expected_dpus", event, kind, ref, `  IF NOT EXISTS (SELECT 1 FROM `+ref+` WHERE loopback_ip_key IS NOT NULL OR loopback_ip_v6_key IS NOT NULL) THEN
    RETURN NULL;
  END IF;
  PERFORM ipledger_lock_reservations();
  `+reservedDPUDeltaSQL(`(SELECT loopback_ip_key, loopback_ip_v6_key, `+sign+` AS s FROM `+ref+`)`)+`;`)
}

// pgAllocationReservedTrigger counts the reservations a statement on
// allocations stopped (sign -1) or started (sign 1) leaving unheld, after
// locking the reservation pools it touched FOR SHARE.
func pgAllocationReservedTrigger(event, kind, ref, sign string) string {
	return pgReservedStatementTrigger("allocations", event, kind, ref, `  PERFORM 1 FROM pools WHERE name IN `+reservationPoolNames+` AND id IN (SELECT pool_id FROM `+ref+`) ORDER BY name FOR SHARE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  `+reservedAllocationDeltaSQL(`(SELECT pool_id, value_key, `+sign+` AS s FROM `+ref+`)`)+`;`)
}
