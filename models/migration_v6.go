package models

// Migration 6 makes the pool page cost independent of the number of
// allocations: no read counts the pool's allocations or its recent audit
// events (docs/decisions.md "Pool pages cost O(1) in allocations").
//
//   - range_counts holds, per range, how many allocations and quarantines
//     lie in it. Triggers on allocations keep it right for every write,
//     whichever path made it, in the same transaction; triggers on
//     pool_ranges recount a range when it is created or its bounds change
//     (a rare admin operation, proportional to that range's allocations).
//   - allocations_quarantined is a partial index on the quarantines of a
//     pool, so that `?state=quarantined`, the expiry purge and the expired
//     quarantines subtracted from the counts under a hold cost the number
//     of quarantines, not of allocations.
//   - pool_usage_days rolls the allocation audit events up per pool, UTC
//     day and action (trigger on audit_events, same transaction), so that
//     the usage chart reads at most days × actions rows.
//
// Each table is backfilled from the existing rows.

const schemaV6 = `
CREATE TABLE range_counts (
  range_id BIGINT PRIMARY KEY REFERENCES pool_ranges(id) ON DELETE CASCADE,
  allocated BIGINT NOT NULL DEFAULT 0,
  quarantined BIGINT NOT NULL DEFAULT 0
)
--;
INSERT INTO range_counts (range_id, allocated, quarantined)
SELECT r.id,
  (SELECT COUNT(*) FROM allocations a WHERE a.pool_id = r.pool_id AND a.value_key BETWEEN r.first_key AND r.last_key AND a.state = 'allocated'),
  (SELECT COUNT(*) FROM allocations a WHERE a.pool_id = r.pool_id AND a.value_key BETWEEN r.first_key AND r.last_key AND a.state = 'quarantined')
FROM pool_ranges r
--;
CREATE INDEX allocations_quarantined ON allocations (pool_id, value_key) WHERE state = 'quarantined'
--;
CREATE TABLE pool_usage_days (
  pool TEXT NOT NULL,
  day TEXT NOT NULL,
  action TEXT NOT NULL,
  n BIGINT NOT NULL,
  PRIMARY KEY (pool, day, action)
)
`

const schemaV6Postgres = `
INSERT INTO pool_usage_days (pool, day, action, n)
SELECT split_part(object_id, '/', 1), to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), action, COUNT(*)
FROM audit_events WHERE object_type = 'allocation' AND position('/' IN object_id) > 0
GROUP BY 1, 2, 3
--;
CREATE FUNCTION ipledger_range_recount() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO range_counts (range_id, allocated, quarantined)
  SELECT NEW.id, COUNT(*) FILTER (WHERE a.state = 'allocated'), COUNT(*) FILTER (WHERE a.state = 'quarantined')
  FROM allocations a WHERE a.pool_id = NEW.pool_id AND a.value_key BETWEEN NEW.first_key AND NEW.last_key
  ON CONFLICT (range_id) DO UPDATE SET allocated = EXCLUDED.allocated, quarantined = EXCLUDED.quarantined;
  RETURN NULL;
END $$
--;
CREATE TRIGGER pool_ranges_recount AFTER INSERT OR UPDATE OF first_key, last_key, pool_id ON pool_ranges
  FOR EACH ROW EXECUTE FUNCTION ipledger_range_recount()
--;
CREATE FUNCTION ipledger_allocation_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    UPDATE range_counts c SET allocated = c.allocated - (OLD.state = 'allocated')::int,
                              quarantined = c.quarantined - (OLD.state = 'quarantined')::int
    FROM pool_ranges r WHERE r.id = c.range_id AND r.pool_id = OLD.pool_id
      AND r.first_key <= OLD.value_key AND OLD.value_key <= r.last_key;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    UPDATE range_counts c SET allocated = c.allocated + (NEW.state = 'allocated')::int,
                              quarantined = c.quarantined + (NEW.state = 'quarantined')::int
    FROM pool_ranges r WHERE r.id = c.range_id AND r.pool_id = NEW.pool_id
      AND r.first_key <= NEW.value_key AND NEW.value_key <= r.last_key;
  END IF;
  RETURN NULL;
END $$
--;
CREATE TRIGGER allocations_count AFTER INSERT OR DELETE OR UPDATE OF state, pool_id, value_key ON allocations
  FOR EACH ROW EXECUTE FUNCTION ipledger_allocation_count()
--;
CREATE FUNCTION ipledger_usage_day() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pool_usage_days (pool, day, action, n)
  VALUES (split_part(NEW.object_id, '/', 1), to_char(NEW.at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), NEW.action, 1)
  ON CONFLICT (pool, day, action) DO UPDATE SET n = pool_usage_days.n + 1;
  RETURN NULL;
END $$
--;
CREATE TRIGGER audit_events_usage_day AFTER INSERT ON audit_events
  FOR EACH ROW WHEN (NEW.object_type = 'allocation' AND position('/' IN NEW.object_id) > 0)
  EXECUTE FUNCTION ipledger_usage_day()
`

