// Package strictjsontest generates documents that break the strict-JSON
// rules, for the property tests of every door; like strictjson it imports
// nothing of ipledger, so the CNI plugin's tests use it too.
package strictjsontest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// MutateJSON is the generator of the strict-JSON property tests of every
// door (docs/api.md "Strict bodies"): it takes a valid JSON document and
// returns it with one object, picked at random at any depth, carrying one
// of its members twice — either under the same name, or under the name
// changed in case — and the JSON path of the added (later) member, the one
// a strict decoder must name (expected_machines[3].metadata.name).
func MutateJSON(r *rand.Rand, doc []byte) ([]byte, string, error) {
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		return nil, "", err
	}
	type obj struct {
		m    map[string]any
		path string
	}
	var objs []obj
	var collect func(v any, path string)
	collect = func(v any, path string) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) > 0 {
				objs = append(objs, obj{x, path})
			}
			for _, k := range sortedKeys(x) {
				collect(x[k], joinPath(path, k))
			}
		case []any:
			for i, el := range x {
				collect(el, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	collect(root, "")
	if len(objs) == 0 {
		return nil, "", fmt.Errorf("no object with members in %s", doc)
	}
	target := objs[r.IntN(len(objs))]
	keys := sortedKeys(target.m)
	k := keys[r.IntN(len(keys))]
	extra := k
	if r.IntN(2) == 0 {
		extra = changeCase(r, k)
	}
	var buf bytes.Buffer
	var write func(v any)
	write = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			buf.WriteByte('{')
			ks := sortedKeys(x)
			for i, key := range ks {
				if i > 0 {
					buf.WriteByte(',')
				}
				writeMember(&buf, key, x[key], write)
			}
			if reflect.ValueOf(x).Pointer() == reflect.ValueOf(target.m).Pointer() {
				buf.WriteByte(',')
				writeMember(&buf, extra, x[k], write)
			}
			buf.WriteByte('}')
		case []any:
			buf.WriteByte('[')
			for i, el := range x {
				if i > 0 {
					buf.WriteByte(',')
				}
				write(el)
			}
			buf.WriteByte(']')
		default:
			b, _ := json.Marshal(x)
			buf.Write(b)
		}
	}
	write(root)
	return buf.Bytes(), joinPath(target.path, extra), nil
}

func writeMember(buf *bytes.Buffer, k string, v any, write func(any)) {
	buf.WriteString(strconv.Quote(k))
	buf.WriteByte(':')
	write(v)
}

// changeCase returns name with the case of at least one letter flipped.
func changeCase(r *rand.Rand, name string) string {
	rs := []rune(name)
	var letters []int
	for i, c := range rs {
		if unicode.IsLetter(c) {
			letters = append(letters, i)
		}
	}
	if len(letters) == 0 {
		return strings.ToUpper(name)
	}
	if r.IntN(2) == 0 {
		return strings.ToUpper(name)
	}
	i := letters[r.IntN(len(letters))]
	if unicode.IsUpper(rs[i]) {
		rs[i] = unicode.ToLower(rs[i])
	} else {
		rs[i] = unicode.ToUpper(rs[i])
	}
	return string(rs)
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
