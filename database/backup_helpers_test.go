package database_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/models"
)

// backedUpSQLite makes a migrated SQLite database live.db in dir and its
// backup backup.db beside it, with the database closed again; it returns
// both paths.
func backedUpSQLite(t *testing.T, dir string) (live, backup string) {
	t.Helper()
	live, backup = filepath.Join(dir, "live.db"), filepath.Join(dir, "backup.db")
	db, _, err := database.Open("sqlite:" + live)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := db.DB(); err == nil {
		defer s.Close()
	}
	if err := models.Migrate(db); err != nil {
		t.Fatal(err)
	}
	if _, err := database.Backup(context.Background(), db, backup); err != nil {
		t.Fatal(err)
	}
	return live, backup
}
