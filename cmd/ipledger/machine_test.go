package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit/serverkit"
	"github.com/ipledger/ipledger/internal/testkit/sitekit"
	"github.com/ipledger/ipledger/models"
)

// TestDemoMachines: --demo builds a site whose DPU bindings show each
// status a healthy site can show, a host-less DPU, a decommissioned host
// and quarantined values of a force-deleted host.
func TestDemoMachines(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a := allocator.New(db, allocator.Options{})
		ctx := context.Background()
		if err := seedDemo(ctx, a, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
			t.Fatalf("demo: %v", err)
		}
		page, err := a.ListBindings(ctx, allocator.BindingFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		status := map[string]string{}
		seen := map[string]bool{}
		for _, b := range page.Items {
			status[b.SerialNumber] = b.StatusV4 + "/" + b.StatusV6
			seen[b.StatusV4], seen[b.StatusV6] = true, true
		}
		want := map[string]string{
			"MT2302X00011": "reserved/reserved",
			"MT2302X00012": "reserved/automatic",
			"MT2302X00021": "automatic/automatic",
			"MT2302X00031": "pending/automatic",
			"MT2302X00041": "conflict/automatic",
			"MT2302X00061": "automatic/automatic",
		}
		for s, w := range want {
			if status[s] != w {
				t.Errorf("%s binding %q; want %q (all: %v)", s, status[s], w, status)
			}
		}
		for _, st := range []string{"reserved", "automatic", "pending", "conflict"} {
			if !seen[st] {
				t.Errorf("no binding in status %s", st)
			}
		}
		m, err := a.GetMachine(ctx, "0a:00:00:00:02:15")
		if err != nil || m.State != allocator.StateDecommissioned {
			t.Fatalf("r02-u15 = %+v, %v", m, err)
		}
		lone, err := a.GetMachine(ctx, "MT2302X00061")
		if err != nil || lone.Kind != allocator.KindDPU || lone.HostMachineID != nil {
			t.Fatalf("host-less DPU = %+v, %v", lone, err)
		}
		q, err := a.ListAllocations(ctx, allocator.PoolLoopbackV4, allocator.AllocationFilter{State: "quarantined"})
		if err != nil || len(q.Items) != 1 || machTestDeref(q.Items[0].FormerOwnerID) != allocator.DPUMachineID("MT2302X00081") {
			t.Fatalf("quarantine = %+v, %v", q, err)
		}
		// Startup reconciliation leaves the demo as it is (conflicts stay).
		res, err := a.ReconcileLoopbacks(ctx)
		if err != nil || res.Completed != 0 || len(res.Incomplete) != 1 || res.Incomplete[0].Code != fault.CodeConflict {
			t.Fatalf("reconcile after demo = %+v, %v", res, err)
		}
	})
}

