// Package apijson decodes the JSON documents ipledger takes (REST bodies,
// the CLI's files, the console's import) by the rules of strict JSON,
// docs/api.md "Strict bodies", and refuses them with the API's errors
// (package fault). A document is refused when
//
//   - it is not JSON or not UTF-8 (400 bad_request);
//   - an object carries the same member name twice, or two names that
//     differ only in case (422 invalid naming the later member's path, e.g.
//     expected_machines[3].metadata.name): whichever one a decoder took, the
//     other was silently dropped;
//   - a string holds a NUL character (422 invalid): PostgreSQL cannot store
//     one and no name, address or identifier of ipledger needs it.
//
// Member names match their Go fields in their exact case only, and a
// leading UTF-8 byte order mark is ignored. The document is walked by
// package strictjson (the walker the CNI plugin uses too); the value is
// then decoded by github.com/go-json-experiment/json (the encoding/json v2
// semantics).
package apijson

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/strictjson"
)

// Options tunes Decode.
type Options struct {
	// RejectUnknown refuses a member the target type does not have (422
	// invalid naming it): used where a misspelt member would silently
	// change what is done ("vaule" ignored turns a requested allocation
	// into an automatic one).
	RejectUnknown bool
	// Prefix is the JSON path of the document inside a larger one
	// (expected_machines[3]); error fields start with it.
	Prefix string
	// What names the document in messages ("request body", "the file");
	// default "request body".
	What string
}

func (o Options) what() string {
	if o.What == "" {
		return "request body"
	}
	return o.What
}

// Decode checks b with Check and decodes it into v: a member of
// the wrong JSON type is 422 invalid naming its path; a document of the
// wrong kind at the top (an array where an object is expected) is 400
// bad_request.
func Decode(b []byte, v any, o Options) error {
	b = strictjson.TrimBOM(b)
	if err := Check(b, o); err != nil {
		return err
	}
	err := jsonv2.Unmarshal(b, v, jsonv2.RejectUnknownMembers(o.RejectUnknown))
	if err == nil {
		return nil
	}
	return MapError(err, o)
}

// MapError maps an error of jsonv2.Unmarshal to the API's error: 422
// naming the member's path for a value of the wrong type or an unknown
// member, 400 for a document that is not JSON.
func MapError(err error, o Options) error {
	var se *jsonv2.SemanticError
	if errors.As(err, &se) {
		field := pointerPath(o.Prefix, se.JSONPointer)
		if errors.Is(se.Err, jsonv2.ErrUnknownName) {
			name := se.JSONPointer.LastToken()
			return fault.Errf(fault.CodeInvalid, field, "unknown field %q (misspelt?); nothing was changed", name)
		}
		got := KindName(se.JSONKind, se.JSONValue)
		want := goKindName(se.GoType)
		if field == "" {
			return fault.Errf(fault.CodeBadRequest, "", "%s must be a JSON %s, not %s", o.what(), want, got)
		}
		if want == "number" && se.JSONKind == '0' {
			return fault.Errf(fault.CodeInvalid, field, "%s: %s does not fit (a whole number in range is expected)", field, got)
		}
		return fault.Errf(fault.CodeInvalid, field, "%s must be a JSON %s, not %s", field, want, got)
	}
	var sy *jsontext.SyntacticError
	if errors.As(err, &sy) {
		return fault.Errf(fault.CodeBadRequest, "", "%s is not valid JSON: %v", o.what(), sy.Err)
	}
	return fault.Errf(fault.CodeBadRequest, "", "%s is not valid JSON: %v", o.what(), err)
}

// Check enforces the rules of strict JSON on a whole document (see the
// package's documentation) without decoding it into a Go value; callers
// that decode piecewise (json.RawMessage members) check the whole
// document first.
func Check(b []byte, o Options) error {
	p := strictjson.Check(b, strictjson.Options{Prefix: o.Prefix, RefuseNUL: true})
	if p == nil {
		return nil
	}
	switch p.Kind {
	case strictjson.Empty:
		return fault.Errf(fault.CodeBadRequest, "", "%s is empty; a JSON object is expected", o.what())
	case strictjson.NotUTF8:
		return fault.Errf(fault.CodeBadRequest, "", "%s is not valid UTF-8", o.what())
	case strictjson.Duplicate:
		return fault.Errf(fault.CodeInvalid, p.Path, "%s: member %q appears twice in one object; nothing was changed", p.Path, p.Name)
	case strictjson.CaseVariant:
		return fault.Errf(fault.CodeInvalid, p.Path, "%s: member %q differs from %q only in case (names match only in exact case); nothing was changed", p.Path, p.Name, p.Prev)
	case strictjson.NULName:
		return fault.Errf(fault.CodeInvalid, p.Path, "member name %q contains a NUL character", p.Name)
	case strictjson.NULString:
		return fault.Errf(fault.CodeInvalid, p.Path, "%s contains a NUL character", p.Path)
	}
	if p.Offset >= 0 {
		return fault.Errf(fault.CodeBadRequest, "", "%s is not valid JSON: %v (at byte %d)", o.what(), p.Err, p.Offset)
	}
	return fault.Errf(fault.CodeBadRequest, "", "%s is not valid JSON: %v", o.what(), p.Err)
}

// pointerPath turns a JSON pointer (/expected_dpus/1/loopback_ip) into the
// project's JSON path (expected_dpus[1].loopback_ip). A token of digits
// only is an array index: no object of this API has numeric member names.
func pointerPath(prefix string, p jsontext.Pointer) string {
	path := prefix
	for tok := range p.Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && tok != "" {
			path = fmt.Sprintf("%s[%s]", path, tok)
			continue
		}
		path = strictjson.JoinField(path, tok)
	}
	return path
}

// KindName names a JSON value in messages ("string", "number 1.5").
func KindName(k jsontext.Kind, v jsontext.Value) string {
	switch k {
	case '"':
		return "string"
	case '0':
		if len(v) > 0 && len(v) <= 40 {
			return "number " + string(v)
		}
		return "number"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}

// goKindName names a Go type by the JSON kind it takes, never by its Go
// name.
func goKindName(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return "value"
}
