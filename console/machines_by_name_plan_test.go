package console

import (
	"strings"
	"testing"

	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/models/dbtest"
)

// TestHostsByNameJoinUsesIndex: the host list joins each host's
// ExpectedMachine through the LOWER(bmc_mac_address) index on SQLite,
// not by scanning every ExpectedMachine for every host (a 1,000-host
// site's first page took 1.2 s that way).
func TestHostsByNameJoinUsesIndex(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, models.SQLite)
	var plan []struct {
		ID, Parent, Notused int
		Detail              string
	}
	q := "EXPLAIN QUERY PLAN SELECT m.machine_id FROM machines AS m " + hostEMJoin + " WHERE m.kind = 'host' AND m.host_machine_id IS NULL"
	if err := db.Raw(q).Scan(&plan).Error; err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, p := range plan {
		lines = append(lines, p.Detail)
	}
	got := strings.Join(lines, "\n")
	if !strings.Contains(got, "expected_machines_bmc_mac_lower (<expr>=?)") {
		t.Errorf("the host list's ExpectedMachine join does not search expected_machines_bmc_mac_lower; plan:\n%s", got)
	}
}
