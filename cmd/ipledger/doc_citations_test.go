package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docCitation is how a message points to a section of the docs: the
// page's path, then the heading in double quotes (a comma between them
// allowed).
var docCitation = regexp.MustCompile(`docs/([a-z0-9-]+\.md),? "([^"]+)"`)

// checkCitations fails t for each section msg cites that does not exist,
// and returns how many it cites.
func checkCitations(t *testing.T, what, msg string) int {
	t.Helper()
	cites := docCitation.FindAllStringSubmatch(msg, -1)
	for _, c := range cites {
		if !docHeadings(t, c[1])[c[2]] {
			t.Errorf("%s points to docs/%s %q, a heading it does not have:\n%s", what, c[1], c[2], msg)
		}
	}
	return len(cites)
}

// docHeadings are the headings of docs/name, without their #s.
func docHeadings(t *testing.T, name string) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "docs", name))
	if err != nil {
		t.Fatalf("a message cites docs/%s: %v", name, err)
	}
	defer f.Close()
	out := map[string]bool{}
	fenced := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if h, ok := strings.CutPrefix(line, "#"); ok && !fenced {
			out[strings.TrimSpace(strings.TrimLeft(h, "#"))] = true
		}
	}
	return out
}

// The refusal of `ipledger backup` and `restore` on PostgreSQL points to
// the section that says what to do instead, and it exists; so does every
// section the commands' help cites.
func TestRefusalsCiteHeadingsThatExist(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	from := filepath.Join(dir, "backup.db")
	if err := os.WriteFile(from, []byte("not read"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"backup", "--database", "postgres://ipledger@db.example/ipledger", "--to", filepath.Join(dir, "copy.db")},
		{"restore", "--database", "postgres://ipledger@db.example/ipledger", "--from", from},
	} {
		out, err := runCmd(t, args...)
		if err == nil {
			t.Fatalf("%s on PostgreSQL: no refusal\n%s", args[0], out)
		}
		if checkCitations(t, "ipledger "+args[0]+"'s refusal", err.Error()) == 0 {
			t.Errorf("ipledger %s's refusal on PostgreSQL cites no section of the docs: %v", args[0], err)
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		checkCitations(t, "ipledger "+c.CommandPath()+" --help", c.Short+"\n"+c.Long)
		c.Flags().VisitAll(func(f *pflag.Flag) {
			checkCitations(t, c.CommandPath()+" --"+f.Name, f.Usage)
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}
