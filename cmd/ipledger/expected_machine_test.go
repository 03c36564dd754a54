package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit/serverkit"
	"github.com/ipledger/ipledger/poolfile"
)

// emCLIServer serves the demo pools over db; it returns the server's URL
// and the admin token.
func emCLIServer(t *testing.T, db *gorm.DB) (string, string) {
	t.Helper()
	s := serverkit.Start(t, db, serverkit.Options{})
	if _, err := poolfile.Load(s.Ctx, s.A, []byte(demoPools)); err != nil {
		t.Fatal(err)
	}
	return s.URL, s.Admin
}

func emCLIJSON(t *testing.T, out string, err error) allocator.ExpectedMachine {
	t.Helper()
	if err != nil {
		t.Fatalf("CLI: %v\n%s", err, out)
	}
	var em allocator.ExpectedMachine
	if err := json.Unmarshal([]byte(out), &em); err != nil {
		t.Fatalf("CLI output is not an ExpectedMachine: %v\n%s", err, out)
	}
	return em
}

// CLI round trips against a running server (SQLite and PostgreSQL): add
// with reservations, show by MAC, patch keeps reservations unless
// --expected-dpu or --clear-expected-dpus is given, --if-match, update -f,
// replace-all -f (atomic), delete, and the API's errors reach the user.
func TestExpectedMachineCLI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		url, tok := emCLIServer(t, db)
		run := func(args ...string) (string, error) { return runCLI(t, url, tok, "", args...) }
		runJSON := func(args ...string) allocator.ExpectedMachine {
			t.Helper()
			out, err := run(args...)
			return emCLIJSON(t, out, err)
		}
		const mac = "0a:00:00:00:07:01"

		em := runJSON("-o", "json", "expected-machine", "add", "--bmc-mac", "0A-00-00-00-07-01", "--bmc-username", "root",
			"--bmc-password", "cli-secret-pw", "--chassis-serial", "CHS-71", "--name", "r07-u01", "--label", "rack=r07",
			"--fallback-dpu-serial", "FB-71", "--expected-dpu", "MT-71,ipv4=10.180.62.250,ipv6=fd00:180:62:1::71",
			"--expected-dpu", "MT-72")
		if em.BmcMacAddress != mac || !em.BmcPasswordSet || len(em.ExpectedDPUs) != 2 || *em.ExpectedDPUs[0].LoopbackIP != "10.180.62.250" ||
			em.ExpectedDPUs[1].LoopbackIP != nil || em.Metadata.Labels[0].Value != "r07" || em.FallbackDPUSerialNumbers[0] != "FB-71" {
			t.Fatalf("add: %+v", em)
		}
		out, err := run("expected-machine", "show", mac)
		if err != nil || !strings.Contains(out, "MT-71") || !strings.Contains(out, "fd00:180:62:1::71") || !strings.Contains(out, "bmc_password_set") ||
			strings.Contains(out, "cli-secret-pw") {
			t.Fatalf("show: %v\n%s", err, out)
		}
		// patch without --expected-dpu keeps the reservations.
		em = runJSON("-o", "json", "em", "patch", mac, "--name", "renamed", "--if-match", "1")
		if em.Metadata.Name != "renamed" || em.Metadata.Labels[0].Key != "rack" || len(em.ExpectedDPUs) != 2 || em.Version != 2 {
			t.Fatalf("patch --name: %+v", em)
		}
		// A stale --if-match is refused with the API's error.
		if out, err := run("em", "patch", mac, "--name", "x", "--if-match", "1"); err == nil || !strings.Contains(err.Error(), "stale_version") {
			t.Fatalf("stale patch: %v\n%s", err, out)
		}
		// A refused reservation names the field.
		if _, err := run("em", "patch", mac, "--expected-dpu", "MT-71,ipv4=10.180.62.5"); err == nil ||
			!strings.Contains(err.Error(), "invalid (422)") || !strings.Contains(err.Error(), "expected_dpus[0].loopback_ip") {
			t.Fatalf("auto-range reservation: %v", err)
		}
		em = runJSON("-o", "json", "em", "patch", mac, "--expected-dpu", "MT-71,ipv6=fd00:180:62:1::72")
		if len(em.ExpectedDPUs) != 1 || em.ExpectedDPUs[0].LoopbackIP != nil || *em.ExpectedDPUs[0].LoopbackIPv6 != "fd00:180:62:1::72" {
			t.Fatalf("patch --expected-dpu: %+v", em)
		}
		em = runJSON("-o", "json", "em", "patch", mac, "--clear-expected-dpus")
		if len(em.ExpectedDPUs) != 0 || !em.BmcPasswordSet {
			t.Fatalf("patch --clear-expected-dpus: %+v", em)
		}
		if _, err := run("em", "patch", mac, "--expected-dpu", "MT-1,ipv5=1.2.3.4"); err == nil || !strings.Contains(err.Error(), "unknown key") {
			t.Fatalf("bad flag: %v", err)
		}
		// update -f: an old record without expected_dpus keeps them.
		runJSON("-o", "json", "em", "patch", mac, "--expected-dpu", "MT-71,ipv4=10.180.62.251")
		dir := t.TempDir()
		rec := filepath.Join(dir, "record.json")
		os.WriteFile(rec, []byte(`{"bmc_mac_address":"0a:00:00:00:07:01","bmc_username":"admin","chassis_serial_number":"CHS-71b"}`), 0o600)
		em = runJSON("-o", "json", "em", "update", mac, "-f", rec)
		if em.BmcUsername != "admin" || em.Metadata.Name != "" || len(em.ExpectedDPUs) != 1 || *em.ExpectedDPUs[0].LoopbackIP != "10.180.62.251" || !em.BmcPasswordSet {
			t.Fatalf("update -f: %+v", em)
		}
		// replace-all -f with the sample file; a bad file changes nothing.
		sample := filepath.Join(dir, "expected-machines.json")
		os.WriteFile(sample, []byte(demoExpectedMachinesSample), 0o600)
		bad := filepath.Join(dir, "bad.json")
		os.WriteFile(bad, []byte(strings.Replace(demoExpectedMachinesSample, `"MT2301X00012"`, `"MT2301X00011"`, 1)), 0o600)
		if _, err := run("em", "replace-all", "-f", bad); err == nil || !strings.Contains(err.Error(), "expected_machines[0].expected_dpus[1].serial_number") {
			t.Fatalf("bad replace-all: %v", err)
		}
		if out, err := run("em", "list"); err != nil || !strings.Contains(out, mac) {
			t.Fatalf("list after refused replace-all: %v\n%s", err, out)
		}
		out, err = run("em", "replace-all", "-f", sample)
		if err != nil || !strings.Contains(out, "2 ExpectedMachines stored") || !strings.Contains(out, "MT2301X00011 v4=10.180.62.210 v6=fd00:180:62:1::11") {
			t.Fatalf("replace-all: %v\n%s", err, out)
		}
		out, err = run("-o", "json", "em", "list", "--label", "rack=r01")
		var page allocator.ExpectedMachinePage
		if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Items) != 1 || page.Items[0].Metadata.Name != "r01-u10" {
			t.Fatalf("list --label: %v\n%s", err, out)
		}
		if out, err := run("em", "list", "--serial", "MT2301X00021"); err != nil || !strings.Contains(out, "0a:00:00:00:01:02") || strings.Contains(out, "0a:00:00:00:01:01") {
			t.Fatalf("list --serial (fallback): %v\n%s", err, out)
		}
		if _, err := run("em", "show", mac); err == nil || !strings.Contains(err.Error(), "not_found") {
			t.Fatalf("record absent from the file survived replace-all: %v", err)
		}
		if _, err := run("em", "delete", "0a:00:00:00:01:02"); err != nil {
			t.Fatal(err)
		}
		if out, err := run("em", "list"); err != nil || strings.Contains(out, "0a:00:00:00:01:02") {
			t.Fatalf("after delete: %v\n%s", err, out)
		}
	})
}

