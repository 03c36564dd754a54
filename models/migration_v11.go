package models

// schemaV11Postgres turns the per-row work that migrations 1, 6 and 8 do
// when allocations and audit events are INSERTed into one step per
// statement, reading the inserted rows from a transition table. A batch
// of automatic allocations (allocator/groupcommit_pg.go) inserts all its rows
// in one statement; with row triggers each row ran three PL/pgSQL
// functions, an UPDATE of range_counts (which for the second and later
// rows of a transaction also re-checked range_counts' foreign key) and an
// upsert of pool_usage_days, about half of the statement's time. The
// rules are unchanged:
//
//   - allocations_in_range_insert checks, after the statement, that every
//     new allocation lies in a range of its pool, with the same error
//     (value_outside_pool, SQLSTATE 23514), after taking the same FOR SHARE
//     lock on each pool row that migration 8 takes, so a concurrent range
//     removal still cannot slip between check and commit. UPDATEs that move
//     an allocation keep migration 8's row trigger.
//   - allocations_count_insert adds the new allocations to range_counts, one
//     UPDATE per statement; DELETEs and UPDATEs keep migration 6's row
//     trigger (same function: it only handles those).
//   - audit_events_usage_day adds the statement's allocation events to
//     pool_usage_days in one upsert.
//
// SQLite has no statement triggers; its row triggers stay.
const schemaV11Postgres = `
DROP TRIGGER allocations_in_range ON allocations
--;
CREATE TRIGGER allocations_in_range BEFORE UPDATE OF value_key, pool_id ON allocations
  FOR EACH ROW EXECUTE FUNCTION ipledger_allocation_in_range()
--;
CREATE FUNCTION ipledger_allocations_in_range_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  bad TEXT;
BEGIN
  PERFORM 1 FROM pools WHERE id IN (SELECT DISTINCT pool_id FROM new_allocations) ORDER BY id FOR SHARE;
  SELECT n.value INTO bad FROM new_allocations n
  WHERE NOT EXISTS (SELECT 1 FROM pool_ranges r WHERE r.pool_id = n.pool_id
                    AND r.first_key <= n.value_key AND n.value_key <= r.last_key)
  LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'value_outside_pool: value % lies in no range of its pool', bad USING ERRCODE = '23514';
  END IF;
  RETURN NULL;
END $$
--;
CREATE TRIGGER allocations_in_range_insert AFTER INSERT ON allocations
  REFERENCING NEW TABLE AS new_allocations
  FOR EACH STATEMENT EXECUTE FUNCTION ipledger_allocations_in_range_insert()
--;
DROP TRIGGER allocations_count ON allocations
--;
CREATE TRIGGER allocations_count AFTER DELETE OR UPDATE OF state, pool_id, value_key ON allocations
  FOR EACH ROW EXECUTE FUNCTION ipledger_allocation_count()
--;
CREATE FUNCTION ipledger_allocations_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE range_counts c SET allocated = c.allocated + d.allocated, quarantined = c.quarantined + d.quarantined
  FROM (SELECT r.id,
               COUNT(*) FILTER (WHERE n.state = 'allocated') AS allocated,
               COUNT(*) FILTER (WHERE n.state = 'quarantined') AS quarantined
        FROM new_allocations n
        JOIN pool_ranges r ON r.pool_id = n.pool_id AND r.first_key <= n.value_key AND n.value_key <= r.last_key
        GROUP BY r.id) d
  WHERE c.range_id = d.id;
  RETURN NULL;
END $$
--;
CREATE TRIGGER allocations_count_insert AFTER INSERT ON allocations
  REFERENCING NEW TABLE AS new_allocations
  FOR EACH STATEMENT EXECUTE FUNCTION ipledger_allocations_count_insert()
--;
DROP TRIGGER audit_events_usage_day ON audit_events
--;
CREATE FUNCTION ipledger_usage_days_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pool_usage_days (pool, day, action, n)
  SELECT split_part(e.object_id, '/', 1), to_char(e.at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), e.action, COUNT(*)
  FROM new_events e
  WHERE e.object_type = 'allocation' AND position('/' IN e.object_id) > 0
  GROUP BY 1, 2, 3
  ON CONFLICT (pool, day, action) DO UPDATE SET n = pool_usage_days.n + EXCLUDED.n;
  RETURN NULL;
END $$
--;
CREATE TRIGGER audit_events_usage_day AFTER INSERT ON audit_events
  REFERENCING NEW TABLE AS new_events
  FOR EACH STATEMENT EXECUTE FUNCTION ipledger_usage_days_insert()
`
