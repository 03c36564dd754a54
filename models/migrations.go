package models

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Migration is one versioned schema change. Migrations are plain SQL written
// for both dialects (placeholders below), applied in order, each in its own
// transaction, and recorded in schema_migrations. A released migration never
// changes; a new schema change is a new migration at the end of the list.
type Migration struct {
	Version int
	Name    string
	// SQL statements, separated by lines holding only "--;". Placeholders:
	// {{ID}} auto-increment primary key, {{KEY}} a numeric sort key column
	// (fixed-width hex compared bytewise), {{TS}} a timestamp.
	SQL string
	// Postgres and SQLite hold statements for one dialect only.
	Postgres string
	SQLite   string
}

// Migrations is the ordered list of schema changes.
var Migrations = []Migration{
	{Version: 1, Name: "core schema", SQL: schemaV1, Postgres: schemaV1Postgres, SQLite: schemaV1SQLite},
	// Version 3 (migration_v3.go): one DPU per loopback in network_configs.
	{Version: 3, Name: "network configs: one DPU per loopback", SQL: schemaV3},
	// Version 5 (2–4 are reserved for ExpectedMachines, lifecycle and the
	// console): SQLite's twin of the PostgreSQL trigger that also checks
	// UPDATEs, so that an allocation can never be moved outside every range.
	{Version: 5, Name: "sqlite: allocations stay in a range on update", SQLite: schemaV5SQLite},
	// Version 6 (migration_v6.go): per-range allocation counts, a partial
	// index of quarantines and per-day usage, so pool pages cost O(1).
	{Version: 6, Name: "range counts, quarantine index, pool usage days", SQL: schemaV6, Postgres: schemaV6Postgres, SQLite: schemaV6SQLite},
	// Version 7: eager autovacuum of allocations on PostgreSQL (see
	// schemaV7Postgres).
	{Version: 7, Name: "postgres: eager autovacuum of allocations", Postgres: schemaV7Postgres},
	// Version 8: the PostgreSQL range triggers serialise on the pool row
	// (see schemaV8Postgres).
	{Version: 8, Name: "postgres: range triggers lock the pool row", Postgres: schemaV8Postgres},
	// Version 9 (migration_v9.go): server-side console sessions.
	{Version: 9, Name: "console sessions", SQL: schemaV9},
	// Version 10 (migration_v10.go): PostgreSQL notifies every change to
	// api_tokens, so servers may cache the tokens they authenticated.
	{Version: 10, Name: "postgres: notify api token changes", Postgres: schemaV10Postgres},
	// Version 11 (migration_v11.go): the INSERT triggers of allocations and
	// audit events run once per statement instead of once per row.
	{Version: 11, Name: "postgres: statement-level insert triggers", Postgres: schemaV11Postgres},
	// Version 12 (migration_v12.go): address pools never overlap one
	// another; token names are unique. Existing overlaps and duplicate
	// names are kept and reported.
	migrationV12,
	// Version 13 (migration_v13.go): audit event revisions in commit
	// order, webhooks and their delivery queue (docs/feed.md).
	{Version: 13, Name: "change feed revisions and webhooks", SQL: schemaV13},
	// Version 15 (migration_v15.go): indexes of the console's search and
	// the wallboard's recent events.
	{Version: 15, Name: "search indexes", SQL: schemaV15},
	// Version 16 (migration_v16.go): the BMC MAC look-up of reports is an
	// index probe.
	{Version: 16, Name: "expected machines by BMC MAC in any case", SQL: schemaV16},
	// Version 17 (migration_v17.go): the names of deleted machines.
	{Version: 17, Name: "names of deleted machines", SQL: schemaV17},
	// Version 20 (migration_v20.go): console sessions of people signed in
	// through single sign-on.
	{Version: 20, Name: "single sign-on sessions", SQL: schemaV20},
	// Version 21 (migration_v21.go): the actor's role on each audit event.
	{Version: 21, Name: "audit event actor roles", SQL: schemaV21},
	// Version 22 (migration_v22.go): redeliveries of a webhook delivery,
	// so that one asked during an attempt is not lost.
	{Version: 22, Name: "webhook delivery redeliveries", SQL: schemaV22},
	// Version 23 (migration_v23.go): hosts' sort names, DPUs' binding
	// classes and the fleet counts, kept by triggers on every write.
	{Version: 23, Name: "fleet counts and sort names", Postgres: schemaV23Postgres, SQLite: schemaV23SQLite},
	// Version 25 (migration_v25.go): host names, chassis serial numbers
	// and SKUs hold no control or invisible format character.
	{Version: 25, Name: "visible names and serial numbers", Postgres: schemaV25Postgres, SQLite: schemaV25SQLite},
	// Version 26 (migration_v26.go): a DPU's BMC MAC, in the hosts'
	// column, only in ParseMAC's canonical spelling.
	{Version: 26, Name: "machine BMC MACs in canonical form", Postgres: schemaV26Postgres, SQLite: schemaV26SQLite},
	// Version 27 (migration_v27.go): a single sign-on session keeps its
	// ID token, sealed, for sign-out's id_token_hint.
	{Version: 27, Name: "sealed ID tokens of single sign-on sessions", SQL: schemaV27},
	// Version 28 (migration_v28.go): ExpectedMachines' BMC MACs only in
	// ParseMAC's canonical spelling; single sign-on user names by the rule
	// of auth's checkName, as far as SQL can say it.
	{Version: 28, Name: "canonical ExpectedMachine BMC MACs and user names", Postgres: schemaV28Postgres, SQLite: schemaV28SQLite},
	// Version 29 (migration_v29.go): the reservations no allocation holds,
	// per range, kept by triggers on every write.
	{Version: 29, Name: "reserved counts kept on write", Postgres: schemaV29Postgres, SQLite: schemaV29SQLite},
	// Version 30 (migration_v30.go): the ID tokens received at console
	// sign-ins, by hash, until they expire: never bearer credentials.
	{Version: 30, Name: "ID tokens received at sign-in", Postgres: schemaV30Postgres, SQLite: schemaV30SQLite},
	// Version 31 (migration_v31.go): the reserved-count triggers take the
	// schema's advisory key, not one of the whole database.
	{Version: 31, Name: "postgres: reserved-count locks scoped to the schema", Postgres: schemaV31Postgres},
	// Version 32 (migration_v32.go): a DPU serial number is declared
	// once whatever its case; serials that already differ only in case
	// are kept and reported.
	migrationV32,
	// Version 33 (migration_v33.go): each audit event keeps the names of
	// the machines it mentions as they were when it was written.
	{Version: 33, Name: "audit event names at write time", SQL: schemaV33},
}

