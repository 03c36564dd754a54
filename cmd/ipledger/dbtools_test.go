package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
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
		out, err := runCmd(t, args...)
		if err == nil || !strings.Contains(err.Error(), "--database") || !strings.Contains(err.Error(), missing) {
			t.Errorf("%s: err %v, want one naming --database and %s\n%s", args[0], err, missing, out)
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			t.Errorf("%s created %s", args[0], e.Name())
		}
	}
}

// A file with a damaged page is not called consistent: check runs SQLite's
// own integrity check, not only the rules over the rows they read. The
// damaged page here is the root of an index of a table no rule reads.
func TestCheckFindsADamagedSQLiteFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "site.db")
	if out, err := runCmd(t, "migrate", "--database", "sqlite:"+path); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	db := dbtest.OpenURL(t, "sqlite:"+path)
	var root, pageSize int64
	if err := db.Raw(`SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'api_tokens' ORDER BY name LIMIT 1`).Scan(&root).Error; err != nil || root == 0 {
		t.Fatalf("index root page: %d, %v", root, err)
	}
	if err := db.Raw(`PRAGMA page_size`).Scan(&pageSize).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`).Error; err != nil {
		t.Fatal(err)
	}
	if s, err := db.DB(); err == nil {
		s.Close()
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, int(pageSize)), (root-1)*pageSize); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, err := runCmd(t, "check", "--database", "sqlite:"+path)
	if err == nil || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), path) {
		t.Fatalf("check of a damaged file: err %v, want one naming the file as damaged\n%s", err, out)
	}
}

// A backup file that is not there, or a file in a directory that is not,
// is refused naming the flag and the value, and nothing is written.
func TestDatabaseCommandsNameAMissingFileOrDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	if out, err := runCmd(t, "migrate", "--database", "sqlite:"+live); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	gone := filepath.Join(dir, "gone")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "--database", "sqlite:" + live, "--to", filepath.Join(gone, "b.db")}, "--to " + filepath.Join(gone, "b.db")},
		{[]string{"restore", "--from", filepath.Join(dir, "nope.db"), "--database", "sqlite:" + filepath.Join(dir, "r.db")}, "--from " + filepath.Join(dir, "nope.db")},
		{[]string{"restore", "--from", live, "--database", "sqlite:" + filepath.Join(gone, "r.db")}, "--database " + filepath.Join(gone, "r.db")},
	} {
		out, err := runCmd(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want one naming %q\n%s", c.args, err, c.want, out)
		}
		if _, err := os.Stat(gone); err == nil {
			t.Fatalf("%v created %s", c.args, gone)
		}
	}
}

// A file that is not a SQLite database, given to restore as the backup or
// to backup as the database, is refused naming the flag and the file, and
// the database restore would replace is left as it was.
func TestDatabaseCommandsNameAFileThatIsNotADatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	if out, err := runCmd(t, "migrate", "--database", "sqlite:"+live); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	before, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte("not a database, long enough to be read as a header........................................................"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"restore", "--force", "--from", junk, "--database", "sqlite:" + live}, "--from " + junk},
		{[]string{"backup", "--database", "sqlite:" + junk, "--to", filepath.Join(dir, "b.db")}, "--database sqlite:" + junk},
	} {
		out, err := runCmd(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want one naming %q\n%s", c.args, err, c.want, out)
		}
	}
	if after, err := os.ReadFile(live); err != nil || !bytes.Equal(before, after) {
		t.Errorf("restore of a junk file changed %s (%v)", live, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.db")); err == nil {
		t.Error("backup of a junk file wrote b.db")
	}
}

// check on a database that holds no ipledger schema says so, on both
// databases, instead of a driver's "no such table".
func TestCheckNamesADatabaseWithoutTheSchema(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			url := dbtest.NewSQLiteURL(t)
			if d == models.Postgres {
				url = dbtest.NewPostgresURL(t)
			}
			db, _, err := database.Open(url)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Exec(`CREATE TABLE unrelated (id INTEGER PRIMARY KEY)`).Error
			closeDB(db)
			if err != nil {
				t.Fatal(err)
			}
			out, err := runCmd(t, "check", "--database", url)
			if err == nil || !strings.Contains(err.Error(), "not an ipledger database") {
				t.Errorf("err %v, want \"not an ipledger database\"\n%s", err, out)
			}
		})
	}
}
