package console

import (
	"strings"
	"testing"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// TestHostsByNameUsesIndexes: the sort name's ExpectedMachine look-up
// (migration 23's triggers) searches the LOWER(bmc_mac_address) index on
// SQLite, not every ExpectedMachine (a 1,000-host site's host list took
// 1.2 s when its join scanned them).
func TestHostsByNameUsesIndexes(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, models.SQLite)
	plan := func(q string, args ...any) string {
		t.Helper()
		var rows []struct {
			ID, Parent, Notused int
			Detail              string
		}
		if err := db.Raw("EXPLAIN QUERY PLAN "+q, args...).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, r := range rows {
			lines = append(lines, r.Detail)
		}
		return strings.Join(lines, "\n")
	}
	name := plan(`SELECT MIN(em.metadata_name) FROM expected_machines em WHERE LOWER(em.bmc_mac_address) = LOWER(?)`, "0a:00:00:00:00:01")
	if !strings.Contains(name, "expected_machines_bmc_mac_lower (<expr>=?)") {
		t.Errorf("the sort name's ExpectedMachine look-up does not search expected_machines_bmc_mac_lower; plan:\n%s", name)
	}
}
