package models_test

import (
	"fmt"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

const insertEM = `INSERT INTO expected_machines (id, bmc_mac_address, chassis_serial_number, fallback_dpu_serial_numbers,
metadata_name, metadata_labels, version, created_at, updated_at) VALUES (?, ?, '', '[]', '', '[]', 1, ?, ?)`

// An ExpectedMachine's BMC MAC is stored only in the canonical spelling:
// the database refuses any other without the allocator, on insert and on
// update.
func TestExpectedMachineBMCMACCanonical(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		must(t, db.Exec(insertEM, "em-ok", "0a:1b:2c:3d:4e:5f", t0, t0).Error)
		for i, bad := range []string{"0A:1B:2C:3D:4E:60", "0a-1b-2c-3d-4e-60", "0a1b.2c3d.4e60", "0a1b2c3d4e60",
			"0a:1b:2c:3d:4e:6g", "0a:1b:2c:3d:4e:60:61", " 0a:1b:2c:3d:4e:60", "0a:1b:2c:3d:4e:60 ", ""} {
			wantViolation(t, fmt.Sprintf("insert %q", bad), db.Exec(insertEM, fmt.Sprint("em-", i), bad, t0, t0).Error)
			wantViolation(t, fmt.Sprintf("update to %q", bad), db.Exec(`UPDATE expected_machines SET bmc_mac_address = ? WHERE id = 'em-ok'`, bad).Error)
		}
		var macs []string
		must(t, db.Raw(`SELECT bmc_mac_address FROM expected_machines`).Scan(&macs).Error)
		if len(macs) != 1 || macs[0] != "0a:1b:2c:3d:4e:5f" {
			t.Fatalf("stored BMC MACs %q", macs)
		}
	})
}

// A database whose ExpectedMachines hold other spellings of BMC MACs
// migrates: a spelling ParseMAC reads becomes the canonical one, unless
// another row holds the same address; the rest are kept (and `ipledger
// check` names them), and every new write is held to the rule.
func TestMigration28CanonicalisesBMCMACs(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			db := openAt(t, d, 27)
			for id, mac := range map[string]string{
				"upper":   "0A:00:00:00:00:01",
				"dashes":  "0a-00-00-00-00-02",
				"both":    " 0A-00-00-00-00-03 ",
				"canon":   "0a:00:00:00:00:04",
				"twin-1":  "0A:00:00:00:00:05", // two spellings of one address
				"twin-2":  "0a-00-00-00-00-05",
				"clash":   "0A:00:00:00:00:04", // the address of "canon"
				"mixed":   "0a-00:00:00:00:06",
				"cisco":   "0a00.0000.0007",
				"garbage": "not a mac",
			} {
				must(t, db.Exec(insertEM, id, mac, t0, t0).Error)
			}

			must(t, models.Migrate(db))

			got := map[string]string{}
			var rows []struct{ ID, BmcMacAddress string }
			must(t, db.Raw(`SELECT id, bmc_mac_address FROM expected_machines`).Scan(&rows).Error)
			for _, r := range rows {
				got[r.ID] = r.BmcMacAddress
			}
			want := map[string]string{
				"upper": "0a:00:00:00:00:01", "dashes": "0a:00:00:00:00:02", "both": "0a:00:00:00:00:03",
				"canon": "0a:00:00:00:00:04", "twin-1": "0A:00:00:00:00:05", "twin-2": "0a-00-00-00-00-05",
				"clash": "0A:00:00:00:00:04", "mixed": "0a-00:00:00:00:06", "cisco": "0a00.0000.0007", "garbage": "not a mac",
			}
			for id, w := range want {
				if got[id] != w {
					t.Errorf("%s: BMC MAC %q after migrating, want %q", id, got[id], w)
				}
			}
			wantViolation(t, "a new non-canonical MAC", db.Exec(insertEM, "new", "0A:00:00:00:00:09", t0, t0).Error)
			wantViolation(t, "a kept row updated to another bad one", db.Exec(`UPDATE expected_machines SET bmc_mac_address = '0a-00-00-00-00-08' WHERE id = 'garbage'`).Error)
			must(t, db.Exec(`UPDATE expected_machines SET bmc_mac_address = '0a:00:00:00:00:08' WHERE id = 'garbage'`).Error)
		})
	}
}

const insertUserSession = `INSERT INTO user_sessions (id, username, role, source, created_at, last_seen_at, expires_at)
VALUES (?, ?, 'viewer', 'oidc', 1, 1, 2)`

// sessionID is the n-th 64-character session id.
func sessionID(n int) string { return fmt.Sprintf("%064x", n) }

// A single sign-on session's user name obeys the rule of auth's checkName
// as far as SQL says it: the database refuses, without ipledger, a name
// over 128 bytes, with a blank at either end, with two spaces in a row or
// holding any refused character (the first and last of each of
// models.UsernameRefusedRanges), on insert and on update, and takes names
// in any script.
func TestUserSessionUsernameRule(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		okNames := []string{"alice", "Zoë Ångström", "机架 管理员", "o'brien@example.com", "a b c", strings.Repeat("x", 128), strings.Repeat("é", 64)}
		for i, name := range okNames {
			must(t, db.Exec(insertUserSession, sessionID(i), name).Error)
		}
		bad := []string{"", " alice", "alice ", "al  ice", strings.Repeat("x", 129),
			strings.Repeat("é", 65)} // 65 characters, 130 bytes
		for _, rg := range models.UsernameRefusedRanges {
			for _, r := range []rune{rg[0], rg[1]} {
				if r == 0 && models.DialectOf(db) == models.Postgres {
					continue // PostgreSQL text cannot hold NUL at all
				}
				bad = append(bad, "al"+string(r)+"ice")
			}
		}
		for i, name := range bad {
			wantViolation(t, fmt.Sprintf("user name %+q", name), db.Exec(insertUserSession, sessionID(100+i), name).Error)
			wantViolation(t, fmt.Sprintf("update to user name %+q", name), db.Exec(`UPDATE user_sessions SET username = ? WHERE id = ?`, name, sessionID(0)).Error)
		}
		var n int64
		must(t, db.Raw(`SELECT COUNT(*) FROM user_sessions`).Scan(&n).Error)
		if n != int64(len(okNames)) {
			t.Fatalf("%d sessions stored, want %d", n, len(okNames))
		}
	})
}

// Sessions whose user name breaks the rule, which ipledger cannot have
// opened, end when the database migrates; the others stay.
func TestMigration28EndsSessionsOfBadNames(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			db := openAt(t, d, 27)
			names := []string{"alice", "bob smith", "bad\u200bname", strings.Repeat("é", 65), " carol"}
			for i, name := range names {
				must(t, db.Exec(insertUserSession, sessionID(i), name).Error)
			}
			must(t, models.Migrate(db))
			var left []string
			must(t, db.Raw(`SELECT username FROM user_sessions ORDER BY id`).Scan(&left).Error)
			if len(left) != 2 || left[0] != "alice" || left[1] != "bob smith" {
				t.Fatalf("sessions left %q, want alice and bob smith", left)
			}
		})
	}
}