func machTestDeref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestMachineCLI(t *testing.T) {
	t.Parallel()
	s := serverkit.Start(t, dbtest.Open(t, models.SQLite), serverkit.Options{})
	s.Pool("lo-ip", "ipv4", 0, sitekit.Range("10.1.0.1", "10.1.0.50", true))
	a, ctx, srv, tok := s.A, s.Ctx, s.HTTP, s.Admin

	out, err := runCLI(t, srv.URL, tok, "", "machine", "report", "--bmc-mac", "0A-00-00-00-09-01", "--dpu", "SN1,SN2")
	if err != nil || !strings.Contains(out, "10.1.0.1") || !strings.Contains(out, "10.1.0.2") {
		t.Fatalf("report: %v\n%s", err, out)
	}
	out, err = runCLI(t, srv.URL, tok, "", "machine", "discover", "SN3")
	if err != nil || !strings.Contains(out, "10.1.0.3") {
		t.Fatalf("discover: %v\n%s", err, out)
	}
	out, err = runCLI(t, srv.URL, tok, "", "-o", "json", "binding", "list")
	var bl struct{ Items []allocator.Binding }
	if err != nil || json.Unmarshal([]byte(out), &bl) != nil || len(bl.Items) != 3 || bl.Items[0].StatusV6 != "none" {
		t.Fatalf("binding list: %v\n%s", err, out)
	}
	out, err = runCLI(t, srv.URL, tok, "", "machine", "list")
	if err != nil || strings.Count(out, "dpu") != 3 || !strings.Contains(out, "0a:00:00:00:09:01") {
		t.Fatalf("machine list: %v\n%s", err, out)
	}
	if _, err := runCLI(t, srv.URL, tok, "", "machine", "show", "SN1"); err != nil {
		t.Fatalf("machine show: %v", err)
	}
	// Delete without decommission: the API's 409 reaches the user.
	if _, err := runCLI(t, srv.URL, tok, "", "machine", "delete", "0a:00:00:00:09:01", "--yes"); err == nil || !strings.Contains(err.Error(), "conflict") {
		t.Fatalf("delete of a ready host: %v", err)
	}
	// Force delete asks for the machine id; a wrong answer deletes nothing.
	if _, err := runCLI(t, srv.URL, tok, "nope\n", "machine", "delete", "0a:00:00:00:09:01", "--force"); err == nil || !strings.Contains(err.Error(), "not confirmed") {
		t.Fatalf("unconfirmed force delete: %v", err)
	}
	if _, err := a.GetMachine(ctx, "0a:00:00:00:09:01"); err != nil {
		t.Fatalf("unconfirmed delete deleted: %v", err)
	}
	host := allocator.HostMachineID("0a:00:00:00:09:01")
	if _, err := runCLI(t, srv.URL, tok, host+"\n", "machine", "delete", "0a:00:00:00:09:01", "--force"); err != nil {
		t.Fatalf("confirmed force delete: %v", err)
	}
	q, _ := a.ListAllocations(ctx, "lo-ip", allocator.AllocationFilter{State: "quarantined"})
	if len(q.Items) != 2 {
		t.Fatalf("quarantined after force delete: %+v", q.Items)
	}
	// Decommission then delete with y.
	if _, err := runCLI(t, srv.URL, tok, "", "machine", "decommission", "SN3"); err != nil {
		t.Fatalf("decommission: %v", err)
	}
	if _, err := runCLI(t, srv.URL, tok, "y\n", "machine", "delete", "SN3"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := a.GetMachine(ctx, "SN3"); err == nil {
		t.Fatal("SN3 still there")
	}
}

// TestMachineCLIDPUBMCMAC: a report from the CLI carries a DPU's BMC MAC
// (any accepted spelling; the server normalizes it) and `machine show`
// prints it; a pair naming no reported DPU or a bad MAC sends nothing.
func TestMachineCLIDPUBMCMAC(t *testing.T) {
	t.Parallel()
	s := serverkit.Start(t, dbtest.Open(t, models.SQLite), serverkit.Options{})
	s.Pool("lo-ip", "ipv4", 0, sitekit.Range("10.1.0.1", "10.1.0.50", true))
	srv, tok := s.HTTP, s.Admin

	if _, err := runCLI(t, srv.URL, tok, "", "machine", "report", "--bmc-mac", "0a:00:00:00:09:01", "--dpu", "SN1",
		"--dpu-bmc-mac", "SN9=0A-00-00-00-09-99"); err == nil || !strings.Contains(err.Error(), "no --dpu SN9") {
		t.Fatalf("pair for an unreported DPU: %v", err)
	}
	if _, err := runCLI(t, srv.URL, tok, "", "machine", "report", "--bmc-mac", "0a:00:00:00:09:01", "--dpu", "SN1",
		"--dpu-bmc-mac", "SN1=0A-00:00-00-09-99"); err == nil || !strings.Contains(err.Error(), "dpus[0].bmc_mac_address") {
		t.Fatalf("mixed separators: %v", err)
	}
	if _, err := s.A.GetMachine(s.Ctx, "SN1"); err == nil {
		t.Fatal("a refused report recorded SN1")
	}
	if _, err := runCLI(t, srv.URL, tok, "", "machine", "report", "--bmc-mac", "0a:00:00:00:09:01", "--dpu", "SN1,SN2",
		"--dpu-bmc-mac", "SN1=0A-00-00-00-09-99"); err != nil {
		t.Fatalf("report: %v", err)
	}
	out, err := runCLI(t, srv.URL, tok, "", "machine", "show", "SN1")
	if err != nil || !strings.Contains(out, "bmc_mac_address: 0a:00:00:00:09:99") {
		t.Fatalf("machine show SN1: %v\n%s", err, out)
	}
	out, err = runCLI(t, srv.URL, tok, "", "machine", "show", "SN2")
	if err != nil || !strings.Contains(out, "bmc_mac_address: -") {
		t.Fatalf("machine show SN2: %v\n%s", err, out)
	}
}

// TestReconcileHook: the startup hook completes DPUs at once and, while
// the server runs, completes a conflict soon after an operator resolves it.
func TestReconcileHook(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a := allocator.New(db, allocator.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		if _, err := a.CreatePool(ctx, allocator.PoolSpec{Name: "lo-ip", Type: "ipv4", Ranges: []allocator.RangeSpec{
			{First: "10.2.0.1", Last: "10.2.0.9"}, {First: "10.2.0.100", Last: "10.2.0.109", AutoAssign: new(bool)}}}); err != nil {
			t.Fatal(err)
		}
		v := "10.2.0.100"
		if _, err := a.CreateExpectedMachine(ctx, allocator.ExpectedMachineSpec{BmcMacAddress: "0a:00:00:00:07:01",
			ExpectedDPUs: &[]allocator.ExpectedDPU{{SerialNumber: "RX1", LoopbackIP: &v}}}); err != nil {
			t.Fatal(err)
		}
		// RX1 turns up in another ExpectedMachine's host: conflict.
		if _, err := a.CreateExpectedMachine(ctx, allocator.ExpectedMachineSpec{BmcMacAddress: "0a:00:00:00:07:02",
			ExpectedDPUs: &[]allocator.ExpectedDPU{{SerialNumber: "RX2"}}}); err != nil {
			t.Fatal(err)
		}
		res, err := a.Report(ctx, allocator.ReportSpec{BmcMacAddress: "0a:00:00:00:07:02", DPUs: []allocator.ReportDPU{{SerialNumber: "RX1"}}})
		if err != nil || len(res.Incomplete) != 1 {
			t.Fatalf("report = %+v, %v", res, err)
		}
		if _, err := loadConfig(newServeCmd().Flags(), envOf("IPLEDGER_RECONCILE_INTERVAL=nonsense"), serveSettings...); err == nil {
			t.Fatal("a malformed interval is accepted")
		}
		if err := reconcileAtStartup(ctx, a, log, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		// The operator fixes the ExpectedMachines: RX1 belongs to the host it is in.
		if err := a.DeleteExpectedMachine(ctx, "0a:00:00:00:07:01", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := a.PatchExpectedMachine(ctx, "0a:00:00:00:07:02",
			[]byte(`{"expected_dpus":[{"serial_number":"RX2"},{"serial_number":"RX1","loopback_ip":"10.2.0.100"}]}`), nil); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, err := a.GetBinding(ctx, "RX1")
			if err != nil {
				t.Fatal(err)
			}
			if b.StatusV4 == allocator.BindingReserved && machTestDeref(b.LoopbackIP) == "10.2.0.100" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("conflict not completed by the periodic reconciliation: %+v", b)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
