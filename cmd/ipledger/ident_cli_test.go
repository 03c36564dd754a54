package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/models/dbtest"
	"github.com/ipledger/ipledger/web"
)

// TestCLIMixedSeparatorMAC: the CLI door of the one MAC rule
// (docs/decisions.md "One rule per identifier"). A BMC MAC written with
// both ':' and '-' is refused by `machine report` and `expected-machine
// add`, naming the field, and nothing is stored; with one separator both
// go through.
func TestCLIMixedSeparatorMAC(t *testing.T) {
	db := dbtest.Open(t, models.SQLite)
	a := allocator.New(db, allocator.Options{})
	ctx := context.Background()
	const tok = "cli-ident-admin-token-0001"
	if _, err := auth.New(a.DB(), auth.Options{}).EnsureAdminToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePool(ctx, allocator.PoolSpec{Name: "lo-ip", Type: "ipv4", Ranges: []allocator.RangeSpec{{First: "10.1.0.1", Last: "10.1.0.50"}}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web.New(web.Config{Allocator: a, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	defer srv.Close()

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
