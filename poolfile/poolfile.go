// Package poolfile reads NICo pool files (docs/pools.md): a whole site
// configuration, of which only the [pools.NAME] tables are read, or the
// grow format whose top-level tables are pools. It turns a file into the
// allocator's pool specs (Parse) and loads it additively (Load, through
// Allocator.LoadPools): the file format is here, every pool rule and the
// write are the allocator's.
package poolfile

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/BurntSushi/toml"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/strictjson"
)

// Load parses a pool file and applies it additively (admin, and at start
// with --pools): new pools and disjoint new ranges are created; identical
// ranges are nothing to do; any other difference is drift, reported and
// never applied (Allocator.LoadPools). The file is parsed and validated
// whole before anything is written.
func Load(ctx context.Context, a *allocator.Allocator, data []byte) (*allocator.LoadResult, error) {
	pools, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return a.LoadPools(ctx, pools)
}

// Parse reads a pool file in the NICo format into pool specs with
// inclusive ranges, in name order: either a whole site configuration, of
// which only the [pools.NAME] tables are read, or the grow format whose
// top-level tables are pools (a table is a pool when its `type` is a pool
// type). In that format `end` is exclusive, a `prefix` is always
// auto_assign, host bits of a prefix are ignored, an IPv4 prefix includes
// its network address and excludes its broadcast address (a /31 or /32
// keeps all its addresses: there is no broadcast to leave out), and integer
// bounds may be decimal or 0x hex, quoted or not. Syntax errors are 400
// bad_request; a field that is wrong is 422 invalid with a field path such
// as `pools.lo-ip.ranges[1].end`.
//
// A leading UTF-8 byte order mark is ignored (docs/api.md).
func Parse(data []byte) ([]allocator.PoolSpec, error) {
	data = strictjson.TrimBOM(data)
	var doc map[string]any
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return nil, fault.Errf(fault.CodeBadRequest, "", "pool file is not valid TOML: %v", err)
	}
	tables := map[string]any{}
	prefix := ""
	if pools, ok := doc["pools"]; ok {
		m, ok := pools.(map[string]any)
		if !ok {
			return nil, fault.Errf(fault.CodeInvalid, "pools", "pools must be a table of pool tables")
		}
		tables, prefix = m, "pools."
	} else {
		for k, v := range doc {
			m, ok := v.(map[string]any)
			if !ok {
				continue
			}
			if t, ok := m["type"].(string); ok {
				if _, isPool := allocator.ParsePoolType(t); isPool {
					tables[k] = m
				}
			}
		}
	}
	names := make([]string, 0, len(tables))
	for k := range tables {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []allocator.PoolSpec
	for _, name := range names {
		field := prefix + name
		m, ok := tables[name].(map[string]any)
		if !ok {
			return nil, fault.Errf(fault.CodeInvalid, field, "pool %q must be a table", name)
		}
		spec, err := parsePool(name, field, m)
		if err != nil {
			return nil, err
		}
		out = append(out, spec)
	}
	return out, nil
}

