package models

import "strings"

// Migration 12: two rules that bad input broke, backed by the database.
//
// Address pools never overlap one another (docs/pools.md). The ranges of
// every ipv4 pool form one address space, those of every ipv6 and
// ipv6prefix pool another (a delegated block covers every address in it);
// integer pools may overlap. A database may already hold overlapping
// pools: the migration must not fail on it, and the server must start and
// report them. So every range that overlaps another range of its family
// when the migration runs is marked overlap_grandfathered; nothing is
// deleted or changed.
//
//   - PostgreSQL: pool_ranges gets family ('ipv4', 'ipv6', NULL for
//     integer) and span, the numrange of the addresses it covers, both set
//     by a BEFORE trigger from its pool. One exclusion constraint per
//     family (`EXCLUDE USING gist (span WITH &&)`, built-in range operator
//     class, no extension needed) refuses any two overlapping ranges that
//     are not grandfathered, even from concurrent transactions that bypass
//     the allocator. PostgreSQL has no NOT VALID exclusion constraint, so
//     the grandfathered rows are left out of it by its predicate instead;
//     the same trigger refuses any new or grown range that overlaps
//     another of its family, grandfathered ones included. A grandfathered
//     range may shrink (that never adds overlap) and loses its mark as
//     soon as an update leaves it overlapping nothing.
//   - SQLite: triggers refuse an INSERT, or an UPDATE that grows a range,
//     overlapping another range of its family (SQLite has one writer at a
//     time, so a trigger sees every committed range).
//
// Token names are unique (docs/api.md), so that the audit actor
// token:NAME names one token. Tokens that already share a name are kept
// (deleting one would lock out whoever uses it): every one but the oldest
// of each name is marked legacy_duplicate, and the unique index covers
// the others; a new token can never take a name in use, nor be marked.
// Existing duplicates are reported after migrating (TokenNameDuplicates).
var migrationV12 = Migration{
	Version: 12, Name: "address pools never overlap; token names unique",
	SQL: `
ALTER TABLE pool_ranges ADD COLUMN overlap_grandfathered BOOLEAN NOT NULL DEFAULT FALSE
--;
ALTER TABLE api_tokens ADD COLUMN legacy_duplicate BOOLEAN NOT NULL DEFAULT FALSE
--;
UPDATE api_tokens SET legacy_duplicate = TRUE
WHERE EXISTS (SELECT 1 FROM api_tokens o WHERE o.name = api_tokens.name AND o.id < api_tokens.id)
--;
CREATE UNIQUE INDEX api_tokens_name_key ON api_tokens (name) WHERE NOT legacy_duplicate`,
	Postgres: `
CREATE OR REPLACE FUNCTION ipledger_key_numeric(k text) RETURNS numeric LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT (CASE WHEN h < 0 THEN h::numeric + 18446744073709551616 ELSE h::numeric END) * 18446744073709551616
       + (CASE WHEN l < 0 THEN l::numeric + 18446744073709551616 ELSE l::numeric END)
  FROM (SELECT ('x' || substr(k, 1, 16))::bit(64)::bigint AS h, ('x' || substr(k, 17, 16))::bit(64)::bigint AS l) s
$$
--;
CREATE OR REPLACE FUNCTION ipledger_range_span(first_key text, last_key text, typ text, plen integer) RETURNS numrange
LANGUAGE sql IMMUTABLE AS $$
  -- NULL for a reversed range, which the CHECK pool_ranges_order refuses
  SELECT CASE WHEN ipledger_key_numeric(first_key) > ipledger_key_numeric(last_key) THEN NULL
    ELSE numrange(ipledger_key_numeric(first_key), ipledger_key_numeric(last_key)
      + CASE WHEN typ = 'ipv6prefix' THEN power(2::numeric, 128 - plen) - 1 ELSE 0 END, '[]') END
$$
--;
ALTER TABLE pool_ranges ADD COLUMN family TEXT, ADD COLUMN span NUMRANGE
--;
UPDATE pool_ranges r SET
  family = CASE p.type WHEN 'ipv4' THEN 'ipv4' WHEN 'integer' THEN NULL ELSE 'ipv6' END,
  span = ipledger_range_span(r.first_key, r.last_key, p.type, p.delegate_prefix_len)
FROM pools p WHERE p.id = r.pool_id
--;
UPDATE pool_ranges r SET overlap_grandfathered = TRUE
WHERE r.family IS NOT NULL AND EXISTS (
  SELECT 1 FROM pool_ranges o WHERE o.family = r.family AND o.id <> r.id AND o.span && r.span)
--;
CREATE OR REPLACE FUNCTION ipledger_range_no_overlap() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  p pools%ROWTYPE;
  o RECORD;
BEGIN
  SELECT * INTO p FROM pools WHERE id = NEW.pool_id;
  NEW.family := CASE p.type WHEN 'ipv4' THEN 'ipv4' WHEN 'integer' THEN NULL ELSE 'ipv6' END;
  NEW.span := ipledger_range_span(NEW.first_key, NEW.last_key, p.type, p.delegate_prefix_len);
  IF NEW.family IS NULL OR NEW.span IS NULL THEN
    NEW.overlap_grandfathered := FALSE;
    RETURN NEW;
  END IF;
  SELECT r.first_value, r.last_value, op.name AS pool INTO o
    FROM pool_ranges r JOIN pools op ON op.id = r.pool_id
   WHERE r.family = NEW.family AND r.span && NEW.span AND r.id <> NEW.id
   LIMIT 1;
  IF NOT FOUND THEN
    NEW.overlap_grandfathered := FALSE;
    RETURN NEW;
  END IF;
  IF TG_OP = 'UPDATE' AND OLD.overlap_grandfathered AND NEW.pool_id = OLD.pool_id AND NEW.span <@ OLD.span THEN
    RETURN NEW; -- a grandfathered range may shrink
  END IF;
  RAISE EXCEPTION 'pool_overlap: range % .. % of pool % overlaps range % .. % of pool %',
    NEW.first_value, NEW.last_value, p.name, o.first_value, o.last_value, o.pool USING ERRCODE = '23P01';
END $$
--;
CREATE TRIGGER pool_ranges_family_overlap BEFORE INSERT OR UPDATE ON pool_ranges
  FOR EACH ROW EXECUTE FUNCTION ipledger_range_no_overlap()
--;
ALTER TABLE pool_ranges ADD CONSTRAINT pool_ranges_ipv4_family_overlap
  EXCLUDE USING gist (span WITH &&) WHERE (family = 'ipv4' AND NOT overlap_grandfathered)
--;
ALTER TABLE pool_ranges ADD CONSTRAINT pool_ranges_ipv6_family_overlap
  EXCLUDE USING gist (span WITH &&) WHERE (family = 'ipv6' AND NOT overlap_grandfathered)
--;
CREATE OR REPLACE FUNCTION ipledger_token_not_marked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.legacy_duplicate AND (TG_OP = 'INSERT' OR NOT OLD.legacy_duplicate) THEN
    RAISE EXCEPTION 'token_name_taken: token name % is in use', NEW.name USING ERRCODE = '23505';
  END IF;
  RETURN NEW;
END $$
--;
CREATE TRIGGER api_tokens_not_marked BEFORE INSERT OR UPDATE ON api_tokens
  FOR EACH ROW EXECUTE FUNCTION ipledger_token_not_marked()`,
	SQLite: strings.NewReplacer("{{NEW_COVER}}", sqliteCover("NEW", "np"), "{{O_COVER}}", sqliteCover("o", "op")).Replace(`
CREATE TRIGGER pool_ranges_family_overlap_insert BEFORE INSERT ON pool_ranges
WHEN EXISTS (
  SELECT 1 FROM pools np, pool_ranges o JOIN pools op ON op.id = o.pool_id
  WHERE np.id = NEW.pool_id AND np.type <> 'integer' AND op.type <> 'integer'
    AND (np.type = 'ipv4') = (op.type = 'ipv4')
    AND o.first_key <= {{NEW_COVER}} AND NEW.first_key <= {{O_COVER}})
BEGIN SELECT RAISE(ABORT, 'pool_overlap: the range overlaps a range of another address pool'); END
--;
CREATE TRIGGER pool_ranges_family_overlap_update BEFORE UPDATE OF first_key, last_key, pool_id ON pool_ranges
WHEN NOT (NEW.pool_id = OLD.pool_id AND NEW.first_key >= OLD.first_key AND NEW.last_key <= OLD.last_key)
 AND EXISTS (
  SELECT 1 FROM pools np, pool_ranges o JOIN pools op ON op.id = o.pool_id
  WHERE np.id = NEW.pool_id AND o.id <> NEW.id AND np.type <> 'integer' AND op.type <> 'integer'
    AND (np.type = 'ipv4') = (op.type = 'ipv4')
    AND o.first_key <= {{NEW_COVER}} AND NEW.first_key <= {{O_COVER}})
BEGIN SELECT RAISE(ABORT, 'pool_overlap: the range would overlap a range of another address pool'); END
--;
CREATE TRIGGER api_tokens_not_marked_insert BEFORE INSERT ON api_tokens WHEN NEW.legacy_duplicate
BEGIN SELECT RAISE(ABORT, 'token_name_taken: a new token cannot share a name'); END
--;
CREATE TRIGGER api_tokens_not_marked_update BEFORE UPDATE OF legacy_duplicate ON api_tokens
WHEN NEW.legacy_duplicate AND NOT OLD.legacy_duplicate
BEGIN SELECT RAISE(ABORT, 'token_name_taken: a token cannot be marked as a duplicate'); END`),
}

// sqliteCover is the SQL text of the last key a range r of pool p covers:
// its last_key, or for an ipv6prefix pool the last address of its last
// block — the key with its low 128-delegate_prefix_len bits set, computed
// on the 32 lower-case hex digits.
func sqliteCover(r, p string) string {
	return strings.NewReplacer("R.", r+".", "P.", p+".").Replace(`(CASE WHEN P.type = 'ipv6prefix' AND P.delegate_prefix_len < 128 THEN
  substr(R.last_key, 1, P.delegate_prefix_len / 4)
  || (CASE WHEN P.delegate_prefix_len % 4 = 0 THEN '' ELSE substr('0123456789abcdef',
       ((instr('0123456789abcdef', substr(R.last_key, P.delegate_prefix_len / 4 + 1, 1)) - 1)
        | ((1 << (4 - P.delegate_prefix_len % 4)) - 1)) + 1, 1) END)
  || substr('ffffffffffffffffffffffffffffffff', 1, 32 - (P.delegate_prefix_len + 3) / 4)
 ELSE R.last_key END)`)
}
