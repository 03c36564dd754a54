package audit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// actionRE is an audit action: dotted lower-case words (pool.range.add).
var actionRE = regexp.MustCompile(`^[a-z_]+(\.[a-z_]+)+$`)

// objectTypeRE is an object_type: one lower-case word.
var objectTypeRE = regexp.MustCompile(`^[a-z_]+$`)

// sqlEventRE is the action and object_type of an audit row written in SQL
// ('allocation.create', 'allocation').
var sqlEventRE = regexp.MustCompile(`'([a-z_]+(?:\.[a-z_]+)+)', '([a-z_]+)'`)

// TestObjectTypesAreThoseWritten reads every Go file of the module (tests
// aside) for the object types audit events are written with — a call
// whose arguments hold an action literal followed by an object-type
// literal (t.audit("pool.create", "pool", …), Record, NewRow and
// their wrappers), and the action and object type a SQL statement inserts
// — and requires ObjectTypes to be exactly those: a new object type
// written without its entry would be missing from the console's filter,
// and an entry nothing writes is an option that never finds anything.
func TestObjectTypesAreThoseWritten(t *testing.T) {
	t.Parallel()
	written := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != ".." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "gen" || n == "deploy") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "_templ.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				for i := 0; i+1 < len(n.Args); i++ {
					action, ok1 := stringLit(n.Args[i])
					typ, ok2 := stringLit(n.Args[i+1])
					if ok1 && ok2 && actionRE.MatchString(action) && objectTypeRE.MatchString(typ) {
						written[typ] = append(written[typ], fset.Position(n.Pos()).String())
					}
				}
			case *ast.BasicLit:
				if s, ok := stringLit(n); ok {
					for _, m := range sqlEventRE.FindAllStringSubmatch(s, -1) {
						written[m[2]] = append(written[m[2]], fset.Position(n.Pos()).String())
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for typ, at := range written {
		if !slices.Contains(ObjectTypes, typ) {
			t.Errorf("audit events of object type %q are written (%s) but ObjectTypes does not list it", typ, at[0])
		}
	}
	for _, typ := range ObjectTypes {
		if written[typ] == nil {
			t.Errorf("ObjectTypes lists %q but no code writes an audit event of that object type", typ)
		}
	}
	// The walk must have found the kinds of writes it looks for, or it
	// proves nothing: the allocator's pools and the SQL-written allocations.
	for _, typ := range []string{"pool", "allocation", "session", "webhook"} {
		if len(written[typ]) == 0 {
			t.Fatalf("found no write of %q events: the walk is broken", typ)
		}
	}
}

// stringLit is the value of a string literal (a raw or quoted one).
func stringLit(e ast.Expr) (string, bool) {
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(b.Value)
	return s, err == nil
}
