//go:build unix

package database_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ipledger/ipledger/database"
)

// A restore run as root gives the restored file the owner of the file it
// replaces: the server runs as a user of its own and must still open its
// database at the next start.
func TestRestoreKeepsTheTargetsOwner(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("changing a file's owner needs root")
	}
	dir := t.TempDir()
	live, backup := backedUpSQLite(t, dir)
	const uid, gid = 65532, 65533
	if err := os.Chown(live, uid, gid); err != nil {
		t.Fatal(err)
	}
	target, err := database.ParseURL("sqlite:" + live)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := database.Restore(backup, target, true); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(live)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != uid || st.Gid != gid {
		t.Errorf("restored file owned by %d:%d, want the replaced file's %d:%d", st.Uid, st.Gid, uid, gid)
	}
}

// A restore run as root to a new path leaves the lock file, like the
// database, to the directory's owner: the server's own user must open it
// at its next start.
func TestRestoreLockFileTakesTheDatabasesOwner(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("changing a file's owner needs root; as another user every file is the user's own")
	}
	dir := t.TempDir()
	_, backup := backedUpSQLite(t, dir)
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	const uid, gid = 65532, 65533
	if err := os.Chown(data, uid, gid); err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(data, "restored.db")
	target, err := database.ParseURL("sqlite:" + restored)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := database.Restore(backup, target, false); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{restored, restored + ".lock"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != uid || st.Gid != gid {
			t.Errorf("%s owned by %d:%d, want the directory's %d:%d", filepath.Base(p), st.Uid, st.Gid, uid, gid)
		}
	}
}
