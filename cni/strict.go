package cni

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/go-json-experiment/json/jsontext"
)

// Strict configuration (docs/cni.md): the whole network configuration is
// refused with code 7 when an object in it carries the same member name
// twice, or two names that differ only in case, at any depth (the later
// one is named by its path, e.g. ipam.addresses[1].address): a reader that
// keeps the first and one that keeps the last would apply different
// addresses. Names match only in their exact case, and a member whose name
// differs from one the plugin reads only in case ("CNIVersion",
// "Addresses") is refused rather than ignored. A leading UTF-8 byte order
// mark is ignored. The tokenizer is github.com/go-json-experiment/json's.

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// knownKeys are the member names the plugin reads, per object path.
var knownKeys = map[string][]string{
	"":     {"cniVersion", "ipam", "prevResult"},
	"ipam": {"addresses", "static_ip", "ipv6_subnet", "ipv4_subnet"},
}

// checkStrict applies the rules above to data.
func checkStrict(data []byte) *types.Error {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true))
	type frame struct {
		obj      bool
		path     string
		wantName bool
		name     string
		idx      int
		names    map[string]string
	}
	var stack []*frame
	valuePath := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if f.obj {
			if f.path == "" {
				return f.name
			}
			return f.path + "." + f.name
		}
		return fmt.Sprintf("%s[%d]", f.path, f.idx)
	}
	done := func() {
		if len(stack) > 0 {
			if f := stack[len(stack)-1]; f.obj {
				f.wantName = true
			} else {
				f.idx++
			}
		}
	}
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return invalid("the network configuration is not a JSON object: %s", clip(err.Error()))
		}
		k := tok.Kind()
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantName && k == '"' {
			f := stack[n-1]
			name := tok.String()
			f.name, f.wantName = name, false
			path := valuePath()
			folded := strings.ToLower(name)
			if prev, ok := f.names[folded]; ok {
				if prev == name {
					return invalid("%s: key %q appears twice in one object", clip(path), clip(name))
				}
				return invalid("%s: key %q differs from %q only in case (keys match only in exact case)", clip(path), clip(name), clip(prev))
			}
			f.names[folded] = name
			for _, want := range knownKeys[f.path] {
				if name != want && strings.EqualFold(name, want) {
					return invalid("%s: key %q is spelt %q (keys match only in exact case)", clip(path), clip(name), want)
				}
			}
			continue
		}
		switch k {
		case '{', '[':
			stack = append(stack, &frame{obj: k == '{', path: valuePath(), wantName: k == '{', names: map[string]string{}})
		case '}', ']':
			stack = stack[:len(stack)-1]
			done()
		default:
			done()
		}
	}
}
