package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/feed"
)

// The documented PostgreSQL procedure (docs/operations.md
// "PostgreSQL: pg_dump, or continuous archiving for point-in-time recovery"):
// `ipledger backup` refuses and points at it; pg_dump --format=custom of a
// database that writers keep allocating in (with the feed numbering
// their events), pg_restore --single-transaction into an empty one, and
// `ipledger check` there is clean, with every allocation acknowledged
// before the dump began, each writer's writes a prefix of what it wrote,
// and none of those acknowledged while the dump was held after taking its
// snapshot; a second restore into the now full database fails as a whole.
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
	ctx := audit.WithActor(context.Background(), "pgdump", "req-pgdump")
	a := allocator.New(db, allocator.Options{})
	yes := true
	if _, err := a.CreatePool(ctx, allocator.PoolSpec{Name: "dump", Type: "ipv4",
		Ranges: []allocator.RangeSpec{{First: "10.70.0.0", Last: "10.70.255.255", AutoAssign: &yes}}}); err != nil {
		t.Fatal(err)
	}
	feedCtx, feedStop := context.WithCancel(context.Background())
	feedDone := feed.New(a.DB(), feed.Options{}).RunFeed(feedCtx, feed.FeedOptions{})
	defer func() { feedStop(); <-feedDone }()
	w := startWriters(4, func(owner string) (string, error) {
		al, _, err := a.Allocate(ctx, "dump", allocator.Owner{Type: "vm", ID: owner}, "")
		if err != nil {
			return "", err
		}
		return al.Value, nil
	})
	t.Cleanup(func() { _ = w.stop() })
	if err := w.waitFor(200, time.Minute); err != nil {
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
	before, held := heldDump(t, db, w, exec.Command(dump, "--format=custom", "--schema="+schema, "--file="+file, libpq(strings.TrimPrefix(base.Path, "/"))))
	if err := w.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes acknowledged before the dump began, %d while it was held", len(before), len(held))

	var b [6]byte
	_, _ = rand.Read(b[:])
	target := "restore_" + hex.EncodeToString(b[:])
	if err := db.Exec(`CREATE DATABASE ` + target).Error; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin, _, err := database.Open(dbtest.PostgresBase())
		if err == nil {
			admin.Exec(`DROP DATABASE IF EXISTS ` + target + ` WITH (FORCE)`)
			closeDB(admin)
		}
	})
	// The tests' database holds pg_trgm in public, outside the dumped
	// schema, as a site's database may hold it in a schema of its own:
	// the target gets it first, as docs/operations.md says for a dump of
	// one schema.
	if err := dbtest.OpenURL(t, libpq(target)).Exec(`CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public`).Error; err != nil {
		t.Fatal(err)
	}
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
	var rows []struct{ OwnerID, Value string }
	if err := rdb.Raw(`SELECT owner_id, value FROM allocations`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.OwnerID] = r.Value
	}
	checkCopy(t, got, before)
	for _, k := range held {
		if v, ok := got[k.owner]; ok {
			t.Errorf("%s → %s was sent after the dump took its snapshot, but the dump holds it (%s)", k.owner, k.value, v)
		}
	}
	if out, err := restoreInto(); err == nil {
		t.Fatalf("a second pg_restore into the full database succeeded:\n%s", out)
	}
}

// heldDump runs the pg_dump of dumpCmd while w writes, holding it after it
// has taken its snapshot until drillHeld more writes are acknowledged:
// pg_dump reads in one REPEATABLE READ transaction and then locks every
// table it dumps, so a lock on schema_migrations (which no writer
// touches) makes it wait, snapshot taken, as pg_locks shows. It returns
// the writes acknowledged before the dump began and those sent and
// acknowledged while it was held.
func heldDump(t *testing.T, db *gorm.DB, w *drillWriters, dumpCmd *exec.Cmd) (before, held []drillAck) {
	t.Helper()
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lock, err := sqlDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, "LOCK TABLE schema_migrations IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	dumpCmd.Stdout, dumpCmd.Stderr = &out, &out
	before = w.acked(0)
	if err := dumpCmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- dumpCmd.Wait() }()
	for waiting := 0; waiting == 0; {
		select {
		case err := <-done:
			t.Fatalf("pg_dump ended while schema_migrations was locked: %v\n%s", err, out.String())
		case <-time.After(5 * time.Millisecond):
		}
		if err := db.Raw(`SELECT COUNT(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE c.relname = 'schema_migrations' AND c.relnamespace = current_schema()::regnamespace AND NOT l.granted`).Scan(&waiting).Error; err != nil {
			t.Fatal(err)
		}
	}
	// A write sent from now on commits after the dump's snapshot.
	from, sent := w.count(), w.started.Load()
	if err := w.waitFor(from+drillHeld, time.Minute); err != nil {
		t.Error(err)
	}
	for _, k := range w.acked(from) {
		if k.started > sent {
			held = append(held, k)
		}
	}
	if len(held) == 0 {
		t.Error("no write sent while the dump was held was acknowledged")
	}
	if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out.String())
	}
	return before, held
}
