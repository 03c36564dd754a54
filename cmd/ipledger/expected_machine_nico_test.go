package main

import (
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/database/dbtest"
)

// NICo's admin-CLI spellings work beside today's flags: add with -a -u -p
// -s -d --meta-name --label KEY:VALUE --sku-id --dpu-loopback-reservations;
// patch and update select the record with -a when no argument is given;
// omitting the reservations keeps them, '[]' clears them; both spellings
// of one field are refused; erase needs --confirm; --help lists both.
func TestExpectedMachineCLINICoFlags(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		url, tok := emCLIServer(t, db)
		run := func(args ...string) (string, error) { return runCLI(t, url, tok, "", args...) }
		runJSON := func(args ...string) allocator.ExpectedMachine {
			t.Helper()
			out, err := run(append([]string{"-o", "json", "expected-machine"}, args...)...)
			return emCLIJSON(t, out, err)
		}
		const mac = "0a:00:00:00:08:01"
		em := runJSON("add", "-a", mac, "-u", "root", "-p", "nico-secret", "-s", "CHS-81", "-d", "FB-81", "-d", "FB-82",
			"--meta-name", "r08-u01", "--meta-description", "NICo flags", "--label", "rack:r08", "--label", "gpu", "--sku-id", "sku-8",
			"--dpu-loopback-reservations", `[{"dpu_serial_number":"MT-81","loopback_ipv4":"10.180.62.240","loopback_ipv6":"fd00:180:62:1::81"},{"dpu_serial_number":"MT-82"}]`)
		if em.BmcMacAddress != mac || em.BmcUsername != "root" || !em.BmcPasswordSet || em.ChassisSerialNumber != "CHS-81" ||
			strings.Join(em.FallbackDPUSerialNumbers, ",") != "FB-81,FB-82" || em.Metadata.Name != "r08-u01" ||
			em.Metadata.Description != "NICo flags" || len(em.Metadata.Labels) != 2 || em.Metadata.Labels[0] != (allocator.Label{Key: "rack", Value: "r08"}) ||
			em.Metadata.Labels[1] != (allocator.Label{Key: "gpu"}) || em.SkuID == nil || *em.SkuID != "sku-8" ||
			len(em.ExpectedDPUs) != 2 || *em.ExpectedDPUs[0].LoopbackIP != "10.180.62.240" || *em.ExpectedDPUs[0].LoopbackIPv6 != "fd00:180:62:1::81" ||
			em.ExpectedDPUs[1].LoopbackIP != nil {
			t.Fatalf("add with NICo flags: %+v", em)
		}
		// patch -a selects the record; the reservations are kept when the
		// flag is omitted.
		em = runJSON("patch", "-a", mac, "--sku-id", "sku-9")
		if *em.SkuID != "sku-9" || len(em.ExpectedDPUs) != 2 || em.BmcMacAddress != mac || !em.BmcPasswordSet {
			t.Fatalf("patch -a --sku-id: %+v", em)
		}
		// update with flags changes only those; --dpu-loopback-reservations replaces the list.
		em = runJSON("update", "-a", mac, "--meta-name", "r08-u02",
			"--dpu-loopback-reservations", `[{"dpu_serial_number":"MT-83","loopback_ipv4":"10.180.62.241"}]`)
		if em.Metadata.Name != "r08-u02" || em.Metadata.Description != "NICo flags" || len(em.ExpectedDPUs) != 1 ||
			em.ExpectedDPUs[0].SerialNumber != "MT-83" || *em.SkuID != "sku-9" {
			t.Fatalf("update -a with flags: %+v", em)
		}
		em = runJSON("patch", mac, "--dpu-loopback-reservations", "[]")
		if len(em.ExpectedDPUs) != 0 || !em.BmcPasswordSet {
			t.Fatalf("--dpu-loopback-reservations '[]': %+v", em)
		}
		// A positional record makes -a a new MAC.
		em = runJSON("patch", mac, "-a", "0a:00:00:00:08:02")
		if em.BmcMacAddress != "0a:00:00:00:08:02" {
			t.Fatalf("patch ID -a NEW: %+v", em)
		}
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"patch", "0a:00:00:00:08:02", "--sku", "a", "--sku-id", "b"}, "--sku and --sku-id set the same field"},
			{[]string{"patch", "0a:00:00:00:08:02", "--expected-dpu", "MT-1", "--dpu-loopback-reservations", "[]"}, "same field"},
			{[]string{"patch", "0a:00:00:00:08:02", "--dpu-loopback-reservations", `[{"dpu_serial":"MT-1"}]`}, "unknown field"},
			{[]string{"patch", "0a:00:00:00:08:02", "--dpu-loopback-reservations", `null`}, "want a JSON array"},
			{[]string{"patch", "0a:00:00:00:08:02", "--dpu-loopback-reservations", `[{"dpu_serial_number":"MT-1","dpu_serial_number":"MT-2"}]`}, "appears twice"},
			{[]string{"patch", "0a:00:00:00:08:02", "--dpu-loopback-reservations", `[{"dpu_serial_number":"MT-1","Loopback_IPv4":"10.180.62.242"}]`}, "Loopback_IPv4"},
			{[]string{"patch", "0a:00:00:00:08:02", "--dpu-loopback-reservations", `[{"dpu_serial_number":"MT-1","loopback_ipv4":"10.180.62.242","LOOPBACK_IPV4":"10.180.62.243"}]`}, "only in case"},
			{[]string{"patch", "0a:00:00:00:08:02", "--dpu-loopback-reservations", ``}, "is empty"},
			{[]string{"patch", "0a:00:00:00:08:02", "--dpu-loopback-reservations", `[] x`}, "--dpu-loopback-reservations"},
			{[]string{"patch", "--sku-id", "x"}, "give ID|BMC_MAC or -a/--bmc-mac-address"},
			{[]string{"update", "0a:00:00:00:08:02", "-f", "x.json", "--sku-id", "x"}, "cannot be combined"},
			{[]string{"erase"}, "add --confirm"},
		} {
			if out, err := run(append([]string{"expected-machine"}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: %v (want %q)\n%s", c.args, err, c.want, out)
			}
		}
		// The refused flags changed nothing; a leading BOM is ignored.
		if em = runJSON("show", "0a:00:00:00:08:02"); len(em.ExpectedDPUs) != 0 || em.Version == 0 {
			t.Fatalf("a refused --dpu-loopback-reservations changed the record: %+v", em)
		}
		if em = runJSON("patch", "0a:00:00:00:08:02", "--dpu-loopback-reservations", "\ufeff[{\"dpu_serial_number\":\"MT-84\"}]"); len(em.ExpectedDPUs) != 1 {
			t.Fatalf("--dpu-loopback-reservations with a BOM: %+v", em)
		}
		for _, sub := range []string{"add", "patch", "update"} {
			out, err := run("expected-machine", sub, "--help")
			for _, want := range []string{"-a, --bmc-mac-address", "--bmc-mac ", "-u, --bmc-username", "-p, --bmc-password", "-s, --chassis-serial-number",
				"--chassis-serial ", "-d, --fallback-dpu-serial-number", "--meta-name", "--meta-description", "KEY:VALUE", "--sku-id", "--dpu-loopback-reservations", "--expected-dpu"} {
				if err != nil || !strings.Contains(out, want) {
					t.Errorf("%s --help lacks %q (%v)", sub, want, err)
				}
			}
		}
		if out, err := run("expected-machine", "erase", "--confirm"); err != nil || !strings.Contains(out, "deleted every ExpectedMachine") {
			t.Fatalf("erase --confirm: %v\n%s", err, out)
		}
		if out, err := run("-o", "json", "expected-machine", "list"); err != nil || !strings.Contains(strings.ReplaceAll(out, " ", ""), `"items":[]`) {
			t.Fatalf("list after erase: %v\n%s", err, out)
		}
	})
}
