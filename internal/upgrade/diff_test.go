package upgrade

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestDiff(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		want, got string
		skip      []string
		diffs     []string
	}{
		{"equal", `{"a":1,"b":["x",null,true]}`, `{"b":["x",null,true],"a":1}`, nil, nil},
		{"a new field is fine", `{"a":1}`, `{"a":1,"b":2}`, nil, nil},
		{"a field dropped", `{"a":1,"b":2}`, `{"a":1}`, nil, []string{"$.b: was 2, is missing"}},
		{"a value changed", `{"p":{"owner":"a"}}`, `{"p":{"owner":"b"}}`, nil, []string{`$.p.owner: was "a", is "b"`}},
		{"a number is not its string", `{"n":"40"}`, `{"n":40}`, nil, []string{`$.n: was "40", is 40`}},
		{"null is not absent-equal", `{"n":null}`, `{"n":0}`, nil, []string{`$.n: was null, is 0`}},
		{"an item more", `[1,2]`, `[1,2,3]`, nil, []string{"$: had 2 items, has 3"}},
		{"order counts", `[{"v":1},{"v":2}]`, `[{"v":2},{"v":1}]`, nil, []string{"$[0].v: was 1, is 2", "$[1].v: was 2, is 1"}},
		{"one instant in two spellings", `{"at":"2026-12-02T03:43:35.2062Z"}`, `{"at":"2026-12-02T04:43:35.206200+01:00"}`, nil, nil},
		{"two instants", `{"at":"2026-12-02T03:43:35Z"}`, `{"at":"2026-12-02T03:43:36Z"}`, nil, []string{`$.at: was "2026-12-02T03:43:35Z", is "2026-12-02T03:43:36Z"`}},
		{"skipped at any depth", `{"at":"x","items":[{"at":"y","v":1}]}`, `{"at":"z","items":[{"at":"w","v":1}]}`, []string{"at"}, nil},
		{"an object became a string", `{"m":{"a":1}}`, `{"m":"a"}`, nil, []string{`$.m: was an object, is "a"`}},
	} {
		got := Diff(json.RawMessage(c.want), json.RawMessage(c.got), c.skip...)
		if !reflect.DeepEqual(got, c.diffs) {
			t.Errorf("%s: Diff = %q, want %q", c.name, got, c.diffs)
		}
	}
}

func TestDiffRefusesWhatIsNotJSON(t *testing.T) {
	t.Parallel()
	if d := Diff(json.RawMessage(`{"a":1}`), json.RawMessage(`<html>`)); len(d) != 1 {
		t.Errorf("Diff of JSON with HTML = %q, want one difference", d)
	}
}
