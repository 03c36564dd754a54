//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/database"
)

// A restore never replaces a SQLite file that a server is using, --force
// or not: the server would go on acknowledging writes into the replaced
// file, and they would be gone at its next start. Once the server has
// stopped the restore goes through, and a server cannot start while a
// restore holds the file.
func TestRestoreRefusesADatabaseInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	live := "sqlite:" + filepath.Join(dir, "live.db")
	_, closeDB, err := openDatabase(config{DatabaseURL: live})
	if err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "backup.db")
	if out, err := runCmd(t, "backup", "--database", live, "--to", backup); err != nil {
		closeDB()
		t.Fatalf("backup: %v\n%s", err, out)
	}
	before, err := os.ReadFile(filepath.Join(dir, "live.db"))
	if err != nil {
		closeDB()
		t.Fatal(err)
	}

	out, err := runCmd(t, "restore", "--from", backup, "--database", live, "--force")
	if err == nil || !strings.Contains(out, "in use by a running ipledger server") {
		closeDB()
		t.Fatalf("restore --force beside a running server: err %v\n%s", err, out)
	}
	after, err := os.ReadFile(filepath.Join(dir, "live.db"))
	if err != nil || string(after) != string(before) {
		closeDB()
		t.Fatalf("a refused restore changed the database file (%v)", err)
	}

	closeDB()
	self := filepath.Join(dir, "live.db")
	if out, err := runCmd(t, "restore", "--from", self, "--database", live, "--force"); err == nil || !strings.Contains(out, "is the database being restored") {
		t.Fatalf("restore of the database over itself: err %v\n%s", err, out)
	}
	if out, err := runCmd(t, "restore", "--from", backup, "--database", live, "--force"); err != nil {
		t.Fatalf("restore after the server stopped: %v\n%s", err, out)
	}

	target, err := database.ParseURL(live)
	if err != nil {
		t.Fatal(err)
	}
	release, err := database.ClaimSQLite(target.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, _, err := openDatabase(config{DatabaseURL: live}); err == nil || !strings.Contains(err.Error(), "being restored") {
		t.Fatalf("a server started during a restore: %v", err)
	}
}
