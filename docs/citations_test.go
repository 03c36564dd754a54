package docs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every heading and anchor the repository cites exists: a heading renamed
// or removed fails here until each citation follows it.
func TestEveryCitationResolves(t *testing.T) {
	t.Parallel()
	problems, err := Check("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// The checker finds each form a citation takes, in Go comments and
// strings, Markdown and scripts, and reports each one that does not
// resolve — so that TestEveryCitationResolves passing means something.
func TestCitationFormsAreFound(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		path := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/ops.md", "# Operations\n\n## Backup, restore and check\n\n### `ipledger check`\n\n"+
		"```sh\n# Not a heading\n```\n\n## Upgrades\n\n## Upgrades\n\nSee [below](#upgrades-1), "+
		"[gone](#not-a-heading) and [x](api.md#strict-bodies).\n")
	write("docs/api.md", "# API\n\n## Strict bodies\n\nAs [ops.md](ops.md), \"Upgrades\" and\n"+
		"[the operations page](ops.md) \"Restore\" say; also (docs/ops.md \"Upgrades\").\n")
	write("README.md", "# ipledger\n\n## CLI\n\nSee [docs/ops.md](docs/ops.md) (\"Not a heading\").\n")
	write("pkg/code.go", `package pkg

// Backups (docs/ops.md, "Backup, restore and check" and "`+"`ipledger check`"+`"),
// and a heading cut by the comment's line (docs/ops.md "Backup,
// restore and check"); README.md, "CLI".
const msg = "see docs/ops.md \"Backups\""

/* A block comment: docs/missing.md "Anything". */
var path = "docs/ops.md" // a file name, not a citation
`)
	write("scripts/run.sh", "#!/bin/sh\n# (docs/ops.md \"Upgrades\"): fine; docs/ops.md\n# \"Redelivery\": not.\n"+
		"[ -f docs/ops.md\" ] && echo \"quoted\"\n")
	problems, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		`README.md:5: cites docs/ops.md "Not a heading", a heading it does not have`,
		`docs/api.md:6: cites docs/ops.md "Restore", a heading it does not have`,
		`docs/ops.md:15: links to docs/ops.md#not-a-heading, an anchor no heading of it has`,
		`pkg/code.go:6: cites docs/ops.md "Backups", a heading it does not have`,
		`pkg/code.go:8: cites docs/missing.md, which does not exist`,
		`scripts/run.sh:2: cites docs/ops.md "Redelivery", a heading it does not have`,
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Anchors are made as GitHub makes them.
func TestSlugIsGitHubs(t *testing.T) {
	t.Parallel()
	for heading, want := range map[string]string{
		"Storage and schema":                "storage-and-schema",
		"Lowest free value in O(log n)":     "lowest-free-value-in-olog-n",
		"`ipledger check`":                  "ipledger-check",
		"Times are UTC, to the microsecond": "times-are-utc-to-the-microsecond",
		"JWT bearer tokens (REST and gRPC)": "jwt-bearer-tokens-rest-and-grpc",
		"See [pools.md](pools.md) first":    "see-poolsmd-first",
		"snake_case and dash-case":          "snake_case-and-dash-case",
		"Déjà vu — twice":                   "déjà-vu--twice",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