// schemaV8Postgres closes a write-skew hole of migration 1's triggers when
// writers bypass the allocator (and its pool lock): a transaction removing
// or shrinking a range and one inserting an allocation into it each saw the
// other's row as not yet changed, and both committed, leaving an allocation
// outside every range. Now the range trigger takes the pool row FOR UPDATE
// and the allocation trigger FOR SHARE before they look, so the later one
// waits for the earlier and then sees its result. The allocator already
// holds the pool row FOR UPDATE, so its writes take no new lock.
const schemaV8Postgres = `
CREATE OR REPLACE FUNCTION ipledger_allocation_in_range() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM pools WHERE id = NEW.pool_id FOR SHARE;
  IF NOT EXISTS (SELECT 1 FROM pool_ranges r WHERE r.pool_id = NEW.pool_id
                 AND r.first_key <= NEW.value_key AND NEW.value_key <= r.last_key) THEN
    RAISE EXCEPTION 'value_outside_pool: value % lies in no range of its pool', NEW.value USING ERRCODE = '23514';
  END IF;
  RETURN NEW;
END $$
--;
CREATE OR REPLACE FUNCTION ipledger_range_keeps_allocations() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM pools WHERE id = OLD.pool_id FOR UPDATE;
  IF TG_OP = 'DELETE' THEN
    IF EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = OLD.pool_id
               AND a.value_key BETWEEN OLD.first_key AND OLD.last_key) THEN
      RAISE EXCEPTION 'range_in_use: range % .. % still holds allocations', OLD.first_value, OLD.last_value USING ERRCODE = '23514';
    END IF;
    RETURN OLD;
  END IF;
  IF EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = OLD.pool_id
             AND a.value_key BETWEEN OLD.first_key AND OLD.last_key
             AND NOT (a.value_key BETWEEN NEW.first_key AND NEW.last_key)) THEN
    RAISE EXCEPTION 'range_in_use: shrinking range % .. % would leave allocations outside it', OLD.first_value, OLD.last_value USING ERRCODE = '23514';
  END IF;
  RETURN NEW;
END $$
`

