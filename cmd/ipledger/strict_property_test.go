package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/strictjson/strictjsontest"
)

// Property (the CLI's -f files): a valid file with one member repeated —
// under its own name or in another case — in a random object at any depth
// makes the command exit non-zero naming the added member's path, and
// nothing is written. A leading byte order mark is ignored, and the valid
// file is then accepted.
func TestCLIFilesStrictProperty(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		srv, tok := emCLIServer(t, db)
		dir := t.TempDir()
		if out, err := runCLI(t, srv, tok, "", "expected-machine", "add", "--bmc-mac", "0a:00:00:00:0d:01", "--name", "d1"); err != nil {
			t.Fatalf("add: %v\n%s", err, out)
		}
		doors := []struct {
			args []string
			file string
		}{
			{[]string{"expected-machine", "replace-all", "-f"}, `{"expected_machines":[{"bmc_mac_address":"0a:00:00:00:0d:01","bmc_username":"root","metadata":{"name":"d1","labels":[{"key":"env","value":"lab"}]},"expected_dpus":[{"serial_number":"MT-D1"}]},{"bmc_mac_address":"0a:00:00:00:0d:02","chassis_serial_number":"CHS-D2"}]}`},
			{[]string{"expected-machine", "update", "0a:00:00:00:0d:01", "-f"}, `{"bmc_mac_address":"0a:00:00:00:0d:01","bmc_username":"admin","metadata":{"name":"d1b","description":"x","labels":[]},"expected_dpus":[{"serial_number":"MT-D1"}]}`},
			{[]string{"pool", "create", "-f"}, `{"name":"vni-d","type":"integer","ranges":[{"first":"5000","last":"5999","auto_assign":true}]}`},
		}
		seed := rand.Uint64()
		t.Logf("seed %d", seed)
		r := rand.New(rand.NewPCG(seed, 3))
		for d, door := range doors {
			for i := 0; i < 15; i++ {
				mut, field, err := strictjsontest.MutateJSON(r, []byte(door.file))
				if err != nil {
					t.Fatal(err)
				}
				f := filepath.Join(dir, "bad-"+strconv.Itoa(d)+".json")
				if err := os.WriteFile(f, mut, 0o600); err != nil {
					t.Fatal(err)
				}
				before := cliRowCounts(t, db)
				out, err := runCLI(t, srv, tok, "", append(door.args, f)...)
				if err == nil || !strings.Contains(err.Error(), field) {
					t.Fatalf("%v with %s: %v (want an error naming %s)\n%s", door.args, mut, err, field, out)
				}
				if after := cliRowCounts(t, db); after != before {
					t.Fatalf("%v with %s changed stored state: %s → %s", door.args, mut, before, after)
				}
			}
			f := filepath.Join(dir, "good-"+strconv.Itoa(d)+".json")
			if err := os.WriteFile(f, append([]byte("\xEF\xBB\xBF"), door.file...), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := runCLI(t, srv, tok, "", append(door.args, f)...); err != nil {
				t.Fatalf("%v with the valid file (and a BOM): %v\n%s", door.args, err, out)
			}
		}
	})
}

func cliRowCounts(t *testing.T, db *gorm.DB) string {
	t.Helper()
	var parts []string
	for _, table := range []string{"expected_machines", "expected_dpus", "audit_events", "pools", "pool_ranges"} {
		var n int64
		if err := db.Table(table).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		parts = append(parts, table+"="+strconv.FormatInt(n, 10))
	}
	return strings.Join(parts, " ")
}
