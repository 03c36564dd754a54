//go:build unix

package database_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/database"
)

// A restore through a symlink to a served database is refused as through
// the real path, and a server started through a symlink blocks a restore
// of the real path: the lock belongs to the file, not to its name.
func TestRestoreThroughASymlinkIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	live, backup := backedUpSQLite(t, dir)
	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(live, link); err != nil {
		t.Fatal(err)
	}
	linkedDir := filepath.Join(dir, "linked-dir")
	if err := os.Symlink(dir, linkedDir); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}

	release, err := database.HoldSQLite(live)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, filepath.Join(linkedDir, "live.db")} {
		target, err := database.ParseURL("sqlite:" + p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := database.Restore(backup, target, true); err == nil || !strings.Contains(err.Error(), "in use by a running ipledger server") {
			t.Errorf("restore through %q beside a running server: %v", p, err)
		}
	}
	release()
	if after, err := os.ReadFile(live); err != nil || string(after) != string(before) {
		t.Fatalf("a refused restore changed the database file (%v)", err)
	}

	release, err = database.HoldSQLite(link)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := database.ClaimSQLite(live); err == nil {
		r()
		t.Error("a restore claimed the real path while a server held it through a symlink")
	}
	release()

	target, err := database.ParseURL("sqlite:" + link)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := database.Restore(backup, target, true); err != nil {
		t.Fatalf("restore through a symlink after the server stopped: %v", err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the restore replaced the symlink instead of the file it names (%v)", err)
	}
}