// schemaV7Postgres: every allocation flips the run_end flag of the value
// before it, which on PostgreSQL leaves a dead entry in the run-end index
// right where the next gap search starts. Vacuuming allocations after 500
// changes instead of 20 % of the table keeps that search short on large
// pools (docs/benchmarks.md, "Allocation cost as allocations grow").
const schemaV7Postgres = `
ALTER TABLE allocations SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500,
  autovacuum_analyze_scale_factor = 0.02)
`

const schemaV5SQLite = `
CREATE TRIGGER allocations_in_range_update BEFORE UPDATE OF value_key, pool_id ON allocations
WHEN NOT EXISTS (SELECT 1 FROM pool_ranges r WHERE r.pool_id = NEW.pool_id
                 AND r.first_key <= NEW.value_key AND NEW.value_key <= r.last_key)
BEGIN SELECT RAISE(ABORT, 'value_outside_pool: value lies in no range of its pool'); END
`

const schemaV1 = `
CREATE TABLE pools (
  id {{ID}},
  name TEXT NOT NULL,
  type TEXT NOT NULL CHECK (type IN ('ipv4','ipv6','ipv6prefix','integer')),
  delegate_prefix_len INTEGER NOT NULL DEFAULT 0 CHECK (delegate_prefix_len BETWEEN 0 AND 128),
  gateway TEXT NOT NULL DEFAULT '',
  version BIGINT NOT NULL DEFAULT 1,
  created_at {{TS}} NOT NULL,
  updated_at {{TS}} NOT NULL,
  CONSTRAINT pools_name_key UNIQUE (name)
)
--;
CREATE TABLE pool_ranges (
  id {{ID}},
  pool_id BIGINT NOT NULL REFERENCES pools(id) ON DELETE CASCADE,
  first_key {{KEY}} NOT NULL,
  last_key {{KEY}} NOT NULL,
  first_value TEXT NOT NULL,
  last_value TEXT NOT NULL,
  auto_assign BOOLEAN NOT NULL,
  version BIGINT NOT NULL DEFAULT 1,
  created_at {{TS}} NOT NULL,
  CONSTRAINT pool_ranges_order CHECK (first_key <= last_key)
)
--;
CREATE INDEX pool_ranges_pool_first ON pool_ranges (pool_id, first_key)
--;
CREATE TABLE allocations (
  id {{ID}},
  pool_id BIGINT NOT NULL REFERENCES pools(id) ON DELETE CASCADE,
  value_key {{KEY}} NOT NULL,
  value TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('allocated','quarantined')),
  owner_type TEXT,
  owner_id TEXT,
  run_end BOOLEAN NOT NULL DEFAULT TRUE,
  allocated_at {{TS}} NOT NULL,
  quarantine_reason TEXT,
  former_owner_type TEXT,
  former_owner_id TEXT,
  quarantined_at {{TS}},
  CONSTRAINT allocations_owner_state CHECK (
    (state = 'allocated' AND owner_type IS NOT NULL AND owner_id IS NOT NULL AND quarantined_at IS NULL)
    OR (state = 'quarantined' AND owner_type IS NULL AND owner_id IS NULL AND quarantined_at IS NOT NULL)),
  CONSTRAINT allocations_pool_value_key UNIQUE (pool_id, value_key),
  CONSTRAINT allocations_pool_owner_key UNIQUE (pool_id, owner_type, owner_id)
)
--;
CREATE INDEX allocations_run_end ON allocations (pool_id, value_key) WHERE run_end
--;
CREATE INDEX allocations_owner ON allocations (owner_type, owner_id)
--;
CREATE INDEX allocations_former_owner ON allocations (former_owner_type, former_owner_id)
--;
CREATE INDEX allocations_value ON allocations (value)
--;
CREATE TABLE audit_events (
  id {{ID}},
  at {{TS}} NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  object_type TEXT NOT NULL,
  object_id TEXT NOT NULL,
  request_id TEXT NOT NULL DEFAULT '',
  before_json TEXT,
  after_json TEXT
)
--;
CREATE INDEX audit_events_at ON audit_events (at)
--;
CREATE INDEX audit_events_object ON audit_events (object_type, object_id)
--;
CREATE TABLE api_tokens (
  id {{ID}},
  name TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('viewer','operator','admin')),
  token_hash TEXT NOT NULL,
  created_at {{TS}} NOT NULL,
  CONSTRAINT api_tokens_hash_key UNIQUE (token_hash)
)
--;
CREATE TABLE settings (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
)
--;
CREATE TABLE expected_machines (
  id TEXT PRIMARY KEY,
  bmc_mac_address TEXT NOT NULL,
  bmc_username TEXT NOT NULL DEFAULT '',
  bmc_password TEXT NOT NULL DEFAULT '',
  chassis_serial_number TEXT NOT NULL DEFAULT '',
  fallback_dpu_serial_numbers TEXT NOT NULL DEFAULT '[]',
  metadata_name TEXT NOT NULL DEFAULT '',
  metadata_description TEXT NOT NULL DEFAULT '',
  metadata_labels TEXT NOT NULL DEFAULT '[]',
  sku_id TEXT,
  version BIGINT NOT NULL DEFAULT 1,
  created_at {{TS}} NOT NULL,
  updated_at {{TS}} NOT NULL,
  CONSTRAINT expected_machines_bmc_mac_key UNIQUE (bmc_mac_address)
)
--;
CREATE TABLE expected_dpus (
  id {{ID}},
  expected_machine_id TEXT NOT NULL REFERENCES expected_machines(id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  serial_number TEXT NOT NULL,
  loopback_ip TEXT,
  loopback_ip_key {{KEY}},
  loopback_ip_v6 TEXT,
  loopback_ip_v6_key {{KEY}},
  CONSTRAINT expected_dpus_serial_key UNIQUE (serial_number),
  CONSTRAINT expected_dpus_loopback_ip_key UNIQUE (loopback_ip),
  CONSTRAINT expected_dpus_loopback_ip_v6_key UNIQUE (loopback_ip_v6),
  CONSTRAINT expected_dpus_v4_key_unique UNIQUE (loopback_ip_key),
  CONSTRAINT expected_dpus_v6_key_unique UNIQUE (loopback_ip_v6_key)
)
--;
CREATE INDEX expected_dpus_machine ON expected_dpus (expected_machine_id, position)
--;
CREATE TABLE machines (
  machine_id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('host','dpu')),
  host_machine_id TEXT REFERENCES machines(machine_id) ON DELETE CASCADE,
  state TEXT NOT NULL CHECK (state IN ('ready','decommissioned')),
  bmc_mac_address TEXT,
  chassis_serial_number TEXT NOT NULL DEFAULT '',
  serial_number TEXT,
  expected_machine_id TEXT,
  version BIGINT NOT NULL DEFAULT 1,
  created_at {{TS}} NOT NULL,
  updated_at {{TS}} NOT NULL,
  CONSTRAINT machines_serial_key UNIQUE (serial_number),
  CONSTRAINT machines_bmc_mac_key UNIQUE (bmc_mac_address)
)
--;
CREATE INDEX machines_host ON machines (host_machine_id)
--;
CREATE TABLE network_configs (
  machine_id TEXT PRIMARY KEY REFERENCES machines(machine_id) ON DELETE CASCADE,
  loopback_ip TEXT,
  loopback_ip_v6 TEXT,
  version BIGINT NOT NULL DEFAULT 1,
  updated_at {{TS}} NOT NULL
)
--;
CREATE INDEX network_configs_v4 ON network_configs (loopback_ip)
--;
CREATE INDEX network_configs_v6 ON network_configs (loopback_ip_v6)
`

