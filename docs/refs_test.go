package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// A Problem is a reference that does not resolve: where it is, and why.
type Problem struct {
	File string // slash-separated, relative to the root
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// A Ref is one reference found: the file it points to (relative to the
// root, or "" for an unresolvable name) and the heading or anchor it
// names.
type Ref struct {
	File           string
	Line           int
	Target         string
	Heading        string
	Anchor         string
	targetNotFound string
}

// citation matches a file name ending in .md — as a Markdown link's
// target (group 1) or bare (group 2) — followed by one heading or more in
// double quotes: docs/x.md "H", (docs/x.md, "H"), [x.md](x.md) "H",
// [x](x.md), "H", docs/x.md ("H"), docs/x.md, "H" and "I".
var citation = regexp.MustCompile(
	`(?:\[[^\]]*\]\(([^()\s#]+\.md)\)|(?:^|[^\w/.-])((?:[\w.-]+/)*[\w-]+\.md))` +
		`(,?\s+\(?"[^"]+"(?:,?\s+and\s+"[^"]+")*)`)

// quoted is one heading in the tail of a citation.
var quoted = regexp.MustCompile(`"([^"]+)"`)

// anchorLink matches a Markdown link to an anchor: [..](file.md#anchor)
// or [..](#anchor).
var anchorLink = regexp.MustCompile(`\]\(((?:[^()\s#:]+\.md)?)#([^()\s]+)\)`)

// fixtures are the files of this checker's own tests, whose citations are
// broken on purpose.
var fixtures = map[string]bool{"docs/refs_test.go": true, "docs/citations_test.go": true}

// skipDirs are never read: generated, vendored or recorded material.
var skipDirs = map[string]bool{".git": true, "testdata": true, "node_modules": true, "dist": true}

// textExts are the files other than Go that are read for citations.
var textExts = map[string]bool{
	".md": true, ".sh": true, ".yaml": true, ".yml": true, ".tpl": true,
	".txt": true, ".cfg": true, ".env": true, ".toml": true, ".service": true,
	".proto": true, ".templ": true, "": true,
}

// Check reads every file under root that may cite the docs and returns
// each reference that does not resolve.
func Check(root string) ([]Problem, error) {
	var problems []Problem
	headings := map[string]*fileHeadings{}
	load := func(rel string) *fileHeadings {
		if h, ok := headings[rel]; ok {
			return h
		}
		h, err := readHeadings(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			h = nil
		}
		headings[rel] = h
		return h
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if fixtures[rel] {
			return nil
		}
		refs, err := FileRefs(root, rel)
		if err != nil {
			return err
		}
		for _, r := range refs {
			problems = append(problems, resolve(r, load)...)
		}
		return nil
	})
	return problems, err
}

// FileRefs returns the references of one file (rel, slash-separated,
// relative to root); a file that is not read for citations has none.
func FileRefs(root, rel string) ([]Ref, error) {
	ext := filepath.Ext(rel)
	if ext != ".go" && !textExts[ext] {
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	if bytes.IndexByte(b, 0) >= 0 || len(b) > 1<<20 {
		return nil, nil
	}
	var texts []text
	switch ext {
	case ".go":
		texts = goTexts(b)
	case ".md":
		texts = []text{joinLines(b, 1, false)}
	default:
		texts = []text{joinLines(b, 1, true)}
	}
	var refs []Ref
	for _, t := range texts {
		refs = append(refs, citations(root, rel, t)...)
		if ext == ".md" {
			refs = append(refs, anchors(root, rel, t)...)
		}
	}
	return refs, nil
}

// A text is prose to search: lines joined by spaces, with the line each
// byte offset starts on.
type text struct {
	s     string
	lines []int // lines[i]: the offset where line first+i starts
	first int
}

func (t text) line(off int) int {
	i, _ := slices.BinarySearch(t.lines, off+1)
	return t.first + i - 1
}

// joinLines joins b's lines with spaces, removing comment markers (#,
// //) at their start when comments is set.
func joinLines(b []byte, first int, comments bool) text {
	t := text{first: first}
	var sb strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if comments {
			trimmed := strings.TrimLeft(line, " \t")
			switch {
			case strings.HasPrefix(trimmed, "//"):
				line = trimmed[2:]
			case strings.HasPrefix(trimmed, "#"):
				line = strings.TrimLeft(trimmed, "#")
			}
		}
		t.lines = append(t.lines, sb.Len())
		sb.WriteString(line)
		sb.WriteByte(' ')
	}
	t.s = sb.String()
	return t
}

