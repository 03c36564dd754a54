package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A mistyped SQLite path given to backup or check is refused by name, and
// nothing is created on disk: opening it would make an empty database.
func TestDatabaseCommandsRefuseAMissingSQLiteFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo.db")
	for _, args := range [][]string{
		{"backup", "--database", "sqlite:" + missing, "--to", filepath.Join(dir, "b.db")},
		{"check", "--database", "sqlite:" + missing},
	} {
		out, err := runDBCmd(t, args...)
		if err == nil || !strings.Contains(err.Error(), "--database") || !strings.Contains(err.Error(), missing) {
			t.Errorf("%s: err %v, want one naming --database and %s\n%s", args[0], err, missing, out)
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			t.Errorf("%s created %s", args[0], e.Name())
		}
	}
}
