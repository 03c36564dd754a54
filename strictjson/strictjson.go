// Package strictjson is the one strict-JSON walker of ipledger: the server
// (REST bodies, the CLI's files, the console's import) and the CNI plugin
// both check a document with it before they decode it. It reads a whole
// document once with the tokenizer of github.com/go-json-experiment/json
// and reports the first problem, with the JSON path of the member or value
// concerned (expected_machines[3].metadata.name, ipam.addresses[1]):
//
//   - the document is empty, not JSON or not UTF-8;
//   - an object carries the same member name twice, or two names that
//     differ only in case: a reader keeping the first and one keeping the
//     last would act differently;
//   - a name differs only in case from one the reader knows (Options.Known);
//   - a string or a name holds a NUL character (Options.RefuseNUL).
//
// Each door turns a *Problem into its own error (an API error with its
// status, a CNI error code). The package imports nothing of ipledger, so
// the plugin links it without the server.
package strictjson

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Kind is the kind of a Problem.
type Kind int

const (
	// Empty: nothing but blanks.
	Empty Kind = iota + 1
	// NotUTF8: the document is not valid UTF-8.
	NotUTF8
	// Syntax: the document is not JSON (Err says why, Offset where).
	Syntax
	// Duplicate: member Name appears twice in one object.
	Duplicate
	// CaseVariant: member Name differs from the earlier Prev only in case.
	CaseVariant
	// Misspelt: member Name differs only in case from the known name Prev.
	Misspelt
	// NULName: member Name contains a NUL character.
	NULName
	// NULString: the string at Path contains a NUL character.
	NULString
)

// Problem is the first thing wrong with a document.
type Problem struct {
	Kind Kind
	// Path is the JSON path of the member or value (with Options.Prefix).
	Path string
	// Name is the member name concerned; Prev the earlier or known name.
	Name, Prev string
	// Err and Offset describe a Syntax or NotUTF8 problem; Offset is -1
	// when the tokenizer did not say where.
	Err    error
	Offset int64
}

func (p *Problem) Error() string {
	switch p.Kind {
	case Empty:
		return "empty document"
	case NotUTF8:
		return "not valid UTF-8"
	case Syntax:
		return "not valid JSON: " + p.Err.Error()
	case Duplicate:
		return p.Path + ": member " + strconv.Quote(p.Name) + " appears twice in one object"
	case CaseVariant:
		return p.Path + ": member " + strconv.Quote(p.Name) + " differs from " + strconv.Quote(p.Prev) + " only in case"
	case Misspelt:
		return p.Path + ": member " + strconv.Quote(p.Name) + " is spelt " + strconv.Quote(p.Prev)
	case NULName:
		return "member name " + strconv.Quote(p.Name) + " contains a NUL character"
	case NULString:
		return p.Path + " contains a NUL character"
	}
	return "strict JSON problem"
}

