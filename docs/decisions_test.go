package docs

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// contentsLine is a line of docs/decisions.md's contents: a link to a
// topic (- [..](#..)) or to an entry (two spaces first).
var contentsLine = regexp.MustCompile(`^( *)- \[(.+)\]\(#([^)]+)\)$`)

// docs/decisions.md's contents list every topic and entry, in the order
// of the file and at their level, so a reader finds each decision from
// the top; an entry added without its line (or a line left behind by an
// entry removed) fails here.
func TestDecisionsContentsListEveryEntry(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("decisions.md")
	if err != nil {
		t.Fatal(err)
	}
	var listed, headings []string
	in := false
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case line == "## Contents":
			in = true
		case in && strings.HasPrefix(line, "## "):
			in = false
			headings = append(headings, line)
		case in:
			if m := contentsLine.FindStringSubmatch(line); m != nil {
				listed = append(listed, strings.Repeat("#", 2+len(m[1])/2)+" "+m[2])
			}
		case strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "### "):
			headings = append(headings, line)
		}
	}
	if len(headings) == 0 {
		t.Fatal("docs/decisions.md: no heading after its contents")
	}
	for i := 0; i < max(len(listed), len(headings)); i++ {
		l, h := "(nothing)", "(nothing)"
		if i < len(listed) {
			l = listed[i]
		}
		if i < len(headings) {
			h = headings[i]
		}
		if l != h {
			t.Fatalf("docs/decisions.md: contents line %d lists %q where the file has %q", i+1, l, h)
		}
	}
}