// schemaV1Postgres backs the range rules with PostgreSQL-native constraints:
// an exclusion constraint so that two ranges of one pool never overlap,
// and triggers so that an allocation always lies inside a range of its pool
// and no range is removed or shrunk from under an allocation.
const schemaV1Postgres = `
CREATE TYPE keyrange AS RANGE (subtype = text, collation = "C")
--;
ALTER TABLE pool_ranges ADD CONSTRAINT pool_ranges_no_overlap EXCLUDE USING gist (
  keyrange(lpad(pool_id::text, 20, '0') || first_key, lpad(pool_id::text, 20, '0') || last_key, '[]') WITH &&)
--;
CREATE FUNCTION ipledger_allocation_in_range() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pool_ranges r WHERE r.pool_id = NEW.pool_id
                 AND r.first_key <= NEW.value_key AND NEW.value_key <= r.last_key) THEN
    RAISE EXCEPTION 'value_outside_pool: value % lies in no range of its pool', NEW.value USING ERRCODE = '23514';
  END IF;
  RETURN NEW;
END $$
--;
CREATE TRIGGER allocations_in_range BEFORE INSERT OR UPDATE OF value_key, pool_id ON allocations
  FOR EACH ROW EXECUTE FUNCTION ipledger_allocation_in_range()
--;
CREATE FUNCTION ipledger_range_keeps_allocations() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = OLD.pool_id
               AND a.value_key BETWEEN OLD.first_key AND OLD.last_key) THEN
      RAISE EXCEPTION 'range_in_use: range % .. % still holds allocations', OLD.first_value, OLD.last_value USING ERRCODE = '23514';
    END IF;
    RETURN OLD;
  END IF;
  IF EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = OLD.pool_id
             AND a.value_key BETWEEN OLD.first_key AND OLD.last_key
             AND NOT (a.value_key BETWEEN NEW.first_key AND NEW.last_key)) THEN
    RAISE EXCEPTION 'range_in_use: shrinking range % .. % would leave allocations outside it', OLD.first_value, OLD.last_value USING ERRCODE = '23514';
  END IF;
  RETURN NEW;
END $$
--;
CREATE TRIGGER pool_ranges_keep_allocations BEFORE DELETE OR UPDATE OF first_key, last_key ON pool_ranges
  FOR EACH ROW EXECUTE FUNCTION ipledger_range_keeps_allocations()
`