// Options tunes Check.
type Options struct {
	// Prefix is the JSON path of the document inside a larger one
	// (expected_machines[3]); paths start with it.
	Prefix string
	// Known lists, per object path (without Prefix; "" is the top), the
	// member names the reader takes; a name equal to one of them but for
	// case is a Misspelt problem instead of an ignored member.
	Known map[string][]string
	// RefuseNUL makes a NUL character in a string or a name a problem.
	RefuseNUL bool
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// TrimBOM returns b without a leading UTF-8 byte order mark (documents
// written by some editors start with one).
func TrimBOM(b []byte) []byte { return bytes.TrimPrefix(b, utf8BOM) }

// JoinField is the path of member f of the object at prefix.
func JoinField(prefix, f string) string {
	if prefix == "" {
		return f
	}
	if f == "" {
		return prefix
	}
	return prefix + "." + f
}

// MemberPath is JoinField, except that a member named "" is written [""],
// so that a problem with it still names a field.
func MemberPath(path, name string) string {
	if name == "" {
		return path + `[""]`
	}
	return JoinField(path, name)
}

// Check walks b (after a leading byte order mark) and returns its first
// problem, or nil.
func Check(b []byte, o Options) *Problem {
	b = TrimBOM(b)
	if len(bytes.TrimSpace(b)) == 0 {
		return &Problem{Kind: Empty, Path: o.Prefix}
	}
	dec := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true))
	// One frame per open object or array; frames are reused, and an
	// object's names are compared by a linear scan up to 16 names, through
	// a map beyond, so that a large file costs few allocations.
	type frame struct {
		obj      bool
		path     string // with Prefix
		rel      string // without Prefix, for Known
		wantName bool
		name     string
		idx      int
		names    []string
		folded   map[string]string // from 16 names on: folded name → name
	}
	var stack []frame
	valuePath := func() (abs, rel string) {
		if len(stack) == 0 {
			return o.Prefix, ""
		}
		f := &stack[len(stack)-1]
		if f.obj {
			return JoinField(f.path, f.name), JoinField(f.rel, f.name)
		}
		i := "[" + strconv.Itoa(f.idx) + "]"
		return f.path + i, f.rel + i
	}
	done := func() { // the current value of the top frame is complete
		if len(stack) == 0 {
			return
		}
		f := &stack[len(stack)-1]
		if f.obj {
			f.wantName = true
		} else {
			f.idx++
		}
	}
	for {
		tok, err := dec.ReadToken()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var sy *jsontext.SyntacticError
			if errors.As(err, &sy) {
				if strings.Contains(sy.Err.Error(), "UTF-8") {
					return &Problem{Kind: NotUTF8, Err: sy.Err, Offset: sy.ByteOffset}
				}
				return &Problem{Kind: Syntax, Err: sy.Err, Offset: sy.ByteOffset}
			}
			return &Problem{Kind: Syntax, Err: err, Offset: -1}
		}
		k := tok.Kind()
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantName && k == '"' {
			f := &stack[n-1]
			name := tok.String()
			var clash []string
			if f.folded != nil {
				if prev, ok := f.folded[strings.ToLower(name)]; ok {
					clash = []string{prev}
				}
			} else {
				clash = f.names
			}
			for _, prev := range clash {
				if !strings.EqualFold(prev, name) {
					continue
				}
				p := &Problem{Kind: CaseVariant, Path: MemberPath(f.path, name), Name: name, Prev: prev}
				if prev == name {
					p.Kind = Duplicate
				}
				return p
			}
			if o.RefuseNUL && strings.IndexByte(name, 0) >= 0 {
				return &Problem{Kind: NULName, Path: MemberPath(f.path, name), Name: name}
			}
			for _, want := range o.Known[f.rel] {
				if name != want && strings.EqualFold(name, want) {
					return &Problem{Kind: Misspelt, Path: MemberPath(f.path, name), Name: name, Prev: want}
				}
			}
			switch {
			case f.folded != nil:
				f.folded[strings.ToLower(name)] = name
			case len(f.names) == 16:
				f.folded = make(map[string]string, 64)
				for _, n := range append(f.names, name) {
					f.folded[strings.ToLower(n)] = n
				}
			default:
				f.names = append(f.names, name)
			}
			f.name, f.wantName = name, false
			continue
		}
		switch k {
		case '{', '[':
			p, rel := valuePath()
			if len(stack) < cap(stack) {
				stack = stack[:len(stack)+1]
				names := stack[len(stack)-1].names[:0]
				stack[len(stack)-1] = frame{obj: k == '{', path: p, rel: rel, wantName: k == '{', names: names}
			} else {
				stack = append(stack, frame{obj: k == '{', path: p, rel: rel, wantName: k == '{'})
			}
		case '}', ']':
			stack = stack[:len(stack)-1]
			done()
		case '"':
			if o.RefuseNUL && strings.IndexByte(tok.String(), 0) >= 0 {
				p, _ := valuePath()
				return &Problem{Kind: NULString, Path: p}
			}
			done()
		default:
			done()
		}
	}
}
