package txn_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// A write the database refuses for lack of space is 503 unavailable (not
// 500), saying so; it marks the handle's storage full, and the storage is
// fine again by itself once space returns (the watch's probe commits).
// SQLite meets the end of its file (PRAGMA max_page_count stands for the
// end of the disk); PostgreSQL answers disk_full (53100) from a trigger,
// as it does when a table cannot be extended.
func TestWriteRefusedForSpaceIs503(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		var fill, free func()
		if models.DialectOf(db) == models.SQLite {
			s, err := db.DB()
			if err != nil {
				t.Fatal(err)
			}
			s.SetMaxOpenConns(1) // the page cap is the connection's
			var pages int64
			if err := db.Raw(`PRAGMA page_count`).Scan(&pages).Error; err != nil {
				t.Fatal(err)
			}
			fill = func() { mustExec(t, db, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+2)) }
			free = func() { mustExec(t, db, `PRAGMA max_page_count = 1000000`) }
		} else {
			mustExec(t, db, `CREATE FUNCTION refuse_for_space() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`)
			fill = func() {
				mustExec(t, db, `CREATE TRIGGER refuse_for_space BEFORE INSERT ON filler FOR EACH ROW EXECUTE FUNCTION refuse_for_space()`)
			}
			free = func() { mustExec(t, db, `DROP TRIGGER refuse_for_space ON filler`) }
		}
		mustExec(t, db, `CREATE TABLE filler (v TEXT)`)
		fill()
		w := database.StorageWatchOf(db)
		var err error
		for i := 0; i < 1000 && err == nil; i++ {
			err = txn.Write(context.Background(), db, txn.WriteOptions{Now: time.Now()}, func(t *txn.Tx) error {
				return t.Exec(`INSERT INTO filler (v) VALUES (?)`, strings.Repeat("x", 3000)).Error
			})
		}
		e, ok := fault.AsError(err)
		if !ok || e.Code != fault.CodeUnavailable || e.Code.Status() != http.StatusServiceUnavailable || !strings.Contains(e.Message, "storage is full") {
			t.Fatalf("a write refused for space: %v (%T), want 503 unavailable naming the storage", err, err)
		}
		if full, _ := w.Full(); !full || w.RefusedWrites() != 1 {
			t.Fatalf("after the refusal: full %v, %d refused writes, want true and 1", full, w.RefusedWrites())
		}
		free()
		testkit.WaitFor(t, 2*time.Minute, func() bool {
			full, _ := w.Full()
			return !full
		}, "the storage to take writes again by itself")
		if err := txn.Write(context.Background(), db, txn.WriteOptions{Now: time.Now()}, func(t *txn.Tx) error {
			return t.Exec(`INSERT INTO filler (v) VALUES ('after')`).Error
		}); err != nil {
			t.Errorf("a write once space returned: %v", err)
		}
	})
}

func mustExec(t *testing.T, db *gorm.DB, sql string) {
	t.Helper()
	if err := db.Exec(sql).Error; err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
