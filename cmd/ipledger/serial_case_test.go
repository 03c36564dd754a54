package main

import (
	"strings"
	"testing"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// An older database whose ExpectedMachines declare one DPU serial in two
// cases migrates: `migrate` names the serial, both spellings and their
// ExpectedMachines, and `check` fails naming it (rule declared_once) until
// one is removed.
func TestMigrateReportsSerialCaseDuplicates(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			dbURL := dbtest.NewURL(t, d)
			db, _, err := database.Open(dbURL)
			if err != nil {
				t.Fatal(err)
			}
			if s, e := db.DB(); e == nil {
				defer s.Close()
			}
			if err := models.MigrateTo(db, 30); err != nil {
				t.Fatal(err)
			}
			for i, x := range []struct{ id, mac, name, serial string }{
				{"em-a", "0a:00:00:00:50:01", "rack5-u01", "MT5002X00001"},
				{"em-b", "0a:00:00:00:50:02", "rack5-u02", "mt5002x00001"},
			} {
				if err := db.Exec(`INSERT INTO expected_machines (id, bmc_mac_address, chassis_serial_number, fallback_dpu_serial_numbers,
					metadata_name, metadata_labels, version, created_at, updated_at) VALUES (?, ?, '', '[]', ?, '[]', 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`,
					x.id, x.mac, x.name).Error; err != nil {
					t.Fatal(err)
				}
				if err := db.Exec(`INSERT INTO expected_dpus (expected_machine_id, position, serial_number) VALUES (?, ?, ?)`, x.id, i, x.serial).Error; err != nil {
					t.Fatal(err)
				}
			}
			out, err := runCmd(t, "migrate", "--database", dbURL)
			want := "DPU serial number MT5002X00001 is declared in several cases: MT5002X00001 by ExpectedMachine rack5-u01 (0a:00:00:00:50:01), " +
				"mt5002x00001 by ExpectedMachine rack5-u02 (0a:00:00:00:50:02)"
			if err != nil || !strings.Contains(out, want) {
				t.Fatalf("migrate: %v\n%s\nwant a line saying %q", err, out, want)
			}
			out, err = runCmd(t, "check", "--database", dbURL)
			if err == nil || !strings.Contains(out, "declared_once") || !strings.Contains(strings.ToLower(out), "mt5002x00001 is declared for 2 dpus") {
				t.Fatalf("check: %v\n%s", err, out)
			}
			if err := db.Exec(`DELETE FROM expected_dpus WHERE serial_number = 'mt5002x00001'`).Error; err != nil {
				t.Fatal(err)
			}
			if out, err := runCmd(t, "check", "--database", dbURL); err != nil {
				t.Fatalf("check once the duplicate is gone: %v\n%s", err, out)
			}
		})
	}
}
