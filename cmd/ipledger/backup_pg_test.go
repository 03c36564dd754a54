package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/models/dbtest"
)

// The documented PostgreSQL procedure (docs/operations.md, "Backups"):
// `ipledger backup` refuses and points at it; pg_dump --format=custom of a
// written database, pg_restore --single-transaction into an empty one,
// and `ipledger check` there is clean with every allocation present; a
// second restore into the now full database fails as a whole.
func TestPostgresDumpRestoreCheck(t *testing.T) {
	t.Parallel()
	dump, err1 := exec.LookPath("pg_dump")
	restore, err2 := exec.LookPath("pg_restore")
	if err1 != nil || err2 != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("pg_dump and pg_restore are required under CI=true (apt-get install postgresql-client)")
		}
		t.Skip("pg_dump or pg_restore not installed: skipping the PostgreSQL backup procedure")
	}
	src := dbtest.NewPostgresURL(t)
	db := dbtest.OpenURL(t, src)
	ctx := allocator.WithActor(context.Background(), "pgdump", "req-pgdump")
	a := allocator.New(db, allocator.Options{})
	yes := true
	if _, err := a.CreatePool(ctx, allocator.PoolSpec{Name: "dump", Type: "ipv4",
		Ranges: []allocator.RangeSpec{{First: "10.70.0.0", Last: "10.70.255.255", AutoAssign: &yes}}}); err != nil {
		t.Fatal(err)
	}
	held := map[string]string{}
	for i := 0; i < 200; i++ {
		owner := fmt.Sprintf("vm-%d", i)
		al, _, err := a.Allocate(ctx, "dump", allocator.Owner{Type: "vm", ID: owner}, "")
		if err != nil {
			t.Fatal(err)
		}
		held[owner] = al.Value
	}
	if _, err := feed.New(a.DB(), feed.Options{}).SequenceOnce(ctx); err != nil {
		t.Fatal(err)
	}

	if out, err := runCmd(t, "backup", "--database", src, "--to", filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(out, "pg_dump") {
		t.Fatalf("backup of PostgreSQL: err %v, want a refusal naming pg_dump:\n%s", err, out)
	}

	su, _ := url.Parse(src)
	schema := su.Query().Get("search_path")
	base, _ := url.Parse(dbtest.PostgresBase())
	libpq := func(dbname string) string {
		u := *base
		u.Path = "/" + dbname
		u.RawQuery = "sslmode=disable"
		return u.String()
	}
	file := filepath.Join(t.TempDir(), "ipledger.dump")
	if out, err := exec.Command(dump, "--format=custom", "--schema="+schema, "--file="+file, libpq(strings.TrimPrefix(base.Path, "/"))).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}

	var b [6]byte
	_, _ = rand.Read(b[:])
	target := "restore_" + hex.EncodeToString(b[:])
	if err := db.Exec(`CREATE DATABASE ` + target).Error; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin, _, err := models.Open(dbtest.PostgresBase())
		if err == nil {
			admin.Exec(`DROP DATABASE IF EXISTS ` + target + ` WITH (FORCE)`)
			closeDB(admin)
		}
	})
	restoreInto := func() ([]byte, error) {
		return exec.Command(restore, "--dbname="+libpq(target), "--no-owner", "--exit-on-error", "--single-transaction", file).CombinedOutput()
	}
	if out, err := restoreInto(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	restored := libpq(target) + "&search_path=" + schema
	out, err := runCmd(t, "check", "--database", restored)
	if err != nil || !strings.Contains(out, "consistent") {
		t.Fatalf("check of the restored database: %v\n%s", err, out)
	}
	rdb := dbtest.OpenURL(t, restored)
	type row struct{ OwnerID, Value string }
	var rows []row
	if err := rdb.Raw(`SELECT owner_id, value FROM allocations`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.OwnerID] = r.Value
	}
	for o, v := range held {
		if got[o] != v {
			t.Errorf("%s held %s before the dump; restored: %q", o, v, got[o])
		}
	}
	if out, err := restoreInto(); err == nil {
		t.Fatalf("a second pg_restore into the full database succeeded:\n%s", out)
	}
}
