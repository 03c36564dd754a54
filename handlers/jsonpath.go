package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// jsonKind names a Go type by the JSON kind it takes, for error messages
// ("must be a JSON string"), never by its Go name.
func jsonKind(t reflect.Type) string {
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

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "bool"
	case json.Number, float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}

// locateField turns encoding/json's dotted field of a type error
// ("ranges.first") into the JSON path of the offending value with array
// indexes ("ranges[0].first"), by walking the document to the first value
// of the reported JSON kind. It returns the dotted field when the walk
// finds nothing.
func locateField(doc []byte, dotted, gotKind string) string {
	var root any
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	if d.Decode(&root) != nil {
		return dotted
	}
	if p, ok := walk(root, strings.Split(dotted, "."), "", gotKind); ok {
		return p
	}
	return dotted
}

func walk(v any, segs []string, path, gotKind string) (string, bool) {
	if arr, ok := v.([]any); ok {
		for i, el := range arr {
			if p, ok := walk(el, segs, fmt.Sprintf("%s[%d]", path, i), gotKind); ok {
				return p, true
			}
		}
		return "", false
	}
	if len(segs) == 0 || (len(segs) == 1 && segs[0] == "") {
		return path, kindOf(v) == gotKind
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	child, ok := obj[segs[0]]
	if !ok {
		// encoding/json matches keys case-insensitively.
		for k, x := range obj {
			if strings.EqualFold(k, segs[0]) {
				child, ok = x, true
				break
			}
		}
		if !ok {
			return "", false
		}
	}
	next := segs[0]
	if path != "" {
		next = path + "." + segs[0]
	}
	return walk(child, segs[1:], next, gotKind)
}

// findNUL returns the JSON path of the first string (key or value) that
// holds a NUL character: PostgreSQL cannot store one, and no identifier,
// address or name of this API needs it.
func findNUL(doc []byte) (string, bool) {
	var root any
	if json.Unmarshal(doc, &root) != nil {
		return "", false
	}
	return nulIn(root, "")
}

func nulIn(v any, path string) (string, bool) {
	switch x := v.(type) {
	case string:
		return path, strings.ContainsRune(x, 0)
	case []any:
		for i, el := range x {
			if p, ok := nulIn(el, fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, true
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if strings.ContainsRune(k, 0) {
				return p, true
			}
			if q, ok := nulIn(x[k], p); ok {
				return q, true
			}
		}
	}
	return "", false
}

// hasNULEscape is a cheap pre-check for a \u0000 escape in a JSON text.
func hasNULEscape(b []byte) bool {
	return bytes.Contains(b, []byte(`\u0000`))
}
