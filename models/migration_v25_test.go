package models_test

import (
	"fmt"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/models"
)

// The database refuses, without ipledger, a host name, chassis serial
// number or SKU holding any character of the visible-text rule (the first
// and last of each of ident.InvisibleRanges), on insert and on update, and
// takes names in any script.
func TestVisibleTextConstraint(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		var bad []rune
		for _, rg := range ident.InvisibleRanges {
			bad = append(bad, rg[0], rg[1])
		}
		em := func(id, name, chassis string, sku any) error {
			return db.Exec(`INSERT INTO expected_machines (id, bmc_mac_address, chassis_serial_number, fallback_dpu_serial_numbers,
metadata_name, metadata_labels, sku_id, version, created_at, updated_at) VALUES (?, ?, ?, '[]', ?, '[]', ?, 1, ?, ?)`,
				id, fmt.Sprintf("02:00:00:%02x:%02x:%02x", len(id), id[len(id)-1], len(name)), chassis, name, sku, t0, t0).Error
		}
		host := func(id, chassis string) error {
			return db.Exec(`INSERT INTO machines (machine_id, kind, state, chassis_serial_number, created_at, updated_at)
VALUES (?, 'host', 'ready', ?, ?, ?)`, id, chassis, t0, t0).Error
		}
		must(t, em("em-ok", "Rack 7 · Ünit 10 — 机架", "CHS-1", "SKU-1"))
		must(t, host("host-ok", "CHS-1"))
		refused := func(what string, r rune, err error) {
			t.Helper()
			if err == nil || !database.IsConstraintViolation(err) {
				t.Errorf("%s with U+%04X: %v, want a constraint violation", what, r, err)
			}
		}
		for i, r := range bad {
			if r == 0 && models.DialectOf(db) == models.Postgres {
				continue // PostgreSQL text cannot hold NUL at all
			}
			s := "r01" + string(r) + "u10"
			id := fmt.Sprint("em-", i)
			refused("metadata_name", r, em(id, s, "", nil))
			refused("chassis_serial_number", r, em(id, "", s, nil))
			refused("sku_id", r, em(id, "", "", s))
			refused("metadata_name update", r, db.Exec(`UPDATE expected_machines SET metadata_name = ? WHERE id = 'em-ok'`, s).Error)
			refused("sku_id update", r, db.Exec(`UPDATE expected_machines SET sku_id = ? WHERE id = 'em-ok'`, s).Error)
			refused("machines.chassis_serial_number", r, host(fmt.Sprint("host-", i), s))
			refused("machines.chassis_serial_number update", r, db.Exec(`UPDATE machines SET chassis_serial_number = ? WHERE machine_id = 'host-ok'`, s).Error)
		}
		var n int64
		must(t, db.Raw(`SELECT COUNT(*) FROM expected_machines`).Scan(&n).Error)
		if n != 1 {
			t.Fatalf("%d expected machines stored, want 1", n)
		}
	})
}