func TestParseExpectedDPUFlag(t *testing.T) {
	for in, want := range map[string]string{
		"MT-1":                            "MT-1 <nil> <nil>",
		" MT-1 , ipv4=10.0.0.1 ":          "MT-1 10.0.0.1 <nil>",
		"MT-1,ipv6=fd00::1,ipv4=10.0.0.1": "MT-1 10.0.0.1 fd00::1",
		"MT-1,loopback_ip_v6=fd00::1":     "MT-1 <nil> fd00::1",
		"MT-1,ipv4=1.1.1.1,ipv4=1.1.1.2":  "error",
		"MT-1,ipv5=1":                     "error",
		"ipv4=10.0.0.1":                   "error",
		"":                                "error",
		"MT-1,ipv4=":                      "error",
		"MT-1,loopback_ip=10.0.0.1,ipv6=fd00::ff": "MT-1 10.0.0.1 fd00::ff",
	} {
		d, err := parseExpectedDPUFlag(in)
		got := "error"
		if err == nil {
			s := func(p *string) string {
				if p == nil {
					return "<nil>"
				}
				return *p
			}
			got = d.SerialNumber + " " + s(d.LoopbackIP) + " " + s(d.LoopbackIPv6)
		}
		if got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}

// The demo site holds the sample file's records and three more, with
// their reservations.
func TestDemoExpectedMachines(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a := allocator.New(db, allocator.Options{})
		ctx := context.Background()
		if err := seedDemo(ctx, a, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
			t.Fatalf("demo: %v", err)
		}
		for mac, want := range map[string]string{
			"0a:00:00:00:01:01": "MT2301X00011 10.180.62.210 fd00:180:62:1::11; MT2301X00012 10.180.62.211 -",
			"0a:00:00:00:01:02": "",
			"0a:00:00:00:01:03": "MT2301X00031 10.180.62.212 fd00:180:62:1::31",
			"0a:00:00:00:01:04": "MT2301X00041 10.180.62.213 -; MT2301X00042 - -",
			"0a:00:00:00:01:05": "MT2301X00051 - fd00:180:62:1::51",
		} {
			em, err := a.GetExpectedMachine(ctx, mac)
			if err != nil {
				t.Fatalf("%s: %v", mac, err)
			}
			var got []string
			for _, d := range em.ExpectedDPUs {
				got = append(got, d.SerialNumber+" "+orDash(d.LoopbackIP)+" "+orDash(d.LoopbackIPv6))
			}
			if strings.Join(got, "; ") != want || !em.BmcPasswordSet {
				t.Fatalf("%s: %q, want %q", mac, strings.Join(got, "; "), want)
			}
		}
	})
}
