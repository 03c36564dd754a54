package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit/serverkit"
)

// Every --output json prints one JSON document on one line (output.go):
// the database commands, version, and the client commands, single objects
// and lists alike.
func TestJSONOutputIsOneLine(t *testing.T) {
	t.Parallel()
	u := dbtest.NewSQLiteURL(t)
	db := dbtest.OpenURL(t, u)
	s := serverkit.Start(t, db, serverkit.Options{})
	oneLine := func(args []string, out string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
		if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") || !json.Valid([]byte(out)) {
			t.Errorf("%s printed %q: want one JSON document on one line", strings.Join(args, " "), out)
		}
	}
	for _, args := range [][]string{
		{"version", "--output", "json"},
		{"token", "list", "--database", u, "-o", "json"},
		{"check", "--database", u, "-o", "json"},
	} {
		out, err := runCmd(t, args...)
		oneLine(args, out, err)
	}
	for _, args := range [][]string{
		{"pool", "create", "vlan", "--type", "integer", "--range", "100-199"},
		{"pool", "list"},
		{"pool", "show", "vlan"},
		{"pool", "allocate", "vlan", "--owner-type", "net", "--owner-id", "tenant-a"},
		{"pool", "allocations", "vlan"},
		{"owner", "allocate", "net", "tenant-b", "--pool", "vlan"},
		{"address", "100"},
		{"expected-machine", "add", "--bmc-mac", "0a:00:00:00:00:01"},
		{"expected-machine", "list"},
		{"machine", "list"},
		{"binding", "list"},
		{"events"},
		{"webhook", "list"},
	} {
		out, err := runCLI(t, s.URL, s.Admin, "", append([]string{"-o", "json"}, args...)...)
		oneLine(args, out, err)
	}
}

// The rule holds by construction: no command prints JSON but through
// output.go, which prints it compact.
func TestNoCommandIndentsJSON(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	indent := regexp.MustCompile(`SetIndent\(|json\.Indent\(|MarshalIndent\(`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if loc := indent.FindIndex(b); loc != nil {
			t.Errorf("%s:%d indents JSON: --output json is one line (print with writeJSON or printJSON)", f, 1+strings.Count(string(b[:loc[0]]), "\n"))
		}
	}
}
