package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/models/dbtest"
)

// The backup drill: writers keep allocating on an SQLite file while
// `ipledger backup` copies it; the copy is restored into a fresh file,
// `ipledger check` finds it consistent, and every allocation acknowledged
// before the backup began is in it, held by its owner.
func TestBackupDrill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "sqlite:" + filepath.Join(dir, "live.db")
	db := dbtest.OpenURL(t, src)
	ctx := allocator.WithActor(context.Background(), "drill", "req-drill")
	a := allocator.New(db, allocator.Options{})
	yes := true
	if _, err := a.CreatePool(ctx, allocator.PoolSpec{Name: "drill", Type: "ipv4",
		Ranges: []allocator.RangeSpec{{First: "10.64.0.0", Last: "10.95.255.255", AutoAssign: &yes}}}); err != nil {
		t.Fatal(err)
	}
	// Some history first, so the copy has something to take time over.
	for b := 0; b < 20; b++ {
		items := make([]allocator.BulkItem, 500)
		for i := range items {
			items[i] = allocator.BulkItem{Owner: allocator.Owner{Type: "vm", ID: fmt.Sprintf("pre-%d-%d", b, i)}}
		}
		if _, _, err := a.AllocateBulk(ctx, "drill", items); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := feed.New(a.DB(), feed.Options{}).SequenceOnce(ctx); err != nil {
		t.Fatal(err)
	}

	type ack struct{ owner, value string }
	var (
		mu    sync.Mutex
		acked []ack
		stop  = make(chan struct{})
		wg    sync.WaitGroup
		errs  = make(chan error, 8)
		first = make(chan struct{})
		once  sync.Once
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				owner := fmt.Sprintf("w%d-%d", w, i)
				al, _, err := a.Allocate(ctx, "drill", allocator.Owner{Type: "vm", ID: owner}, "")
				if err != nil {
					errs <- fmt.Errorf("allocate %s: %w", owner, err)
					return
				}
				mu.Lock()
				acked = append(acked, ack{owner, al.Value})
				if len(acked) >= 200 {
					once.Do(func() { close(first) })
				}
				mu.Unlock()
			}
		}(w)
	}
	// The sequencer runs as in a server, so revisions keep being numbered
	// while the copy is taken.
	feedCtx, feedStop := context.WithCancel(context.Background())
	feedDone := feed.New(a.DB(), feed.Options{}).RunFeed(feedCtx, feed.FeedOptions{})
	select {
	case <-first:
	case err := <-errs:
		t.Fatal(err)
	}
	mu.Lock()
	before := append([]ack(nil), acked...)
	mu.Unlock()

	backup := filepath.Join(dir, "copy.db")
	out, err := runCmd(t, "backup", "--database", src, "--to", backup)
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	mu.Lock()
	during := len(acked) - len(before)
	mu.Unlock()
	close(stop)
	wg.Wait()
	feedStop()
	<-feedDone
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("acknowledged before the backup: %d; during it: %d", len(before), during)

	restored := "sqlite:" + filepath.Join(dir, "restored.db")
	out, err = runCmd(t, "restore", "--from", backup, "--database", restored)
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if !strings.Contains(out, "consistent") {
		t.Fatalf("restore did not report a consistent database:\n%s", out)
	}
	if out, err := runCmd(t, "check", "--database", restored); err != nil {
		t.Fatalf("check of the restored copy: %v\n%s", err, out)
	}
	// The restored target is not empty any more: a second restore needs --force.
	if out, err := runCmd(t, "restore", "--from", backup, "--database", restored); err == nil || !strings.Contains(out, "--force") {
		t.Fatalf("restore over a non-empty database: err %v\n%s", err, out)
	}

	rdb := dbtest.OpenURL(t, restored)
	type row struct{ OwnerID, Value string }
	var rows []row
	if err := rdb.Raw(`SELECT a.owner_id, a.value FROM allocations a JOIN pools p ON p.id = a.pool_id
		WHERE p.name = 'drill' AND a.state = 'allocated'`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	held := map[string]string{}
	for _, r := range rows {
		held[r.OwnerID] = r.Value
	}
	if len(held) < 10000+len(before) {
		t.Errorf("the copy holds %d allocations, fewer than the %d acknowledged before it began", len(held), 10000+len(before))
	}
	for _, k := range before {
		if held[k.owner] != k.value {
			t.Errorf("acknowledged %s → %s before the backup began; the copy has %q", k.owner, k.value, held[k.owner])
		}
	}
	if v, err := models.VerifySQLiteFile(filepath.Join(dir, "restored.db")); err != nil || v != models.SchemaVersion() {
		t.Errorf("restored file: version %d, %v", v, err)
	}
}
