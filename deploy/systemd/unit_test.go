package systemd_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// directives reads the unit's Key=Value lines, each key with its values in
// order (a key may repeat).
func directives(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("ipledger.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("not Key=Value: %q", line)
		}
		out[k] = append(out[k], v)
	}
	return out
}

// The unit carries the hardening the operations guide promises.
func TestUnitHardening(t *testing.T) {
	t.Parallel()
	d := directives(t)
	for k, want := range map[string]string{
		"ExecStart":        "/usr/local/bin/ipledger serve",
		"DynamicUser":      "yes",
		"StateDirectory":   "ipledger",
		"ProtectSystem":    "strict",
		"ProtectHome":      "yes",
		"NoNewPrivileges":  "yes",
		"PrivateTmp":       "yes",
		"PrivateDevices":   "yes",
		"RestrictSUIDSGID": "yes",
		"KillSignal":       "SIGTERM",
		"Restart":          "on-failure",
	} {
		if got := d[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s=%v, want %s", k, got, want)
		}
	}
	if got := d["CapabilityBoundingSet"]; len(got) != 1 || got[0] != "" {
		t.Errorf("CapabilityBoundingSet=%v, want empty (no capabilities)", got)
	}
	if !strings.Contains(strings.Join(d["Environment"], " "), "IPLEDGER_DATABASE_URL=sqlite:/var/lib/ipledger/") {
		t.Errorf("Environment=%v: the SQLite file belongs in the state directory", d["Environment"])
	}
}

// systemd-analyze verify accepts the unit, and its offline security
// review rates the exposure at most 2.0 ("OK"). The executable's path is
// pointed at one that exists here: verify checks that it does.
func TestUnitVerify(t *testing.T) {
	t.Parallel()
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is missing: .ci/run installs the systemd package")
		}
		t.Skip("systemd-analyze is not installed (Debian package systemd): unit not verified")
	}
	data, err := os.ReadFile("ipledger.service")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ipledger")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(dir, "ipledger.service")
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(string(data), "/usr/local/bin/ipledger", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "verify", "--man=no", unit).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	if out, err := exec.Command(tool, "security", "--offline=true", "--threshold=20", "--no-pager", unit).CombinedOutput(); err != nil {
		t.Fatalf("systemd-analyze security: exposure above 2.0 (%v)\n%s", err, out)
	}
}