const schemaV6SQLite = `
INSERT INTO pool_usage_days (pool, day, action, n)
SELECT substr(object_id, 1, instr(object_id, '/') - 1), substr(at, 1, 10), action, COUNT(*)
FROM audit_events WHERE object_type = 'allocation' AND instr(object_id, '/') > 0
GROUP BY 1, 2, 3
--;
CREATE TRIGGER pool_ranges_recount_insert AFTER INSERT ON pool_ranges
BEGIN
  INSERT OR REPLACE INTO range_counts (range_id, allocated, quarantined)
  SELECT NEW.id, COALESCE(SUM(a.state = 'allocated'), 0), COALESCE(SUM(a.state = 'quarantined'), 0)
  FROM allocations a WHERE a.pool_id = NEW.pool_id AND a.value_key BETWEEN NEW.first_key AND NEW.last_key;
END
--;
CREATE TRIGGER pool_ranges_recount_update AFTER UPDATE OF first_key, last_key, pool_id ON pool_ranges
BEGIN
  INSERT OR REPLACE INTO range_counts (range_id, allocated, quarantined)
  SELECT NEW.id, COALESCE(SUM(a.state = 'allocated'), 0), COALESCE(SUM(a.state = 'quarantined'), 0)
  FROM allocations a WHERE a.pool_id = NEW.pool_id AND a.value_key BETWEEN NEW.first_key AND NEW.last_key;
END
--;
CREATE TRIGGER allocations_count_insert AFTER INSERT ON allocations
BEGIN
  UPDATE range_counts SET allocated = allocated + (NEW.state = 'allocated'), quarantined = quarantined + (NEW.state = 'quarantined')
  WHERE range_id IN (SELECT r.id FROM pool_ranges r WHERE r.pool_id = NEW.pool_id AND r.first_key <= NEW.value_key AND NEW.value_key <= r.last_key);
END
--;
CREATE TRIGGER allocations_count_delete AFTER DELETE ON allocations
BEGIN
  UPDATE range_counts SET allocated = allocated - (OLD.state = 'allocated'), quarantined = quarantined - (OLD.state = 'quarantined')
  WHERE range_id IN (SELECT r.id FROM pool_ranges r WHERE r.pool_id = OLD.pool_id AND r.first_key <= OLD.value_key AND OLD.value_key <= r.last_key);
END
--;
CREATE TRIGGER allocations_count_update AFTER UPDATE OF state, pool_id, value_key ON allocations
BEGIN
  UPDATE range_counts SET allocated = allocated - (OLD.state = 'allocated'), quarantined = quarantined - (OLD.state = 'quarantined')
  WHERE range_id IN (SELECT r.id FROM pool_ranges r WHERE r.pool_id = OLD.pool_id AND r.first_key <= OLD.value_key AND OLD.value_key <= r.last_key);
  UPDATE range_counts SET allocated = allocated + (NEW.state = 'allocated'), quarantined = quarantined + (NEW.state = 'quarantined')
  WHERE range_id IN (SELECT r.id FROM pool_ranges r WHERE r.pool_id = NEW.pool_id AND r.first_key <= NEW.value_key AND NEW.value_key <= r.last_key);
END
--;
CREATE TRIGGER audit_events_usage_day AFTER INSERT ON audit_events
WHEN NEW.object_type = 'allocation' AND instr(NEW.object_id, '/') > 0
BEGIN
  INSERT INTO pool_usage_days (pool, day, action, n)
  VALUES (substr(NEW.object_id, 1, instr(NEW.object_id, '/') - 1), substr(NEW.at, 1, 10), NEW.action, 1)
  ON CONFLICT (pool, day, action) DO UPDATE SET n = n + 1;
END
`
