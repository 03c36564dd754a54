package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// The backup drill: writers allocate through an `ipledger serve` process
// (the built binary) on an SQLite file of 10,000 allocations while
// `ipledger backup` copies it from this process. The copy is held after it
// has read its snapshot until drillHeld more writes are acknowledged, so
// writes land during every copy; the copy is restored into a fresh file,
// `ipledger check` finds it consistent, every allocation acknowledged
// before the backup began is in it, held by its owner, and each writer's
// writes in it are a prefix of what it wrote.
func TestBackupDrill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the built binary as the writers' server; skipped with -short")
	}
	dir := t.TempDir()
	src := "sqlite:" + filepath.Join(dir, "live.db")
	drillHistory(t, src)
	srv := mpStart(t, src, 1)[0]
	w := startWriters(4, func(owner string) (string, error) {
		code, body := mpCall(t, srv, "POST", "/api/v1/pools/drill/allocations", `{"owner_type":"vm","owner_id":"`+owner+`"}`)
		var v struct{ Value string }
		if err := json.Unmarshal(body, &v); err != nil || code != 201 || v.Value == "" {
			return "", fmt.Errorf("%d %s", code, body)
		}
		return v.Value, nil
	})
	t.Cleanup(func() { _ = w.stop() })
	if err := w.waitFor(200, time.Minute); err != nil {
		t.Fatal(err)
	}

	// The copy's snapshot is read before the hold: a write acknowledged
	// during the hold is absent from it, unless the copy was so slow to
	// start that its snapshot came after all of them; then again.
	var restored string
	var before []drillAck
	for attempt := 1; ; attempt++ {
		var held []drillAck
		backup := filepath.Join(dir, fmt.Sprintf("copy-%d.db", attempt))
		before, held = heldBackup(t, w, src, backup)
		restored = "sqlite:" + filepath.Join(dir, fmt.Sprintf("restored-%d.db", attempt))
		out, err := runCmd(t, "restore", "--from", backup, "--database", restored)
		if err != nil || !strings.Contains(out, "consistent") {
			t.Fatalf("restore and check of the copy: %v\n%s", err, out)
		}
		copied := drillAllocations(t, restored)
		absent := 0
		for _, k := range held {
			if _, ok := copied[k.owner]; !ok {
				absent++
			}
		}
		t.Logf("attempt %d: %d writes acknowledged before the backup, %d while its copy was held (%d of them after its snapshot)",
			attempt, len(before), len(held), absent)
		if absent > 0 {
			checkCopy(t, copied, before)
			if len(copied) < 10000+len(before) {
				t.Errorf("the copy holds %d allocations, fewer than the %d acknowledged before it began", len(copied), 10000+len(before))
			}
			// The restored target is not empty any more: a second restore needs --force.
			if out, err := runCmd(t, "restore", "--from", backup, "--database", restored); err == nil || !strings.Contains(out, "--force") {
				t.Fatalf("restore over a non-empty database: err %v\n%s", err, out)
			}
			break
		}
		if attempt == 3 {
			t.Fatalf("in %d attempts no write landed after the copy's snapshot", attempt)
		}
	}
	if err := w.stop(); err != nil {
		t.Fatal(err)
	}
	if v, err := database.VerifySQLiteFile(strings.TrimPrefix(restored, "sqlite:")); err != nil || v != models.SchemaVersion() {
		t.Errorf("restored file: version %d, %v", v, err)
	}
}

// drillHeld is how many writes land while the copy is held.
const drillHeld = 40

// drillHistory gives the database at src the pool drill with 10,000
// allocations, so that the copy has something to take time over.
func drillHistory(t *testing.T, src string) {
	t.Helper()
	db := dbtest.OpenURL(t, src)
	ctx := audit.WithActor(context.Background(), "drill", "req-drill")
	a := allocator.New(db, allocator.Options{})
	yes := true
	if _, err := a.CreatePool(ctx, allocator.PoolSpec{Name: "drill", Type: "ipv4",
		Ranges: []allocator.RangeSpec{{First: "10.64.0.0", Last: "10.95.255.255", AutoAssign: &yes}}}); err != nil {
		t.Fatal(err)
	}
	for b := 0; b < 20; b++ {
		items := make([]allocator.BulkItem, 500)
		for i := range items {
			items[i] = allocator.BulkItem{Owner: allocator.Owner{Type: "vm", ID: fmt.Sprintf("pre-%d-%d", b, i)}}
		}
		if _, _, err := a.AllocateBulk(ctx, "drill", items); err != nil {
			t.Fatal(err)
		}
	}
	closeDB(db)
}

// heldBackup runs `ipledger backup --database src --to to` while w
// writes, holding its copy with a write lock on the copy's file (taken
// just before VACUUM INTO starts, which reads its snapshot and then waits
// for the lock) until drillHeld more writes are acknowledged. It returns
// the writes acknowledged before the backup began and those acknowledged
// while the copy was held.
func heldBackup(t *testing.T, w *drillWriters, src, to string) (before, held []drillAck) {
	t.Helper()
	var finished atomic.Bool
	released := make(chan []drillAck, 1)
	hold := func(partial string) error {
		lock, err := sql.Open("sqlite", "file:"+partial)
		if err != nil {
			return err
		}
		conn, err := lock.Conn(context.Background())
		if err == nil {
			_, err = conn.ExecContext(context.Background(), "BEGIN IMMEDIATE")
		}
		if err != nil {
			lock.Close()
			return fmt.Errorf("hold the copy: %w", err)
		}
		from := w.count()
		go func() {
			if err := w.waitFor(from+drillHeld, time.Minute); err != nil {
				t.Errorf("while the copy was held: %v", err)
			}
			if finished.Load() {
				t.Errorf("the backup ended while its copy was held: the hold did not hold it")
			}
			got := w.acked(from)
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
			lock.Close()
			released <- got
		}()
		return nil
	}
	before = w.acked(0)
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetArgs([]string{"backup", "--database", src, "--to", to})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(database.WithBeforeCopy(context.Background(), hold))
	finished.Store(true)
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, out.String())
	}
	return before, <-released
}

// drillAllocations returns the drill pool's allocations of the database
// at u, owner → value.
func drillAllocations(t *testing.T, u string) map[string]string {
	t.Helper()
	db := dbtest.OpenURL(t, u)
	defer closeDB(db)
	var rows []struct{ OwnerID, Value string }
	if err := db.Raw(`SELECT a.owner_id, a.value FROM allocations a JOIN pools p ON p.id = a.pool_id
		WHERE p.name = 'drill' AND a.state = 'allocated'`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.OwnerID] = r.Value
	}
	return out
}
