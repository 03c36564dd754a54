package dbcheck

import (
	"regexp"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// The cases of TestCheckNamesEachBrokenRule for the unique keys and the
// catalog: each drops the index (or constraint, or trigger) in the way,
// then stores what it refused.
func uniqueCheckCases() []checkCase {
	return []checkCase{
		{rule: "constraints", want: "index allocations_run_end on allocations is missing", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, "DROP INDEX allocations_run_end")
		}},
		// A serial no machine carries: the triggers that rebind a machine
		// to its declaration look it up by serial.
		{rule: "declared_once", want: "serial number MT7 is declared for 2 DPUs", corrupt: func(t *testing.T, db *gorm.DB) {
			dropUnique(t, db, "expected_dpus", "expected_dpus_serial_key")
			// SQLite's rebuild of the table took its indexes with it.
			execAll(t, db, onDialect(db, []string{"DROP INDEX expected_dpus_serial_folded_key"}, nil)...)
			for _, n := range []string{"1000", "2000"} {
				dupRow(t, db, "expected_dpus", "serial_number = 'MT1'", "id = id + "+n+", position = 7, serial_number = 'MT7', loopback_ip = NULL, loopback_ip_key = NULL")
			}
		}},
		// A serial declared again in another case (as migration 32 keeps
		// those it finds), named in either spelling (the smaller one in
		// the database's collation).
		{rule: "declared_once", want: "1 is declared for 2 DPUs", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, "DROP INDEX expected_dpus_serial_folded_key")
			dupRow(t, db, "expected_dpus", "serial_number = 'MT1'", "id = id + 1000, position = 7, serial_number = 'mt1', loopback_ip = NULL, loopback_ip_key = NULL")
		}},
		{rule: "declared_once", want: "loopback 10.0.0.100 is declared for 2 DPUs", corrupt: func(t *testing.T, db *gorm.DB) {
			dropUnique(t, db, "expected_dpus", "expected_dpus_loopback_ip_key")
			dropUnique(t, db, "expected_dpus", "expected_dpus_v4_key_unique")
			dupRow(t, db, "expected_dpus", "serial_number = 'MT1'", "id = id + 1000, position = 7, serial_number = 'MT9'")
		}},
		{rule: "carried_once", want: "serial number MT1 is carried by 2 machines", corrupt: func(t *testing.T, db *gorm.DB) {
			dropUnique(t, db, "machines", "machines_serial_key")
			execAll(t, db, "UPDATE machines SET serial_number = 'MT1' WHERE serial_number = 'MT2'")
		}},
		{rule: "carried_once", want: "loopback 10.0.0.100 is carried by 2 DPUs", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, "DROP INDEX network_configs_loopback_ip_key",
				"UPDATE network_configs SET loopback_ip = '10.0.0.100' WHERE machine_id = (SELECT machine_id FROM machines WHERE serial_number = 'MT2')")
		}},
		{rule: "bmc_macs", want: "BMC MAC 1a:1b:1c:1d:1e:01 is carried by 2 machines", corrupt: func(t *testing.T, db *gorm.DB) {
			dropUnique(t, db, "machines", "machines_bmc_mac_key")
			execAll(t, db, "UPDATE machines SET bmc_mac_address = '1a:1b:1c:1d:1e:01' WHERE serial_number = 'MT2'")
		}},
		{rule: "bmc_macs", want: `BMC MAC "1A:1B:1C:1D:1E:01" is not in the canonical form`, corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, onDialect(db,
				[]string{"ALTER TABLE machines DROP CONSTRAINT machines_bmc_mac_canonical"},
				[]string{"DROP TRIGGER machines_bmc_mac_canonical_update"})...)
			execAll(t, db, "UPDATE machines SET bmc_mac_address = '1A:1B:1C:1D:1E:01' WHERE bmc_mac_address = '1a:1b:1c:1d:1e:01'")
		}},
		// A second spelling of an ExpectedMachine's MAC, past its canonical
		// constraint (the unique key compares the text): the recount
		// compares them in any case, and names the spelling.
		{rule: "bmc_macs", want: "is declared by 2 ExpectedMachines", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, onDialect(db,
				[]string{"ALTER TABLE expected_machines DROP CONSTRAINT expected_machines_bmc_mac_canonical"},
				[]string{"DROP TRIGGER expected_machines_bmc_mac_canonical_insert"})...)
			dupRow(t, db, "expected_machines", "bmc_mac_address = '1a:1b:1c:1d:1e:01'", "id = 'em-dup', bmc_mac_address = UPPER(bmc_mac_address)")
		}},
		{rule: "bmc_macs", want: `ExpectedMachine em-dup: BMC MAC "1A:1B:1C:1D:1E:01" is not in the canonical form`, corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, onDialect(db,
				[]string{"ALTER TABLE expected_machines DROP CONSTRAINT expected_machines_bmc_mac_canonical"},
				[]string{"DROP TRIGGER expected_machines_bmc_mac_canonical_insert"})...)
			dupRow(t, db, "expected_machines", "bmc_mac_address = '1a:1b:1c:1d:1e:01'", "id = 'em-dup', bmc_mac_address = UPPER(bmc_mac_address)")
		}},
		{rule: "token_names", want: `token name "ops" is given to 2 tokens`, corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, "DROP INDEX api_tokens_name_key",
				`INSERT INTO api_tokens (name, role, token_hash, created_at) VALUES
				('ops', 'viewer', 'hash-1', CURRENT_TIMESTAMP), ('ops', 'admin', 'hash-2', CURRENT_TIMESTAMP)`)
		}},
		{rule: "queued_once", want: "is queued 2 times for webhook sink", corrupt: func(t *testing.T, db *gorm.DB) {
			dropUnique(t, db, "webhook_deliveries", "webhook_deliveries_event_key")
			dupRow(t, db, "webhook_deliveries", "id = (SELECT MIN(id) FROM webhook_deliveries)", "id = id + 100000, delivery_id = delivery_id || '-dup'")
		}},
	}
}

