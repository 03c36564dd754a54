package apijson

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/fault"
)

// The rules of strict JSON (docs/api.md "Strict bodies"), on the shared
// helper every door uses.
func TestStrictJSONRules(t *testing.T) {
	type inner struct {
		Name string `json:"name"`
	}
	type body struct {
		OwnerID string   `json:"owner_id"`
		Items   []inner  `json:"items"`
		N       int      `json:"n"`
		F       *float64 `json:"f"`
		P       *string  `json:"p"`
	}
	refused := []struct {
		name, doc  string
		code       fault.Code
		field, msg string
	}{
		{"repeated member", `{"owner_id":"a","owner_id":"b"}`, fault.CodeInvalid, "owner_id", "appears twice"},
		{"case variant", `{"owner_id":"a","OWNER_ID":"b"}`, fault.CodeInvalid, "OWNER_ID", "only in case"},
		{"case variant deep", `{"items":[{"name":"a"},{"name":"b","Name":"c"}]}`, fault.CodeInvalid, "items[1].Name", "only in case"},
		{"repeated deep in unknown member", `{"x":{"y":[1,{"z":1,"z":2}]}}`, fault.CodeInvalid, "x.y[1].z", "appears twice"},
		{"empty name repeated", `{"":"","":""}`, fault.CodeInvalid, `[""]`, "appears twice"},
		{"empty name repeated deep", `{"items":[{"":1,"":2}]}`, fault.CodeInvalid, `items[0][""]`, "appears twice"},
		{"NUL in a value", `{"owner_id":"a\u0000b"}`, fault.CodeInvalid, "owner_id", "NUL"},
		{"NUL in a name", `{"a\u0000":1}`, fault.CodeInvalid, "a\x00", "NUL"},
		{"invalid UTF-8", "{\"owner_id\":\"\xff\"}", fault.CodeBadRequest, "", "UTF-8"},
		{"not JSON", `{"owner_id":`, fault.CodeBadRequest, "", "not valid JSON"},
		{"trailing data", `{} {}`, fault.CodeBadRequest, "", "not valid JSON"},
		{"empty", ` `, fault.CodeBadRequest, "", "empty"},
		{"wrong type deep", `{"items":[{"name":1}]}`, fault.CodeInvalid, "items[0].name", "must be a JSON string, not number"},
		{"number too large", `{"n":1e400}`, fault.CodeInvalid, "n", "does not fit"},
		{"fraction into an integer", `{"n":1.5}`, fault.CodeInvalid, "n", "does not fit"},
		{"array at the top", `[]`, fault.CodeBadRequest, "", "must be a JSON object"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			var v body
			err := Decode([]byte(c.doc), &v, Options{})
			e, ok := fault.AsError(err)
			if !ok || e.Code != c.code || e.Field != c.field || !strings.Contains(e.Message, c.msg) {
				t.Fatalf("%s: got %v, want %s field %q containing %q", c.doc, err, c.code, c.field, c.msg)
			}
		})
	}
	t.Run("large objects are checked too", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(`{"x":{`)
		for i := 0; i < 5000; i++ {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(`"K4321":1}}`)
		err := Check([]byte(b.String()), Options{})
		if e, ok := fault.AsError(err); !ok || e.Code != fault.CodeInvalid || e.Field != "x.K4321" {
			t.Fatalf("case variant among 5000 names: %v", err)
		}
	})
	t.Run("a lone member in another case does not match", func(t *testing.T) {
		var v body
		if err := Decode([]byte(`{"OWNER_ID":"a"}`), &v, Options{}); err != nil || v.OwnerID != "" {
			t.Fatalf("lenient: %+v %v", v, err)
		}
		err := Decode([]byte(`{"OWNER_ID":"a"}`), &v, Options{RejectUnknown: true})
		if e, ok := fault.AsError(err); !ok || e.Code != fault.CodeInvalid || e.Field != "OWNER_ID" || !strings.Contains(e.Message, "unknown field") {
			t.Fatalf("strict: %v", err)
		}
		err = Decode([]byte(`{"items":[{"nmae":"a"}]}`), &v, Options{RejectUnknown: true, Prefix: "doc"})
		if e, ok := fault.AsError(err); !ok || e.Field != "doc.items[0].nmae" {
			t.Fatalf("strict nested: %v", err)
		}
	})
	t.Run("a byte order mark is ignored; numbers and null decode as before", func(t *testing.T) {
		var v body
		doc := "\xEF\xBB\xBF" + `{"owner_id":"a","n":-3,"f":2.5e-1,"p":null,"items":null}`
		if err := Decode([]byte(doc), &v, Options{RejectUnknown: true}); err != nil {
			t.Fatal(err)
		}
		if v.OwnerID != "a" || v.N != -3 || v.F == nil || *v.F != 0.25 || v.P != nil || v.Items != nil {
			t.Fatalf("%+v", v)
		}
	})
}
