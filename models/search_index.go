package models

import (
	"fmt"

	"gorm.io/gorm"
)

// The console's search for part of a text (console/search_partial.go and
// ListExpectedMachines' search) tests lower(column) LIKE '%text%' on four
// columns of machines, three of expected_machines and the serial numbers
// of expected_dpus. On PostgreSQL with the extension pg_trgm, a trigram
// GIN index on each of those expressions answers the test from the index
// (a bitmap of the rows holding the text's trigrams, each row then
// rechecked against the LIKE), so a search costs what it finds, not the
// size of the fleet. The query is the same with or without the indexes:
// they change its cost, never its result.
//
// pg_trgm ships with PostgreSQL (contrib) and is a trusted extension, but
// a site's database may not have it or may refuse CREATE EXTENSION. The
// indexes are therefore not a migration: Migrate creates them, after the
// versioned migrations, whenever pg_trgm is installed or can be created,
// and does nothing (search scans, slower and with the same results) when
// it cannot. A later start creates them once pg_trgm is there.
// database.SearchIndexStatus says which path a database is on; the start-up log,
// `ipledger migrate` and `ipledger check` print it (docs/operations.md,
// "Search for part of a text").

// SearchIndex is one trigram index of the search for part of a text.
type SearchIndex struct {
	Table, Name, Column string
}

// SearchIndexes lists the trigram indexes Migrate creates on PostgreSQL
// when pg_trgm is available: one per column the search reads.
var SearchIndexes = []SearchIndex{
	{"expected_dpus", "expected_dpus_search_serial", "serial_number"},
	{"expected_machines", "expected_machines_search_bmc_mac", "bmc_mac_address"},
	{"expected_machines", "expected_machines_search_chassis", "chassis_serial_number"},
	{"expected_machines", "expected_machines_search_name", "metadata_name"},
	{"machines", "machines_search_bmc_mac", "bmc_mac_address"},
	{"machines", "machines_search_chassis", "chassis_serial_number"},
	{"machines", "machines_search_machine_id", "machine_id"},
	{"machines", "machines_search_serial", "serial_number"},
}

// searchIndexObjects are SearchIndexes as catalog entries: objects a
// database may hold beyond SchemaObjects.
func searchIndexObjects() []SchemaObject {
	out := make([]SchemaObject, len(SearchIndexes))
	for i, x := range SearchIndexes {
		out[i] = SchemaObject{Table: x.Table, Kind: "index", Name: x.Name}
	}
	return out
}

// TrigramSchema returns the schema pg_trgm is installed in, quoted as an
// identifier, or "" when it is not installed in the database.
func TrigramSchema(db *gorm.DB) (string, error) {
	var ns []string
	err := db.Raw(`SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_trgm'`).Scan(&ns).Error
	if err != nil || len(ns) == 0 {
		return "", err
	}
	return ns[0], nil
}

// PresentSearchIndexes counts the SearchIndexes in db's current schema.
func PresentSearchIndexes(db *gorm.DB) (int, error) {
	names := make([]string, len(SearchIndexes))
	for i, x := range SearchIndexes {
		names[i] = x.Name
	}
	var n int
	err := db.Raw(`SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname IN ?`, names).Scan(&n).Error
	return n, err
}

// ensureSearchIndexes creates the missing SearchIndexes on PostgreSQL,
// creating pg_trgm first (in the current schema, beside the tables) when
// it is not installed. A database that refuses the extension is left as
// it is: no error, the search scans (database.SearchIndexStatus).
func ensureSearchIndexes(db *gorm.DB) error {
	if DialectOf(db) != Postgres {
		return nil
	}
	if n, err := PresentSearchIndexes(db); err != nil || n == len(SearchIndexes) {
		return err
	}
	return db.Transaction(func(tx *gorm.DB) error {
		if err := migrateLock(tx, Postgres); err != nil {
			return err
		}
		ns, err := TrigramSchema(tx)
		if err != nil {
			return err
		}
		if ns == "" {
			// An extension belongs to the whole database: processes
			// migrating two schemas must not create it at once.
			if err := tx.Exec(`SELECT pg_advisory_xact_lock(?, 0)`, int32(LockExtension)).Error; err != nil {
				return err
			}
			// A savepoint: a refused CREATE EXTENSION (no such extension,
			// no privilege) must not abort the transaction.
			if tx.Transaction(func(sp *gorm.DB) error { return sp.Exec(`CREATE EXTENSION IF NOT EXISTS pg_trgm`).Error }) != nil {
				return nil
			}
			if ns, err = TrigramSchema(tx); err != nil || ns == "" {
				return err
			}
		}
		if usable, err := TrigramUsable(tx, ns); err != nil || !usable {
			// pg_trgm lives in a schema this user may not use: the
			// search scans, and database.SearchIndexStatus says why.
			return err
		}
		for _, x := range SearchIndexes {
			q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s ON %s USING gin (lower(%s) %s.gin_trgm_ops)`, x.Name, x.Table, x.Column, ns)
			if err := tx.Exec(q).Error; err != nil {
				return fmt.Errorf("create search index %s: %w", x.Name, err)
			}
		}
		return nil
	})
}

// TrigramUsable says whether the current user may use the schema ns that
// pg_trgm is installed in (its operator classes live there).
func TrigramUsable(db *gorm.DB, ns string) (bool, error) {
	var ok []bool
	err := db.Raw(`SELECT has_schema_privilege(?::regnamespace, 'USAGE')`, ns).Scan(&ok).Error
	return err == nil && len(ok) == 1 && ok[0], err
}