// dupRow stores a copy of the row of table that where selects, changed by
// set, column for column.
func dupRow(t *testing.T, db *gorm.DB, table, where, set string) {
	t.Helper()
	execAll(t, db, "CREATE TEMP TABLE dup_row AS SELECT * FROM "+table+" WHERE "+where,
		"UPDATE dup_row SET "+set, "INSERT INTO "+table+" SELECT * FROM dup_row", "DROP TABLE dup_row")
}

// dropUnique drops the named UNIQUE constraint of a table's definition:
// on SQLite, which cannot drop one, by rebuilding the table without it
// (its indexes and triggers go with the old table).
func dropUnique(t *testing.T, db *gorm.DB, table, constraint string) {
	t.Helper()
	if models.DialectOf(db) == models.Postgres {
		execAll(t, db, "ALTER TABLE "+table+" DROP CONSTRAINT "+constraint)
		return
	}
	var def string
	if err := db.Raw(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&def).Error; err != nil {
		t.Fatal(err)
	}
	loose := regexp.MustCompile(`,\s*CONSTRAINT\s+`+constraint+`\s+UNIQUE\s*\([^)]*\)`).ReplaceAllString(def, "")
	// A table SQLite renamed is named in quotes.
	head := regexp.MustCompile(`^CREATE TABLE "?` + table + `"? \(`)
	if loose == def || !head.MatchString(loose) {
		t.Fatalf("no UNIQUE constraint %s in %s", constraint, def)
	}
	loose = head.ReplaceAllString(loose, "CREATE TABLE "+table+"_loose (")
	execAll(t, db, "PRAGMA foreign_keys = OFF", "PRAGMA legacy_alter_table = ON", loose,
		"INSERT INTO "+table+"_loose SELECT * FROM "+table, "DROP TABLE "+table,
		"ALTER TABLE "+table+"_loose RENAME TO "+table, "PRAGMA legacy_alter_table = OFF", "PRAGMA foreign_keys = ON")
}

// The catalog rule names each kind of object by its name and table, and
// only what is missing.
func TestCheckConstraintsNamesEachMissingObject(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		t.Parallel()
		if res := runCheck(t, db); !res.OK() {
			t.Fatalf("a fresh database fails the check: %+v", res.Findings)
		}
		execAll(t, db, "DROP INDEX audit_events_at")
		execAll(t, db, onDialect(db,
			[]string{"DROP TRIGGER api_tokens_not_marked ON api_tokens"},
			[]string{"DROP TRIGGER api_tokens_not_marked_insert"})...)
		dropUnique(t, db, "webhooks", "webhooks_name_key")
		want := []string{
			"index audit_events_at on audit_events is missing",
			"constraint webhooks_name_key on webhooks is missing",
			onDialect(db, []string{"trigger api_tokens_not_marked on api_tokens is missing"},
				[]string{"trigger api_tokens_not_marked_insert on api_tokens is missing"})[0],
		}
		if models.DialectOf(db) == models.Postgres {
			want = append(want, "index webhooks_name_key on webhooks is missing")
		} else {
			want = append(want, "index sqlite_autoindex_webhooks_1 on webhooks is missing")
		}
		res := runCheck(t, db)
		var got []string
		for _, f := range res.Findings {
			if f.Rule != "constraints" {
				t.Errorf("finding of %s: %s", f.Rule, f.Message)
				continue
			}
			got = append(got, f.Message)
		}
		if len(got) != len(want) {
			t.Errorf("%d findings of constraints, want %d: %q", len(got), len(want), got)
		}
		for _, w := range want {
			found := false
			for _, g := range got {
				found = found || strings.HasPrefix(g, w)
			}
			if !found {
				t.Errorf("no finding says %q: %q", w, got)
			}
		}
	})
}
