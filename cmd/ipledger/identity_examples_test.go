package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/internal/testkit/idpkit"
)

// TestIdentityExamplesAreTheDocs: docs/identity.md shows each file of
// docs/examples/identity whole, as the fenced block after the line that
// links to it, and shows no other: the configurations the identity tests
// run (TestDexBearerTokens, TestDexConsoleSignIn, TestOAuth2ProxySignInOut)
// are the ones a reader copies.
func TestIdentityExamplesAreTheDocs(t *testing.T) {
	t.Parallel()
	root := idpkit.Root(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "identity.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(doc), "\n")
	files, err := filepath.Glob(filepath.Join(root, "docs", "examples", "identity", "*"))
	if err != nil || len(files) < 4 {
		t.Fatalf("examples %v: %v", files, err)
	}
	shown := map[string]bool{}
	for i, line := range lines {
		if !strings.Contains(line, "](examples/identity/") {
			continue
		}
		name := line[strings.Index(line, "](examples/identity/")+len("](examples/identity/"):]
		name = name[:strings.IndexByte(name, ')')]
		j := i + 1
		for j < len(lines) && !strings.HasPrefix(lines[j], "```") {
			j++
		}
		k := j + 1
		for k < len(lines) && lines[k] != "```" {
			k++
		}
		if j >= len(lines) || k >= len(lines) {
			t.Fatalf("docs/identity.md links examples/identity/%s without a fenced block after it", name)
		}
		want, err := os.ReadFile(filepath.Join(root, "docs", "examples", "identity", name))
		if err != nil {
			t.Fatalf("docs/identity.md shows examples/identity/%s: %v", name, err)
		}
		if got := strings.Join(lines[j+1:k], "\n") + "\n"; got != string(want) {
			t.Errorf("docs/identity.md's block of examples/identity/%s differs from the file: copy the file into the doc", name)
		}
		shown[name] = true
	}
	for _, f := range files {
		if !shown[filepath.Base(f)] {
			t.Errorf("docs/identity.md does not show examples/identity/%s", filepath.Base(f))
		}
	}
}
