package strictjson

import (
	"fmt"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	known := map[string][]string{"": {"cniVersion", "ipam"}, "ipam": {"addresses"}}
	many := func(extra string) string { // an object of 40 names, then extra
		var b strings.Builder
		b.WriteString(`{"list":[{`)
		for i := range 40 {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(extra + `}]}`)
		return b.String()
	}
	for _, c := range []struct {
		doc  string
		o    Options
		kind Kind
		path string
		name string
		prev string
	}{
		{doc: `{"a":1,"b":[1,{"c":"x"}]}`},
		{doc: "\xEF\xBB\xBF{\"a\":1}"},
		{doc: " \n", kind: Empty},
		{doc: "\xEF\xBB\xBF", kind: Empty},
		{doc: `{"a":`, kind: Syntax},
		{doc: `{"a":1} x`, kind: Syntax},
		{doc: "{\"a\":\"\xff\"}", kind: NotUTF8},
		{doc: `{"a":1,"a":2}`, kind: Duplicate, path: "a", name: "a", prev: "a"},
		{doc: `{"a":{"b":[{"x":1},{"x":1,"X":2}]}}`, kind: CaseVariant, path: "a.b[1].X", name: "X", prev: "x"},
		{doc: `{"a":1,"a":2}`, o: Options{Prefix: "items[3]"}, kind: Duplicate, path: "items[3].a", name: "a", prev: "a"},
		{doc: `{"":1,"":2}`, kind: Duplicate, path: `[""]`, name: "", prev: ""},
		{doc: many(`"k7":0`), kind: Duplicate, path: "list[0].k7", name: "k7", prev: "k7"},
		{doc: many(`"K39":0`), kind: CaseVariant, path: "list[0].K39", name: "K39", prev: "k39"},
		{doc: many(`"k40":0`)},
		{doc: `{"CNIVersion":"1.0.0"}`, o: Options{Known: known}, kind: Misspelt, path: "CNIVersion", name: "CNIVersion", prev: "cniVersion"},
		{doc: `{"ipam":{"Addresses":[]}}`, o: Options{Known: known}, kind: Misspelt, path: "ipam.Addresses", name: "Addresses", prev: "addresses"},
		{doc: `{"other":{"Addresses":[]}}`, o: Options{Known: known}},
		{doc: `{"CNIVersion":"1.0.0"}`},
		{doc: `{"a":["x","y\u0000"]}`},
		{doc: `{"a":["x","y\u0000"]}`, o: Options{RefuseNUL: true}, kind: NULString, path: "a[1]"},
		{doc: `{"a\u0000b":1}`, o: Options{RefuseNUL: true}, kind: NULName, path: "a\x00b", name: "a\x00b"},
	} {
		p := Check([]byte(c.doc), c.o)
		if c.kind == 0 {
			if p != nil {
				t.Errorf("%q: %v, want no problem", c.doc, p)
			}
			continue
		}
		if p == nil {
			t.Errorf("%q: no problem, want kind %d", c.doc, c.kind)
			continue
		}
		if p.Kind != c.kind || p.Path != c.path || p.Name != c.name || p.Prev != c.prev {
			t.Errorf("%q: %+v, want kind %d path %q name %q prev %q", c.doc, *p, c.kind, c.path, c.name, c.prev)
		}
		if p.Error() == "" {
			t.Errorf("%q: empty message", c.doc)
		}
	}
}

// TestCheckReusesFrames: a frame reused for a later object starts with no
// names, so names of an earlier sibling never clash.
func TestCheckReusesFrames(t *testing.T) {
	t.Parallel()
	if p := Check([]byte(`[{"a":{"x":1}},{"b":{"x":1}},{"c":[{"x":1},{"x":2}]}]`), Options{}); p != nil {
		t.Fatalf("siblings clashed: %v", p)
	}
}
