package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/web"
)

// TestOwnerNamesCLI: `ipledger address` and `ipledger pool allocations`
// show a machine owner by the name operators know (the DPU's serial and
// its host's ExpectedMachine name, a deleted DPU as deleted) beside its
// type/id, and a decommissioned host that reports again is refused naming
// the host, not its machine_id alone; on both databases.
func TestOwnerNamesCLI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := audit.WithActor(context.Background(), "test:cli", "")
		a := allocator.New(db, allocator.Options{})
		au := auth.New(a.DB(), auth.Options{})
		const tok = "cli-owner-names-admin"
		if _, err := au.EnsureAdminToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreatePool(ctx, allocator.PoolSpec{Name: "lo-ip", Type: "ipv4", Ranges: []allocator.RangeSpec{{First: "10.1.0.1", Last: "10.1.0.50"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreateExpectedMachine(ctx, allocator.ExpectedMachineSpec{BmcMacAddress: "0a:00:00:00:07:01",
			ChassisSerialNumber: "CH-7001", Metadata: &allocator.Metadata{Name: "rack7-u01"}}); err != nil {
			t.Fatal(err)
		}
		for _, r := range []allocator.ReportSpec{
			{BmcMacAddress: "0a:00:00:00:07:01", ChassisSerialNumber: "CH-7001", DPUs: []allocator.ReportDPU{{SerialNumber: "MT7001X00001"}}},
			{BmcMacAddress: "0a:00:00:00:07:02", ChassisSerialNumber: "CH-7002", DPUs: []allocator.ReportDPU{{SerialNumber: "MT7002X00001"}}},
		} {
			if _, err := a.Report(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.DeleteMachine(ctx, allocator.HostMachineID("0a:00:00:00:07:02"), true); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(web.New(web.Config{Allocator: a, Auth: au, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
		defer srv.Close()

		out, err := runCLI(t, srv.URL, tok, "", "address", "10.1.0.1")
		if err != nil || !strings.Contains(out, "DPU MT7001X00001 of host rack7-u01 (machine/"+allocator.DPUMachineID("MT7001X00001")+")") {
			t.Errorf("ipledger address 10.1.0.1: %v\n%s\nwant the owner named DPU MT7001X00001 of host rack7-u01 beside its id", err, out)
		}
		out, err = runCLI(t, srv.URL, tok, "", "pool", "allocations", "lo-ip")
		if err != nil || !strings.Contains(out, "DPU MT7001X00001 of host rack7-u01") || !strings.Contains(out, "DPU MT7002X00001 (deleted)") {
			t.Errorf("ipledger pool allocations lo-ip: %v\n%s\nwant the owner and the quarantined value's former owner by name", err, out)
		}

		host := allocator.HostMachineID("0a:00:00:00:07:01")
		if _, err := a.Decommission(ctx, host); err != nil {
			t.Fatal(err)
		}
		_, err = a.Report(ctx, allocator.ReportSpec{BmcMacAddress: "0a:00:00:00:07:01", ChassisSerialNumber: "CH-7001", DPUs: []allocator.ReportDPU{{SerialNumber: "MT7001X00001"}}})
		if err == nil || !strings.Contains(err.Error(), "host rack7-u01 ("+host+")") {
			t.Errorf("a decommissioned host reporting again: %v; want the 409 to name host rack7-u01 with its machine_id", err)
		}
	})
}
