package database

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ipledger/ipledger/models"
)

// A SQLite path with URI-special characters ('#', '?', '%', spaces) opens
// exactly that file, not a truncated name.
func TestSQLitePathWithSpecialCharacters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"a#b.db", "c?d.db", "e%20f.db", "g h.db"} {
		p := filepath.Join(dir, "sub#1", name)
		db, d, err := Open("sqlite:" + p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d != models.SQLite {
			t.Fatalf("%s: dialect %s", name, d)
		}
		if err := models.Migrate(db); err != nil {
			t.Fatalf("%s: migrate: %v", name, err)
		}
		if s, err := db.DB(); err == nil {
			s.Close()
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: the file %s was not created: %v", name, p, err)
		}
	}
}
