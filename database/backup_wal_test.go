package database_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/models"
)

// A restore from a raw copy of a live database (a volume snapshot: the
// main file, its WAL and its shared memory) keeps the transactions that
// are still only in the WAL: SQLite applies them when it reads the copy.
func TestRestoreKeepsTheSourcesWAL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	db, _, err := database.Open("sqlite:" + live)
	if err != nil {
		t.Fatal(err)
	}
	if err := models.Migrate(db); err != nil {
		t.Fatal(err)
	}
	s, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetMaxOpenConns(1)
	var mode string
	if err := db.Raw(`PRAGMA journal_mode`).Scan(&mode).Error; err != nil || mode != "wal" {
		t.Fatalf("journal mode %q (%v), want wal", mode, err)
	}
	for _, q := range []string{`PRAGMA wal_checkpoint(TRUNCATE)`, `PRAGMA wal_autocheckpoint=0`, `CREATE TABLE wal_rows (n INTEGER NOT NULL)`} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	const rows = 50
	for i := range rows {
		if err := db.Exec(`INSERT INTO wal_rows (n) VALUES (?)`, i).Error; err != nil {
			t.Fatal(err)
		}
	}
	snap := filepath.Join(dir, "snap.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(live + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if suffix == "-wal" && len(b) == 0 {
			t.Fatal("the WAL is empty: the test's rows were checkpointed")
		}
		if err := os.WriteFile(snap+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	restored := filepath.Join(dir, "restored.db")
	target, err := database.ParseURL("sqlite:" + restored)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := database.Restore(snap, target, false); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(restored + suffix); err == nil {
			t.Errorf("the restore left %s beside the restored file", suffix)
		}
	}
	rdb, _, err := database.Open("sqlite:" + restored)
	if err != nil {
		t.Fatal(err)
	}
	if rs, err := rdb.DB(); err == nil {
		defer rs.Close()
	}
	var n int
	if err := rdb.Raw(`SELECT COUNT(*) FROM wal_rows`).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n != rows {
		t.Errorf("restored file holds %d of the %d committed rows", n, rows)
	}
}

// A backup holds the webhook secrets: it is written readable by its owner
// alone, whatever the process's umask.
func TestBackupFileIsPrivate(t *testing.T) {
	t.Parallel()
	_, backup := backedUpSQLite(t, t.TempDir())
	fi, err := os.Stat(backup)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("backup file mode %o, want 600", m)
	}
}
