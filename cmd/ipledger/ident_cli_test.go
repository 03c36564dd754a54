package main

import (
	"strings"
	"testing"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit/serverkit"
	"github.com/ipledger/ipledger/internal/testkit/sitekit"
	"github.com/ipledger/ipledger/models"
)

// TestCLIMixedSeparatorMAC: the CLI door of the one MAC rule
// (docs/decisions.md "One rule per identifier"). A BMC MAC written with
// both ':' and '-' is refused by `machine report` and `expected-machine
// add`, naming the field, and nothing is stored; with one separator both
// go through.
func TestCLIMixedSeparatorMAC(t *testing.T) {
	t.Parallel()
	s := serverkit.Start(t, dbtest.Open(t, models.SQLite), serverkit.Options{})
	s.Pool("lo-ip", "ipv4", 0, sitekit.Range("10.1.0.1", "10.1.0.50", true))
	db, srv, tok := s.DB, s.HTTP, s.Admin

	const mixed = "02-00:00:00:00:01"
	for _, args := range [][]string{
		{"machine", "report", "--bmc-mac", mixed, "--dpu", "SN-MIX"},
		{"expected-machine", "add", "--bmc-mac", mixed},
	} {
		_, err := runCLI(t, srv.URL, tok, "", args...)
		if err == nil || !strings.Contains(err.Error(), "bmc_mac_address") || !strings.Contains(err.Error(), mixed) {
			t.Errorf("%s: %v, want an error naming bmc_mac_address and %s", strings.Join(args, " "), err, mixed)
		}
	}
	var n int64
	db.Model(&models.Machine{}).Count(&n)
	var m int64
	db.Model(&models.ExpectedMachine{}).Count(&m)
	if n != 0 || m != 0 {
		t.Fatalf("refused commands stored %d machines, %d ExpectedMachines", n, m)
	}
	if out, err := runCLI(t, srv.URL, tok, "", "machine", "report", "--bmc-mac", "02-00-00-00-00-01", "--dpu", "SN-MIX"); err != nil {
		t.Fatalf("report with one separator: %v\n%s", err, out)
	}
	if out, err := runCLI(t, srv.URL, tok, "", "expected-machine", "add", "--bmc-mac", "02:00:00:00:00:01"); err != nil {
		t.Fatalf("add with one separator: %v\n%s", err, out)
	}
}