// schemaV1SQLite holds the same rules as triggers (SQLite has no exclusion
// constraints); SQLite has one writer at a time, so a trigger check cannot
// race another writer.
const schemaV1SQLite = `
CREATE TRIGGER pool_ranges_no_overlap_insert BEFORE INSERT ON pool_ranges
WHEN EXISTS (SELECT 1 FROM pool_ranges r WHERE r.pool_id = NEW.pool_id
             AND r.first_key <= NEW.last_key AND NEW.first_key <= r.last_key)
BEGIN SELECT RAISE(ABORT, 'range_overlap: ranges of one pool never overlap'); END
--;
CREATE TRIGGER pool_ranges_no_overlap_update BEFORE UPDATE OF first_key, last_key ON pool_ranges
WHEN EXISTS (SELECT 1 FROM pool_ranges r WHERE r.pool_id = NEW.pool_id AND r.id <> NEW.id
             AND r.first_key <= NEW.last_key AND NEW.first_key <= r.last_key)
BEGIN SELECT RAISE(ABORT, 'range_overlap: ranges of one pool never overlap'); END
--;
CREATE TRIGGER allocations_in_range BEFORE INSERT ON allocations
WHEN NOT EXISTS (SELECT 1 FROM pool_ranges r WHERE r.pool_id = NEW.pool_id
                 AND r.first_key <= NEW.value_key AND NEW.value_key <= r.last_key)
BEGIN SELECT RAISE(ABORT, 'value_outside_pool: value lies in no range of its pool'); END
--;
CREATE TRIGGER pool_ranges_keep_allocations_delete BEFORE DELETE ON pool_ranges
WHEN EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = OLD.pool_id
             AND a.value_key BETWEEN OLD.first_key AND OLD.last_key)
BEGIN SELECT RAISE(ABORT, 'range_in_use: range still holds allocations'); END
--;
CREATE TRIGGER pool_ranges_keep_allocations_update BEFORE UPDATE OF first_key, last_key ON pool_ranges
WHEN EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = OLD.pool_id
             AND a.value_key BETWEEN OLD.first_key AND OLD.last_key
             AND NOT (a.value_key BETWEEN NEW.first_key AND NEW.last_key))
BEGIN SELECT RAISE(ABORT, 'range_in_use: shrinking the range would leave allocations outside it'); END
`

func expand(sql string, d Dialect) string {
	r := strings.NewReplacer(
		"{{ID}}", map[Dialect]string{Postgres: "BIGSERIAL PRIMARY KEY", SQLite: "INTEGER PRIMARY KEY AUTOINCREMENT"}[d],
		"{{KEY}}", map[Dialect]string{Postgres: `TEXT COLLATE "C"`, SQLite: "TEXT"}[d],
		"{{TS}}", map[Dialect]string{Postgres: "TIMESTAMPTZ", SQLite: "TIMESTAMP"}[d],
	)
	return r.Replace(sql)
}

