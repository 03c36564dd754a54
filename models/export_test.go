package models

import "gorm.io/gorm"

// MigrateList runs the migration runner on a list other than Migrations, so
// tests can play a build that adds a migration without changing the real one.
func MigrateList(db *gorm.DB, list []Migration) error { return migrate(db, list, highest(list)) }