// goTexts returns a Go file's comments (a run of line comments on
// consecutive lines as one text) and string literals, unquoted.
func goTexts(src []byte) []text {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	var out []text
	var group []string
	groupStart, groupEnd := 0, 0
	flush := func() {
		if len(group) > 0 {
			out = append(out, joinLines([]byte(strings.Join(group, "\n")), groupStart, true))
			group = nil
		}
	}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		line := fset.Position(pos).Line
		switch tok {
		case token.COMMENT:
			if strings.HasPrefix(lit, "/*") {
				flush()
				lit = strings.TrimSuffix(strings.TrimPrefix(lit, "/*"), "*/")
				out = append(out, joinLines([]byte(lit), line, false))
				continue
			}
			if len(group) == 0 || line != groupEnd+1 {
				flush()
				groupStart = line
			}
			group = append(group, lit)
			groupEnd = line
		case token.STRING:
			if v, err := strconv.Unquote(lit); err == nil {
				out = append(out, joinLines([]byte(v), line, false))
			}
		}
	}
	flush()
	return out
}

// citations returns the heading citations of t, a text of file rel.
func citations(root, rel string, t text) []Ref {
	var refs []Ref
	for _, m := range citation.FindAllStringSubmatchIndex(t.s, -1) {
		name, linked := "", false
		if m[2] >= 0 {
			name, linked = t.s[m[2]:m[3]], true
		} else {
			name = t.s[m[4]:m[5]]
		}
		target, notFound := targetOf(root, rel, name, linked)
		for _, q := range quoted.FindAllStringSubmatch(t.s[m[6]:m[7]], -1) {
			refs = append(refs, Ref{
				File: rel, Line: t.line(m[0]), Target: target,
				Heading: collapse(q[1]), targetNotFound: notFound,
			})
		}
	}
	return refs
}

// anchors returns the anchor links of t, a text of Markdown file rel.
func anchors(root, rel string, t text) []Ref {
	var refs []Ref
	for _, m := range anchorLink.FindAllStringSubmatchIndex(t.s, -1) {
		target, notFound := rel, ""
		if name := t.s[m[2]:m[3]]; name != "" {
			target, notFound = targetOf(root, rel, name, true)
		}
		refs = append(refs, Ref{
			File: rel, Line: t.line(m[0]), Target: target,
			Anchor: t.s[m[4]:m[5]], targetNotFound: notFound,
		})
	}
	return refs
}

// targetOf resolves name, cited in file rel: a link's target is relative
// to rel's folder; a bare name is too when such a file exists, else it
// is relative to the root (code cites docs/x.md from any folder).
func targetOf(root, rel, name string, linked bool) (target, notFound string) {
	local := filepath.ToSlash(filepath.Join(filepath.Dir(rel), name))
	if exists(root, local) {
		return local, ""
	}
	if !linked && exists(root, name) {
		return filepath.ToSlash(filepath.Clean(name)), ""
	}
	return "", name
}

func exists(root, rel string) bool {
	st, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
	return err == nil && !st.IsDir()
}

func resolve(r Ref, load func(string) *fileHeadings) []Problem {
	p := Problem{File: r.File, Line: r.Line}
	if r.Target == "" {
		p.Msg = fmt.Sprintf("cites %s, which does not exist", r.targetNotFound)
		return []Problem{p}
	}
	h := load(r.Target)
	if h == nil {
		p.Msg = fmt.Sprintf("cites %s, which cannot be read", r.Target)
		return []Problem{p}
	}
	switch {
	case r.Anchor != "" && !h.anchors[r.Anchor]:
		p.Msg = fmt.Sprintf("links to %s#%s, an anchor no heading of it has", r.Target, r.Anchor)
	case r.Anchor == "" && !h.texts[r.Heading]:
		p.Msg = fmt.Sprintf("cites %s %q, a heading it does not have", r.Target, r.Heading)
	default:
		return nil
	}
	return []Problem{p}
}

// fileHeadings are a Markdown file's headings: their text as written
// (whitespace collapsed) and their anchors.
type fileHeadings struct {
	texts, anchors map[string]bool
}

func readHeadings(path string) (*fileHeadings, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h := &fileHeadings{texts: map[string]bool{}, anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		heading, ok := atxHeading(line)
		if !ok {
			continue
		}
		h.texts[heading] = true
		slug := Slug(heading)
		if n := seen[slug]; n > 0 {
			h.anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			h.anchors[slug] = true
		}
		seen[slug]++
	}
	return h, sc.Err()
}

// atxHeading returns the text of a line that is an ATX heading (# to
// ######, then a space), without its closing #s.
func atxHeading(line string) (string, bool) {
	if strings.HasPrefix(line, "    ") {
		return "", false
	}
	s := strings.TrimLeft(line, " ")
	n := len(s) - len(strings.TrimLeft(s, "#"))
	if n < 1 || n > 6 || (len(s) > n && s[n] != ' ' && s[n] != '\t') {
		return "", false
	}
	s = strings.TrimSpace(s[n:])
	if t := strings.TrimRight(s, "#"); t != s && (t == "" || strings.HasSuffix(t, " ")) {
		s = strings.TrimSpace(t)
	}
	return collapse(s), true
}

var mdLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// Slug is the anchor GitHub gives a heading: its rendered text in lower
// case, without punctuation other than - and _, spaces made hyphens.
func Slug(heading string) string {
	s := mdLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }
