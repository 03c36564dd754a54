package models_test

import (
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
)

// A machine's BMC MAC (a host's or a DPU's) is stored only in the
// canonical spelling, and one BMC MAC belongs to one machine whatever its
// kind: the database refuses both without the allocator, on insert and
// on update.
func TestMachineBMCMACConstraints(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ins := `INSERT INTO machines (machine_id, kind, host_machine_id, state, bmc_mac_address, serial_number, created_at, updated_at)
			VALUES (?, ?, ?, 'ready', ?, ?, ?, ?)`
		host := func(id, mac string) error { return db.Exec(ins, id, "host", nil, mac, nil, t0, t0).Error }
		dpu := func(id string, mac any, serial string) error {
			return db.Exec(ins, id, "dpu", "h1", mac, serial, t0, t0).Error
		}
		must(t, host("h1", "0a:00:00:00:00:01"))
		must(t, dpu("d1", "1a:00:00:00:00:01", "S1"))
		must(t, dpu("d2", nil, "S2")) // a DPU without a BMC MAC
		must(t, dpu("d3", nil, "S3")) // NULLs never collide
		for _, bad := range []string{"1A:00:00:00:00:02", "1a-00-00-00-00-02", "1a00.0000.0002", "1a:00:00:00:00:0g", "1a:00:00:00:00:02:03", ""} {
			if err := dpu("dx", bad, "SX"); err == nil || !database.IsConstraintViolation(err) {
				t.Errorf("DPU BMC MAC %q: %v, want a constraint violation", bad, err)
			}
			if bad == "" {
				continue
			}
			err := db.Exec(`UPDATE machines SET bmc_mac_address = ? WHERE machine_id = 'd2'`, bad).Error
			if err == nil || !database.IsConstraintViolation(err) {
				t.Errorf("update to %q: %v, want a constraint violation", bad, err)
			}
		}
		// One BMC MAC, one machine: DPU after host, DPU after DPU, host after DPU.
		for name, err := range map[string]error{
			"dpu taking a host's":     dpu("dx", "0a:00:00:00:00:01", "SX"),
			"dpu taking a dpu's":      dpu("dx", "1a:00:00:00:00:01", "SX"),
			"host taking a dpu's":     host("hx", "1a:00:00:00:00:01"),
			"dpu updated to a host's": db.Exec(`UPDATE machines SET bmc_mac_address = '0a:00:00:00:00:01' WHERE machine_id = 'd2'`).Error,
		} {
			if err == nil || !database.IsUniqueViolation(err) {
				t.Errorf("%s: %v, want a unique violation", name, err)
			}
		}
		var n int64
		must(t, db.Raw(`SELECT COUNT(*) FROM machines`).Scan(&n).Error)
		if n != 4 {
			t.Fatalf("%d machines, want 4", n)
		}
		var macs []string
		must(t, db.Raw(`SELECT bmc_mac_address FROM machines WHERE bmc_mac_address IS NOT NULL ORDER BY machine_id`).Scan(&macs).Error)
		if len(macs) != 2 || macs[0] != "1a:00:00:00:00:01" || macs[1] != "0a:00:00:00:00:01" {
			t.Fatalf("stored BMC MACs %v", macs)
		}
	})
}
