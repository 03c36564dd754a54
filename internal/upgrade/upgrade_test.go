package upgrade_test

// TestUpgradeFromOlderBuilds (docs/operations.md, "Upgrades"): each
// fixture under testdata/<commit>/ is a database written by the build of
// that commit and filled only through its own REST API and CLI, on SQLite
// (sqlite.db.gz) and PostgreSQL (postgres.sql.gz, a plain pg_dump), with
// what that build's API answered (answers-<dialect>.json). Today's code
// opens it (migrating it), and then:
//
//   - the consistency check is clean;
//   - every list answers as the old build did: each field present then
//     is equal now (new fields may be added);
//   - every token the old build made authenticates with its name and role;
//   - the writes the old build answered after the database was stored
//     (an allocation from each pool, a release, reports, ExpectedMachine
//     edits, a delete) are answered the same way now;
//   - the change feed numbers the new events after the old ones, and the
//     check is still clean.
//
// scripts/upgradefixture makes a fixture (CONTRIBUTING.md).

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/upgrade"
	"github.com/ipledger/ipledger/models"
)

// volatile are the fields of a write's answer that hold when it was made.
var volatile = []string{"allocated_at", "created_at", "updated_at", "at", "quarantined_at", "request_id"}

func TestUpgradeFromOlderBuilds(t *testing.T) {
	t.Parallel()
	dirs, err := filepath.Glob("testdata/*/answers-*.json")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixtures under testdata: %v", err)
	}
	sort.Strings(dirs)
	for _, name := range dirs {
		f := readFixture(t, name)
		t.Run(f.Rev+"/"+f.Dialect, func(t *testing.T) {
			t.Parallel()
			u := restore(t, f, filepath.Dir(name))
			upgradeChecks(t, f, dbtest.OpenURL(t, u))
		})
	}
}

func readFixture(t *testing.T, name string) upgrade.Fixture {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var f upgrade.Fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

func gunzip(t *testing.T, name string) []byte {
	t.Helper()
	in, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
}

// restore puts the fixture's database where today's code can open it:
// the SQLite file in a temporary directory, or the PostgreSQL dump loaded
// by psql into a fresh schema of this test (the dump's schema renamed).
func restore(t *testing.T, f upgrade.Fixture, dir string) string {
	t.Helper()
	switch f.Dialect {
	case string(models.SQLite):
		p := filepath.Join(t.TempDir(), "ipledger.db")
		if err := os.WriteFile(p, gunzip(t, filepath.Join(dir, "sqlite.db.gz")), 0o600); err != nil {
			t.Fatal(err)
		}
		return "sqlite:" + p
	case string(models.Postgres):
		u := dbtest.NewPostgresURL(t)
		psql, err := exec.LookPath("psql")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("psql is required under CI=true to load the PostgreSQL fixtures: %v", err)
			}
			t.Skipf("psql not found (%v): skipping the PostgreSQL fixture", err)
		}
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		schema := pu.Query().Get("search_path")
		dump := gunzip(t, filepath.Join(dir, "postgres.sql.gz"))
		// The schema exists already (dbtest made it); every other name the
		// dump qualifies with the fixture's schema moves to this test's.
		dump = regexp.MustCompile(`(?m)^CREATE SCHEMA `+regexp.QuoteMeta(f.PGSchema)+`;$`).ReplaceAll(dump, nil)
		dump = regexp.MustCompile(`\b`+regexp.QuoteMeta(f.PGSchema)+`\b`).ReplaceAllLiteral(dump, []byte(schema))
		base, err := url.Parse(dbtest.PostgresBase())
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(psql, "-qX", "-v", "ON_ERROR_STOP=1", "--dbname", base.String())
		cmd.Stdin = bytes.NewReader(dump)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("load the PostgreSQL dump of %s: %v\n%s", f.Rev, err, out)
		}
		return u
	}
	t.Fatalf("fixture %s: unknown dialect %q", f.Rev, f.Dialect)
	return ""
}
