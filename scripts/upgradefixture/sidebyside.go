package main

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ipledger/ipledger/internal/upgrade"
)

// sideBySide answers the question of docs/operations.md's rolling-upgrade
// table for one old build: after the old build filled the database, it is
// served again, today's build (the working tree) migrates the database
// under it, and the old server, still running, makes one write of each
// kind; then today's `ipledger check` judges the result. It prints each
// write's answer and the check's findings; nothing is stored.
func sideBySide(f *upgrade.Fixture, bin, today, dbURL, tmp string) {
	srv := serve(bin, dbURL, f.Tokens[0].Value, filepath.Join(tmp, f.Dialect+"-side.log"), freeAddr())
	migrate := exec.Command(today, "migrate")
	migrate.Env = append(os.Environ(), "IPLEDGER_DATABASE_URL="+dbURL)
	if out, err := migrate.CombinedOutput(); err != nil {
		die("today's migrate under the old server: %v\n%s", err, out)
	} else {
		log.Printf("%s: today's build migrated the database under the running %s server: %s", f.Dialect, f.Rev, strings.TrimSpace(string(out)))
	}
	o, a := srv.client(f.Tokens[1].Value), srv.client(f.Tokens[0].Value)
	for _, w := range []struct {
		what   string
		c      upgrade.Client
		method string
		path   string
		body   any
	}{
		{"allocate", o, http.MethodPost, "pools/lo-ip/allocations", obj{"owner_type": "vm", "owner_id": "side-by-side"}},
		{"release", o, http.MethodDelete, "pools/lo-ip/allocations/10.0.0.1?owner_type=vm&owner_id=lo-ip-0", nil},
		{"report a new host and DPUs (fleet counts, migration 23)", o, http.MethodPost, "site-explorer/reports",
			obj{"bmc_mac_address": "0a:00:00:00:00:0b", "chassis_serial_number": "CH-0011", "dpus": []obj{{"serial_number": "DPU-L1"}, {"serial_number": "DPU-L2"}}}},
		{"declare DPU-L2's loopback (a binding class changes)", o, http.MethodPost, "expected-machines",
			obj{"bmc_mac_address": "0a:00:00:00:00:0b", "chassis_serial_number": "CH-0011", "metadata": obj{"name": "rack5-u11"},
				"expected_dpus": []obj{{"serial_number": "DPU-L2", "loopback_ip": "10.0.1.20"}}}},
		{"name with a zero-width space (migration 25)", o, http.MethodPost, "expected-machines",
			obj{"bmc_mac_address": "0a:00:00:00:00:0c", "metadata": obj{"name": "rack5\u200b-u12"}}},
		{"chassis serial with a control character (migration 25)", o, http.MethodPost, "site-explorer/reports",
			obj{"bmc_mac_address": "0a:00:00:00:00:0d", "chassis_serial_number": "CH-\u0007-13", "dpus": []obj{}}},
		{"report a host in upper case (migration 26)", o, http.MethodPost, "site-explorer/reports",
			obj{"bmc_mac_address": "0A:00:00:00:00:0E", "chassis_serial_number": "CH-0014", "dpus": []obj{{"serial_number": "DPU-N1"}}}},
		{"decommission a host", o, http.MethodPost, "machines/" + hostID(o, "0a:00:00:00:00:01") + ":decommission", nil},
		{"delete it (migration 17)", o, http.MethodDelete, "machines/" + hostID(o, "0a:00:00:00:00:01"), nil},
		{"force delete a ready host", a, http.MethodDelete, "machines/" + hostID(a, "0a:00:00:00:00:02") + "?force=true", nil},
	} {
		st, ans := callAny(w.c, w.method, w.path, w.body)
		fmt.Printf("%s\t%s\t%d %.160s\n", f.Dialect, w.what, st, strings.TrimSpace(string(ans)))
	}
	srv.stop()
	check := exec.Command(today, "check")
	check.Env = append(os.Environ(), "IPLEDGER_DATABASE_URL="+dbURL)
	out, err := check.CombinedOutput()
	fmt.Printf("%s\ttoday's check after the old server's writes (err %v):\n%s\n", f.Dialect, err, out)
}

// callAny sends a request and returns whatever the server answers.
func callAny(c upgrade.Client, method, path string, body any) (int, []byte) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			die("%v", err)
		}
	}
	st, ans, err := c.Do(method, path, b)
	if err != nil {
		die("%s %s: %v", method, path, err)
	}
	return st, ans
}

// buildToday compiles cmd/ipledger from the working tree.
func buildToday(root, tmp string) string {
	bin := filepath.Join(tmp, "ipledger-today")
	log.Printf("building the working tree")
	run(root, "nice", "go", "build", "-o", bin, "./cmd/ipledger")
	return bin
}
