package upgrade

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Diff compares an answer recorded from an older build (want) with
// today's answer (got) and returns every difference, each naming its
// JSON path. Every field present in want must be present in got with an
// equal value; got may carry fields want lacks (a newer build adds
// fields, never drops or changes one). Arrays must have the same length
// and order. Two timestamps are equal when they name the same instant,
// whatever their spelling. Keys in skip are not compared at any depth
// (the times of a write made now).
func Diff(want, got json.RawMessage, skip ...string) []string {
	w, err := decode(want)
	if err != nil {
		return []string{fmt.Sprintf("recorded answer: %v", err)}
	}
	g, err := decode(got)
	if err != nil {
		return []string{fmt.Sprintf("answer: %v", err)}
	}
	d := differ{skip: map[string]bool{}}
	for _, k := range skip {
		d.skip[k] = true
	}
	d.walk("$", w, g)
	return d.out
}

type differ struct {
	skip map[string]bool
	out  []string
}

func decode(b json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func (d *differ) add(path, format string, args ...any) {
	if len(d.out) < 50 {
		d.out = append(d.out, path+": "+fmt.Sprintf(format, args...))
	}
}

func (d *differ) walk(path string, want, got any) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			d.add(path, "was an object, is %s", show(got))
			return
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if d.skip[k] {
				continue
			}
			gv, ok := g[k]
			if !ok {
				d.add(path+"."+k, "was %s, is missing", show(w[k]))
				continue
			}
			d.walk(path+"."+k, w[k], gv)
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			d.add(path, "was an array, is %s", show(got))
			return
		}
		if len(w) != len(g) {
			d.add(path, "had %d items, has %d", len(w), len(g))
			return
		}
		for i := range w {
			d.walk(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])
		}
	case string:
		g, ok := got.(string)
		if ok && (g == w || sameInstant(w, g)) {
			return
		}
		d.add(path, "was %s, is %s", show(want), show(got))
	default:
		// json.Number, bool, nil: equal as JSON text.
		if show(want) != show(got) {
			d.add(path, "was %s, is %s", show(want), show(got))
		}
	}
}

func sameInstant(a, b string) bool {
	ta, err := time.Parse(time.RFC3339Nano, a)
	if err != nil {
		return false
	}
	tb, err := time.Parse(time.RFC3339Nano, b)
	return err == nil && ta.Equal(tb)
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
