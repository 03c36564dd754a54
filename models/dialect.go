package models

import "gorm.io/gorm"

// Dialect names the database behind a *gorm.DB.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// DialectOf tells which database a handle talks to.
func DialectOf(db *gorm.DB) Dialect {
	if db.Dialector.Name() == "postgres" {
		return Postgres
	}
	return SQLite
}