func parsePool(name, field string, m map[string]any) (allocator.PoolSpec, error) {
	typStr, _ := m["type"].(string)
	typ, ok := allocator.ParsePoolType(typStr)
	if !ok {
		if _, given := m["type"]; !given {
			return allocator.PoolSpec{}, fault.Errf(fault.CodeInvalid, field+".type", "pool %q has no type: want ipv4, ipv6, ipv6prefix or integer", name)
		}
		return allocator.PoolSpec{}, fault.Errf(fault.CodeInvalid, field+".type", "unknown pool type %q: want ipv4, ipv6, ipv6prefix or integer", fmt.Sprint(m["type"]))
	}
	spec := allocator.PoolSpec{Name: name, Type: string(typ)}
	if v, ok := m["delegate_prefix_len"]; ok {
		n, ok := v.(int64)
		if !ok {
			return allocator.PoolSpec{}, fault.Errf(fault.CodeInvalid, field+".delegate_prefix_len", "delegate_prefix_len must be an integer, got %v", v)
		}
		spec.DelegatePrefixLen = int(n)
	}
	if g, ok := m["gateway"].(string); ok {
		spec.Gateway = g
	}
	_, hasPrefix := m["prefix"]
	_, hasRanges := m["ranges"]
	if hasPrefix == hasRanges {
		return allocator.PoolSpec{}, fault.Errf(fault.CodeInvalid, field, "pool %q needs exactly one of prefix or ranges", name)
	}
	// Validate name, type and delegate_prefix_len first, without ranges.
	vals, err := allocator.NewPoolValues(spec)
	if err != nil {
		return allocator.PoolSpec{}, fault.WithFieldPrefix(err, field)
	}
	yes := true
	if hasPrefix {
		s, ok := m["prefix"].(string)
		if !ok {
			return allocator.PoolSpec{}, fault.Errf(fault.CodeInvalid, field+".prefix", "prefix must be a string, got %v", m["prefix"])
		}
		r, err := vals.PrefixRange(s)
		if err != nil {
			return allocator.PoolSpec{}, fault.WithFieldPrefix(err, field+".prefix")
		}
		r.AutoAssign = &yes
		spec.Ranges = append(spec.Ranges, r)
		return spec, nil
	}
	list, ok := m["ranges"].([]map[string]any)
	if !ok {
		if arr, ok2 := m["ranges"].([]any); ok2 {
			for _, x := range arr {
				t, ok3 := x.(map[string]any)
				if !ok3 {
					return allocator.PoolSpec{}, fault.Errf(fault.CodeInvalid, field+".ranges", "ranges must be a list of {start, end, auto_assign} tables")
				}
				list = append(list, t)
			}
		} else {
			return allocator.PoolSpec{}, fault.Errf(fault.CodeInvalid, field+".ranges", "ranges must be a list of {start, end, auto_assign} tables")
		}
	}
	for i, t := range list {
		rf := fmt.Sprintf("%s.ranges[%d]", field, i)
		r, err := fileRange(vals, t, rf)
		if err != nil {
			return allocator.PoolSpec{}, err
		}
		for j, o := range spec.Ranges {
			if vals.Overlap(r, o) {
				return allocator.PoolSpec{}, fault.Errf(fault.CodeInvalid, rf, "range %s..%s overlaps %s.ranges[%d]", r.First, r.Last, field, j)
			}
		}
		spec.Ranges = append(spec.Ranges, r)
	}
	return spec, nil
}

func boundString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int64:
		if x < 0 {
			return "", false
		}
		return strconv.FormatInt(x, 10), true
	}
	return "", false
}

// fileRange reads one {start, end, auto_assign} table; end is exclusive.
func fileRange(vals allocator.PoolValues, t map[string]any, field string) (allocator.RangeSpec, error) {
	start, ok := boundString(t["start"])
	if !ok {
		return allocator.RangeSpec{}, fault.Errf(fault.CodeInvalid, field+".start", "start must be a string or non-negative integer, got %v", t["start"])
	}
	end, ok := boundString(t["end"])
	if !ok {
		return allocator.RangeSpec{}, fault.Errf(fault.CodeInvalid, field+".end", "end must be a string or non-negative integer, got %v", t["end"])
	}
	auto := true
	if v, ok := t["auto_assign"]; ok {
		b, ok := v.(bool)
		if !ok {
			return allocator.RangeSpec{}, fault.Errf(fault.CodeInvalid, field+".auto_assign", "auto_assign must be true or false, got %v", v)
		}
		auto = b
	}
	r, err := vals.ExclusiveRange(start, end)
	if err != nil {
		return allocator.RangeSpec{}, fault.WithFieldPrefix(err, field)
	}
	r.AutoAssign = &auto
	return r, nil
}
