package views

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// DiffLine is one field an audit event changed: its JSON path, the value
// before and after ("" when the field had none on that side: absent, null,
// an empty text, list or object).
type DiffLine struct {
	Path, Old, New string
	// Added and Removed mark the lines of a creation and of a deletion:
	// the event has no document before (after), so only the other side is
	// shown.
	Added, Removed bool
}

// maxDiffLines bounds the diff shown in a table row; the full documents
// stay behind the toggle.
const maxDiffLines = 12

// Diff lists the fields that differ between an event's before and after
// documents, flattened to paths (metadata.name, expected_dpus[0].loopback_ip)
// in path order. A field with no value (absent, null, "", [] or {}) on both
// sides did not change and is not listed, whichever of these each side
// holds; a field that gained or lost its value has "" on the side without
// one (the page shows it as "—", docs/console.md "Audit diffs"). Secrets
// are redacted whatever the writer did: a field named like a password,
// secret or token shows only that it changed.
func Diff(before, after json.RawMessage) []DiffLine {
	bd, ad := decode(before), decode(after)
	b, a := map[string]string{}, map[string]string{}
	flatten("", bd, b)
	flatten("", ad, a)
	keys := map[string]bool{}
	for k := range b {
		keys[k] = true
	}
	for k := range a {
		keys[k] = true
	}
	var out []DiffLine
	for k := range keys {
		ov, nv := b[k], a[k]
		if ov == nv {
			continue
		}
		if secretPath(k) {
			ov, nv = redact(ov), redact(nv)
		}
		out = append(out, DiffLine{Path: k, Old: ov, New: nv, Added: bd == nil, Removed: ad == nil})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// maxOneSided bounds the lines of a creation or deletion (every field is
// "changed"): the identifying fields first, the rest behind the toggle.
const maxOneSided = 4

// keyFields are shown first when a whole document appears or goes.
var keyFields = []string{"value", "pool", "owner_type", "owner_id", "state", "serial_number", "metadata.name",
	"bmc_mac_address", "name", "kind", "first", "last", "auto_assign", "role"}

// DiffShown is the first lines of a diff and how many more there are. A
// creation or a deletion shows its identifying fields first and at most
// maxOneSided lines; a change shows up to maxDiffLines changed fields.
func DiffShown(d []DiffLine) ([]DiffLine, int) {
	limit := maxDiffLines
	oneSided := len(d) > 0
	for _, l := range d {
		oneSided = oneSided && (l.Added || l.Removed)
	}
	if oneSided {
		limit = maxOneSided
		rank := func(p string) int {
			for i, k := range keyFields {
				if p == k {
					return i
				}
			}
			return len(keyFields)
		}
		d = append([]DiffLine(nil), d...)
		sort.SliceStable(d, func(i, j int) bool { return rank(d[i].Path) < rank(d[j].Path) })
	}
	if len(d) > limit {
		return d[:limit], len(d) - limit
	}
	return d, 0
}

// Clip shortens a long value for a diff line (the whole value is in the
// title and the full documents).
func Clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	return s[:20] + "…" + s[len(s)-10:]
}

func decode(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	return v
}

// flatten puts every field of v that has a value into out by its path; a
// field with none (null, "", [] or {}) is left out, so that it reads the
// same as an absent one.
func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case nil:
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, e, out)
		}
	case []any:
		for i, e := range x {
			flatten(fmt.Sprintf("%s[%d]", prefix, i), e, out)
		}
	case string:
		if x != "" {
			out[prefix] = x
		}
	default:
		b, _ := json.Marshal(x)
		out[prefix] = string(b)
	}
}

// secretPath reports a field that holds a secret (the last path element
// names a password, secret or token; flags such as bmc_password_set only
// say whether one is stored and are shown).
func secretPath(p string) bool {
	last := strings.ToLower(p[strings.LastIndex(p, ".")+1:])
	if strings.HasSuffix(last, "_set") || strings.HasSuffix(last, "_changed") {
		return false
	}
	for _, w := range []string{"password", "secret", "token"} {
		if strings.Contains(last, w) {
			return true
		}
	}
	return false
}

func redact(v string) string {
	if v == "" {
		return v
	}
	return "(redacted)"
}
