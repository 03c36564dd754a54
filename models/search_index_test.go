package models_test

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// TestSearchIndexesWithUnusableTrigramSchema: pg_trgm installed (by a
// superuser) in a schema the ipledger user has no USAGE on does not stop
// Migrate, so the server starts and the search scans; SearchIndexStatus
// names the schema; once USAGE is granted, Migrate creates the indexes.
// The test needs a database of its own: pg_trgm is installed once per
// database, and the shared test database has it in public.
func TestSearchIndexesWithUnusableTrigramSchema(t *testing.T) {
	t.Parallel()
	dbtest.RequirePostgres(t)
	admin, _, err := database.Open(dbtest.PostgresBase())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := admin.DB(); err == nil {
			s.Close()
		}
	})
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_trgm_" + hex.EncodeToString(b[:])
	for _, q := range []string{`CREATE ROLE ` + name + ` LOGIN`, `CREATE DATABASE ` + name} {
		if err := admin.Exec(q).Error; err != nil {
			t.Skipf("%s: %v (the test needs a role that may create roles and databases)", q, err)
		}
	}
	t.Cleanup(func() {
		admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
		admin.Exec(`DROP ROLE IF EXISTS ` + name)
	})
	base, err := url.Parse(dbtest.PostgresBase())
	if err != nil {
		t.Fatal(err)
	}
	base.Path = "/" + name
	super, _, err := database.Open(base.String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if s, err := super.DB(); err == nil {
			s.Close()
		}
	}()
	for _, q := range []string{`REVOKE CREATE ON DATABASE ` + name + ` FROM PUBLIC`, `CREATE SCHEMA ext`,
		`CREATE EXTENSION pg_trgm SCHEMA ext`, `CREATE SCHEMA app AUTHORIZATION ` + name} {
		if err := super.Exec(q).Error; err != nil {
			t.Skipf("%s: %v", q, err)
		}
	}
	u := *base
	u.User = url.User(name)
	q := u.Query()
	q.Set("search_path", "app")
	u.RawQuery = q.Encode()
	db, _, err := database.Open(u.String())
	if err != nil {
		t.Fatalf("open as a user without USAGE on pg_trgm's schema: %v", err)
	}
	defer func() {
		if s, err := db.DB(); err == nil {
			s.Close()
		}
	}()
	if err := models.Migrate(db); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if st, err := database.SearchIndexStatus(db); err != nil || !strings.Contains(st, "schema ext") {
		t.Errorf("status: %q, %v; want it to name the schema ext", st, err)
	}
	if err := super.Exec(`GRANT USAGE ON SCHEMA ext TO ` + name).Error; err != nil {
		t.Fatal(err)
	}
	if err := models.Migrate(db); err != nil {
		t.Fatalf("Migrate after the grant: %v", err)
	}
	if st, err := database.SearchIndexStatus(db); err != nil || st != "" {
		t.Errorf("status after the grant: %q, %v; want the indexes in place", st, err)
	}
}