func statements(sql string) []string {
	var out []string
	for _, s := range strings.Split(sql, "\n--;\n") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// SchemaVersion is the highest migration version this build knows.
func SchemaVersion() int { return highest(Migrations) }

func highest(list []Migration) int {
	v := 0
	for _, m := range list {
		if m.Version > v {
			v = m.Version
		}
	}
	return v
}

// ordered returns the migrations by version, whatever order engineers
// appended them in.
func ordered(list []Migration) []Migration {
	out := append([]Migration(nil), list...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

// Migrate applies every migration not yet recorded, in order, each in its
// own transaction. On PostgreSQL a transaction-scoped advisory lock makes
// several processes starting at once apply each migration exactly once.
// It refuses to run against a schema newer than this build, and to apply a
// migration whose version is lower than the highest one the database has
// already applied: such a migration would run last on an old database and
// first on a new one, so the two would end up with different schemas.
// Unused version numbers (gaps) are fine. Then, on PostgreSQL, it creates
// the search indexes that need pg_trgm when they are missing and the
// extension is there or can be created (search_index.go).
func Migrate(db *gorm.DB) error {
	if err := migrate(db, Migrations, SchemaVersion()); err != nil {
		return err
	}
	return ensureSearchIndexes(db)
}

// MigrateTo is Migrate stopping after version upTo: upgrade tests build an
// older schema with it, fill it, then Migrate.
func MigrateTo(db *gorm.DB, upTo int) error { return migrate(db, Migrations, upTo) }

// migrateLock serialises migrations of several processes on PostgreSQL:
// the schema's key (advisory.go), so that migrating one schema never
// waits for another schema of the same database.
func migrateLock(tx *gorm.DB, d Dialect) error {
	if d != Postgres {
		return nil
	}
	return LockSchema(tx, LockMigrate)
}

func migrate(db *gorm.DB, list []Migration, upTo int) error {
	d := DialectOf(db)
	// Two processes starting at once on an empty database race to create
	// the bookkeeping table itself: CREATE TABLE IF NOT EXISTS is not safe
	// against a concurrent create on PostgreSQL ("already exists"), so it
	// runs under the migrations' advisory lock.
	err := db.Transaction(func(tx *gorm.DB) error {
		if err := migrateLock(tx, d); err != nil {
			return err
		}
		return tx.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at ` + expand("{{TS}}", d) + ` NOT NULL)`).Error
	})
	if err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var applied []int
	if err := db.Raw(`SELECT version FROM schema_migrations`).Scan(&applied).Error; err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	newest := 0
	done := map[int]bool{}
	for _, v := range applied {
		done[v] = true
		newest = max(newest, v)
	}
	if newest > highest(list) {
		return fmt.Errorf("database schema version %d is newer than this build knows (%d): upgrade ipledger", newest, highest(list))
	}
	if err := checkOrder(list, done, newest); err != nil {
		return err
	}
	for _, m := range ordered(list) {
		if m.Version > upTo {
			break
		}
		err := db.Transaction(func(tx *gorm.DB) error {
			if err := migrateLock(tx, d); err != nil {
				return err
			}
			var n int64
			if err := tx.Raw(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n).Error; err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			// Another process may have migrated since the check above.
			var top int
			if err := tx.Raw(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&top).Error; err != nil {
				return err
			}
			if top > m.Version {
				return outOfOrder(m, top)
			}
			all := statements(expand(m.SQL, d))
			if d == Postgres {
				all = append(all, statements(m.Postgres)...)
			} else {
				all = append(all, statements(m.SQLite)...)
			}
			if d == Postgres && len(all) > 1 {
				// One round trip for the whole migration (the simple query
				// protocol runs several statements): a fresh database, and
				// every test database, migrates several times faster.
				if err := tx.Exec(strings.Join(all, ";\n")).Error; err != nil {
					return err
				}
				all = nil
			}
			for _, s := range all {
				if err := tx.Exec(s).Error; err != nil {
					return fmt.Errorf("%w\nstatement: %s", err, s)
				}
			}
			return tx.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, time.Now().UTC()).Error
		})
		if err != nil {
			return fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
		}
	}
	return nil
}

// checkOrder refuses, before anything is applied, a build whose unapplied
// migrations include one below the database's newest applied version.
func checkOrder(list []Migration, done map[int]bool, newest int) error {
	for _, m := range ordered(list) {
		if !done[m.Version] && m.Version < newest {
			return fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, outOfOrder(m, newest))
		}
	}
	return nil
}

func outOfOrder(m Migration, newest int) error {
	return fmt.Errorf("version %d is lower than version %d, the highest this database has applied: "+
		"refusing to apply it out of order (a schema change after version %d needs a version above it)", m.Version, newest, newest)
}
