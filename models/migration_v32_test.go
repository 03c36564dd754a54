package models_test

import (
	"fmt"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

const insertDPU = `INSERT INTO expected_dpus (expected_machine_id, position, serial_number) VALUES (?, ?, ?)`

// seedEMs inserts n ExpectedMachines em-0 … em-(n-1) around the allocator.
func seedEMs(t *testing.T, db *gorm.DB, n int) {
	t.Helper()
	for i := range n {
		must(t, db.Exec(insertEM, fmt.Sprint("em-", i), fmt.Sprintf("0a:00:00:00:00:%02x", i), t0, t0).Error)
	}
}

// A DPU serial is declared once whatever its case: the database refuses a
// second declaration in another case without the allocator, on insert
// and on update, and accepts other serials.
func TestExpectedDPUSerialOnceInAnyCase(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		seedEMs(t, db, 2)
		must(t, db.Exec(insertDPU, "em-0", 0, "MT5002X00001").Error)
		for _, twin := range []string{"mt5002x00001", "Mt5002X00001", "MT5002x00001"} {
			wantViolation(t, "insert "+twin, db.Exec(insertDPU, "em-1", 0, twin).Error)
		}
		must(t, db.Exec(insertDPU, "em-1", 0, "MT5002X00002").Error)
		wantViolation(t, "update to a twin", db.Exec(`UPDATE expected_dpus SET serial_number = 'mt5002x00001' WHERE serial_number = 'MT5002X00002'`).Error)
		wantViolation(t, "marking a row", db.Exec(`UPDATE expected_dpus SET serial_case_duplicate = TRUE WHERE serial_number = 'MT5002X00002'`).Error)
		wantViolation(t, "a new marked row", db.Exec(`INSERT INTO expected_dpus (expected_machine_id, position, serial_number, serial_case_duplicate)
			VALUES ('em-1', 1, 'mt5002x00001', TRUE)`).Error)
		must(t, db.Exec(`UPDATE expected_dpus SET serial_number = 'MT5002X00003' WHERE serial_number = 'MT5002X00002'`).Error)
		var n int64
		must(t, db.Raw(`SELECT COUNT(*) FROM expected_dpus`).Scan(&n).Error)
		if n != 2 {
			t.Fatalf("%d expected DPUs stored, want 2", n)
		}
	})
}

// Writers that bypass the allocator, on several handles at once (several
// server processes), each declaring the same serial in another case:
// exactly one commits, the others are refused as constraint violations.
func TestExpectedDPUSerialOnceConcurrently(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			spellings := []string{"MT5002X00001", "mt5002x00001", "Mt5002X00001", "mT5002x00001", "MT5002x00001", "mt5002X00001"}
			dbs := dbtest.Handles(t, dbtest.NewURL(t, d), len(spellings))
			seedEMs(t, dbs[0], len(spellings))
			start := make(chan struct{})
			errs := make([]error, len(spellings))
			var wg sync.WaitGroup
			for i, serial := range spellings {
				wg.Go(func() {
					<-start
					errs[i] = dbs[i].Exec(insertDPU, fmt.Sprint("em-", i), 0, serial).Error
				})
			}
			close(start)
			wg.Wait()
			ok := 0
			for i, err := range errs {
				switch {
				case err == nil:
					ok++
				case !database.IsConstraintViolation(err):
					t.Errorf("%s: %v, want a constraint violation", spellings[i], err)
				}
			}
			var n int64
			must(t, dbs[0].Raw(`SELECT COUNT(*) FROM expected_dpus`).Scan(&n).Error)
			if ok != 1 || n != 1 {
				t.Fatalf("%d writers committed, %d rows stored; want exactly one of each (errors %v)", ok, n, errs)
			}
		})
	}
}

// A database whose ExpectedMachines already declare serials differing
// only in case migrates: nothing is deleted, every row but the oldest of
// each serial is marked, the marked rows keep their serials, and no new
// row may take such a serial in any case — not even once the oldest row
// is gone.
func TestMigration32KeepsCaseDuplicateSerials(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := openAt(t, d, 30)
			seedEMs(t, db, 3)
			for i, serial := range []string{"MT5002X00001", "mt5002x00001", "OTHER-1", "Mt5002x00001"} {
				must(t, db.Exec(insertDPU, fmt.Sprint("em-", i%3), i, serial).Error)
			}

			must(t, models.Migrate(db))

			var rows []struct {
				SerialNumber        string
				SerialCaseDuplicate bool
			}
			must(t, db.Raw(`SELECT serial_number, serial_case_duplicate FROM expected_dpus ORDER BY id`).Scan(&rows).Error)
			want := fmt.Sprint([]any{"MT5002X00001", false, "mt5002x00001", true, "OTHER-1", false, "Mt5002x00001", true})
			var got []any
			for _, r := range rows {
				got = append(got, r.SerialNumber, r.SerialCaseDuplicate)
			}
			if fmt.Sprint(got) != want {
				t.Fatalf("rows after migrating %v, want %v", got, want)
			}
			wantViolation(t, "a new twin", db.Exec(insertDPU, "em-2", 9, "MT5002X00001").Error)
			wantViolation(t, "a marked row takes another serial", db.Exec(`UPDATE expected_dpus SET serial_number = 'MT5002X00009' WHERE serial_number = 'mt5002x00001'`).Error)
			must(t, db.Exec(`DELETE FROM expected_dpus WHERE serial_number = 'MT5002X00001'`).Error)
			wantViolation(t, "a twin of a kept row once the oldest is gone", db.Exec(insertDPU, "em-2", 9, "MT5002X00001").Error)
			wantViolation(t, "unmarking one of two kept twins", db.Exec(`UPDATE expected_dpus SET serial_case_duplicate = FALSE WHERE serial_number = 'mt5002x00001'`).Error)
			// Once the kept rows are removed, the serial may be declared
			// again, once.
			must(t, db.Exec(`DELETE FROM expected_dpus WHERE serial_number IN ('mt5002x00001', 'Mt5002x00001')`).Error)
			must(t, db.Exec(insertDPU, "em-2", 9, "mt5002x00001").Error)
			wantViolation(t, "a twin of the new declaration", db.Exec(insertDPU, "em-1", 9, "MT5002X00001").Error)
		})
	}
}
