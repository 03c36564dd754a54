package models

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gorm.io/gorm"
)

// The constraints, indexes and triggers the migrations leave in a database,
// as the database's own catalog lists them. `ipledger check` compares a
// database's catalog with SchemaObjects (schema_objects.go): a database
// restored in part (a pg_restore that stopped after the data, a table
// rebuilt by hand) may hold rows that obey every rule today while nothing
// stops the next write from breaking one.

// SchemaObject is one constraint, index or trigger.
type SchemaObject struct {
	Table string
	// Kind is "constraint" (PostgreSQL: pg_constraint's check, foreign
	// key, primary key, unique and exclusion constraints; SQLite: a
	// constraint named in the table's definition), "index" or "trigger".
	Kind string
	Name string
}

func (o SchemaObject) String() string { return o.Table + " " + o.Kind + " " + o.Name }

func compareSchemaObjects(a, b SchemaObject) int {
	return strings.Compare(a.String(), b.String())
}

// SchemaCatalog reads the constraints, indexes and triggers of the tables
// of db's schema (on PostgreSQL, the first schema of the search path), in
// order. It reads the catalog only, so it may run inside a read-only
// transaction.
func SchemaCatalog(db *gorm.DB) ([]SchemaObject, error) {
	var out []SchemaObject
	if DialectOf(db) == Postgres {
		// Internal triggers (those of foreign keys) and NOT NULL
		// constraints (rows of pg_constraint from PostgreSQL 18 on) are
		// part of what they belong to, not objects of their own.
		if err := db.Raw(`
SELECT c.relname AS "table", 'constraint' AS kind, k.conname AS name
  FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
 WHERE c.relnamespace = current_schema()::regnamespace AND k.contype IN ('c', 'f', 'p', 'u', 'x')
UNION ALL
SELECT tablename, 'index', indexname FROM pg_indexes WHERE schemaname = current_schema()
UNION ALL
SELECT c.relname, 'trigger', t.tgname
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal`).Scan(&out).Error; err != nil {
			return nil, fmt.Errorf("read the catalog: %w", err)
		}
	} else {
		type entry struct{ Type, Table, Name, SQL string }
		var rows []entry
		if err := db.Raw(`SELECT type, tbl_name AS "table", name, COALESCE(sql, '') AS sql FROM sqlite_master
			WHERE type IN ('table', 'index', 'trigger') AND name NOT LIKE 'sqlite_%'
			   OR type = 'index' AND name LIKE 'sqlite_autoindex_%'`).Scan(&rows).Error; err != nil {
			return nil, fmt.Errorf("read the catalog: %w", err)
		}
		for _, r := range rows {
			if r.Type != "table" {
				out = append(out, SchemaObject{Table: r.Table, Kind: r.Type, Name: r.Name})
				continue
			}
			for _, m := range sqliteConstraintName.FindAllStringSubmatch(r.SQL, -1) {
				out = append(out, SchemaObject{Table: r.Table, Kind: "constraint", Name: m[1]})
			}
		}
	}
	slices.SortFunc(out, compareSchemaObjects)
	return out, nil
}

// sqliteConstraintName finds the named constraints of an SQLite table's
// definition (SQLite keeps CHECK, UNIQUE and PRIMARY KEY constraints there
// and nowhere else; a UNIQUE one is enforced by its sqlite_autoindex_).
var sqliteConstraintName = regexp.MustCompile(`(?i)\bCONSTRAINT\s+"?(\w+)"?`)

// IsSearchIndex reports one of the SearchIndexes: an index a PostgreSQL
// database holds when pg_trgm is available, which SchemaObjects leaves
// out (a database without it is not broken; SearchIndexStatus reports it).
func IsSearchIndex(o SchemaObject) bool {
	return slices.Contains(searchIndexObjects(), o)
}

// MissingSchemaObjects returns the objects of nil that
// present lacks.
func MissingSchemaObjects(d Dialect, present []SchemaObject) []SchemaObject {
	have := map[SchemaObject]bool{}
	for _, o := range present {
		have[o] = true
	}
	var out []SchemaObject
	for _, o := range SchemaObjects(d) {
		if !have[o] {
			out = append(out, o)
		}
	}
	return out
}
