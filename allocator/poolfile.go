package allocator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
)

// FilePool is one pool read from a NICo pool file, with its ranges already
// turned inclusive.
type FilePool struct {
	Name   string
	Spec   PoolSpec
	space  space
	ranges []parsedRange
}

// ParsePoolFile reads a pool file in the NICo format (docs/pools.md): either
// a whole site configuration, of which only the [pools.NAME] tables are
// read, or the grow format whose top-level tables are pools (a table is a
// pool when its `type` is a pool type). In that format `end` is exclusive,
// a `prefix` is always auto_assign, host bits of a prefix are ignored, an
// IPv4 prefix includes its network address and excludes its broadcast
// address (a /31 or /32 keeps all its addresses: there is no broadcast to
// leave out), and integer bounds may be decimal or 0x hex, quoted or not.
// Syntax errors are 400 bad_request; a field that is wrong is 422 invalid
// with a field path such as `pools.lo-ip.ranges[1].end`.
//
// A leading UTF-8 byte order mark is ignored (docs/api.md).
func ParsePoolFile(data []byte) ([]FilePool, error) {
	data = TrimBOM(data)
	var doc map[string]any
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return nil, Errf(CodeBadRequest, "", "pool file is not valid TOML: %v", err)
	}
	tables := map[string]any{}
	prefix := ""
	if pools, ok := doc["pools"]; ok {
		m, ok := pools.(map[string]any)
		if !ok {
			return nil, Errf(CodeInvalid, "pools", "pools must be a table of pool tables")
		}
		tables, prefix = m, "pools."
	} else {
		for k, v := range doc {
			m, ok := v.(map[string]any)
			if !ok {
				continue
			}
			if t, ok := m["type"].(string); ok {
				if _, isPool := ParsePoolType(t); isPool {
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
	var out []FilePool
	for _, name := range names {
		field := prefix + name
		m, ok := tables[name].(map[string]any)
		if !ok {
			return nil, Errf(CodeInvalid, field, "pool %q must be a table", name)
		}
		fp, err := parseFilePool(name, field, m)
		if err != nil {
			return nil, err
		}
		out = append(out, fp)
	}
	return out, nil
}

func parseFilePool(name, field string, m map[string]any) (FilePool, error) {
	typStr, _ := m["type"].(string)
	typ, ok := ParsePoolType(typStr)
	if !ok {
		if _, given := m["type"]; !given {
			return FilePool{}, Errf(CodeInvalid, field+".type", "pool %q has no type: want ipv4, ipv6, ipv6prefix or integer", name)
		}
		return FilePool{}, Errf(CodeInvalid, field+".type", "unknown pool type %q: want ipv4, ipv6, ipv6prefix or integer", fmt.Sprint(m["type"]))
	}
	spec := PoolSpec{Name: name, Type: string(typ)}
	if v, ok := m["delegate_prefix_len"]; ok {
		n, ok := v.(int64)
		if !ok {
			return FilePool{}, Errf(CodeInvalid, field+".delegate_prefix_len", "delegate_prefix_len must be an integer, got %v", v)
		}
		spec.DelegatePrefixLen = int(n)
	}
	if g, ok := m["gateway"].(string); ok {
		spec.Gateway = g
	}
	_, hasPrefix := m["prefix"]
	_, hasRanges := m["ranges"]
	if hasPrefix == hasRanges {
		return FilePool{}, Errf(CodeInvalid, field, "pool %q needs exactly one of prefix or ranges", name)
	}
	// Validate name, type and delegate_prefix_len first, without ranges.
	sp, _, err := validatePoolSpec(spec)
	if err != nil {
		return FilePool{}, WithFieldPrefix(err, field)
	}
	var ranges []parsedRange
	if hasPrefix {
		s, ok := m["prefix"].(string)
		if !ok {
			return FilePool{}, Errf(CodeInvalid, field+".prefix", "prefix must be a string, got %v", m["prefix"])
		}
		r, err := prefixRange(sp, s, field+".prefix")
		if err != nil {
			return FilePool{}, err
		}
		ranges = append(ranges, r)
	} else {
		list, ok := m["ranges"].([]map[string]any)
		if !ok {
			if arr, ok2 := m["ranges"].([]any); ok2 {
				for _, x := range arr {
					t, ok3 := x.(map[string]any)
					if !ok3 {
						return FilePool{}, Errf(CodeInvalid, field+".ranges", "ranges must be a list of {start, end, auto_assign} tables")
					}
					list = append(list, t)
				}
			} else {
				return FilePool{}, Errf(CodeInvalid, field+".ranges", "ranges must be a list of {start, end, auto_assign} tables")
			}
		}
		for i, t := range list {
			rf := fmt.Sprintf("%s.ranges[%d]", field, i)
			r, err := fileRange(sp, t, rf)
			if err != nil {
				return FilePool{}, err
			}
			for j, o := range ranges {
				if overlaps(r, o) {
					return FilePool{}, Errf(CodeInvalid, rf, "range %s..%s overlaps %s.ranges[%d]", sp.format(r.first), sp.format(r.last), field, j)
				}
			}
			ranges = append(ranges, r)
		}
	}
	for _, r := range ranges {
		a := r.auto
		spec.Ranges = append(spec.Ranges, RangeSpec{First: sp.format(r.first), Last: sp.format(r.last), AutoAssign: &a})
	}
	return FilePool{Name: name, Spec: spec, space: sp, ranges: ranges}, nil
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

func fileRange(sp space, t map[string]any, field string) (parsedRange, error) {
	start, ok := boundString(t["start"])
	if !ok {
		return parsedRange{}, Errf(CodeInvalid, field+".start", "start must be a string or non-negative integer, got %v", t["start"])
	}
	end, ok := boundString(t["end"])
	if !ok {
		return parsedRange{}, Errf(CodeInvalid, field+".end", "end must be a string or non-negative integer, got %v", t["end"])
	}
	auto := true
	if v, ok := t["auto_assign"]; ok {
		b, ok := v.(bool)
		if !ok {
			return parsedRange{}, Errf(CodeInvalid, field+".auto_assign", "auto_assign must be true or false, got %v", v)
		}
		auto = b
	}
	first, err := sp.parse(start)
	if err != nil {
		return parsedRange{}, Errf(CodeInvalid, field+".start", "%v", err)
	}
	excl, err := sp.parse(end)
	if err != nil {
		return parsedRange{}, Errf(CodeInvalid, field+".end", "%v", err)
	}
	if excl.cmp(first) <= 0 {
		return parsedRange{}, Errf(CodeInvalid, field+".end", "end %q must be above start %q (end is exclusive)", end, start)
	}
	last, ok := sp.prev(excl)
	if !ok {
		return parsedRange{}, Errf(CodeInvalid, field+".end", "end %q leaves an empty range", end)
	}
	if sp.holdsMapped(first, last) {
		return parsedRange{}, Errf(CodeInvalid, field, "range %s..%s (end exclusive) includes IPv4-mapped IPv6 addresses (::ffff:0:0/96), which are rejected everywhere", start, end)
	}
	return parsedRange{first: first, last: last, auto: auto}, nil
}

func prefixRange(sp space, s, field string) (parsedRange, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil || p.Addr().Zone() != "" {
		return parsedRange{}, Errf(CodeInvalid, field, "%q is not a CIDR prefix", s)
	}
	p = p.Masked()
	switch sp.typ {
	case TypeIPv4:
		if !p.Addr().Is4() {
			return parsedRange{}, Errf(CodeInvalid, field, "%q is not an IPv4 prefix", s)
		}
	case TypeIPv6, TypeIPv6Prefix:
		if !p.Addr().Is6() || p.Addr().Is4In6() {
			return parsedRange{}, Errf(CodeInvalid, field, "%q is not an IPv6 prefix", s)
		}
	default:
		return parsedRange{}, Errf(CodeInvalid, field, "an integer pool takes ranges, not a prefix")
	}
	first := fromAddr(p.Addr())
	hostBits := uint(p.Addr().BitLen() - p.Bits())
	// last = first + 2^hostBits - 1
	var span u128
	if hostBits >= 128 {
		span = u128{^uint64(0), ^uint64(0)}
	} else if hostBits >= 64 {
		span = u128{(1 << (hostBits - 64)) - 1, ^uint64(0)}
	} else {
		span = u128{0, (1 << hostBits) - 1}
	}
	last, _ := first.add(span)
	switch sp.typ {
	case TypeIPv4:
		if p.Bits() < 31 {
			last, _ = last.sub(u128{0, 1}) // the broadcast address is not a pool value
		}
	case TypeIPv6Prefix:
		if p.Bits() > sp.plen {
			return parsedRange{}, Errf(CodeInvalid, field, "prefix %s is smaller than one /%d block", p, sp.plen)
		}
		last, _ = last.sub(sp.step())
		last, _ = last.add(u128{0, 1})
	}
	if sp.holdsMapped(first, last) {
		return parsedRange{}, Errf(CodeInvalid, field, "prefix %s includes IPv4-mapped IPv6 addresses (::ffff:0:0/96), which are rejected everywhere", p)
	}
	return parsedRange{first: first, last: last, auto: true}, nil
}

// CreatedRange is one range a pool file load created.
type CreatedRange struct {
	Pool  string `json:"pool"`
	First string `json:"first"`
	Last  string `json:"last"`
}

// Drift is a difference between a pool file and stored state that a load
// cannot apply (additive loading never removes or changes anything).
type Drift struct {
	Pool    string `json:"pool"`
	Message string `json:"message"`
}

// LoadResult is the answer of POST /api/v1/pools:load.
type LoadResult struct {
	Created []CreatedRange `json:"created"`
	Drift   []Drift        `json:"drift"`
}

const driftSetting = "pool_file_drift"

// LoadPoolFile applies a NICo pool file additively (admin, and at start with
// --pools): new pools and disjoint new ranges are created; identical ranges
// are nothing to do; any other difference is drift, reported and never
// applied. The file is parsed and validated whole before anything is
// written, and applied in one transaction. The drift of the last load is
// kept for the console's banner (PoolFileDrift).
func (a *Allocator) LoadPoolFile(ctx context.Context, data []byte) (*LoadResult, error) {
	pools, err := ParsePoolFile(data)
	if err != nil {
		return nil, err
	}
	res := &LoadResult{Created: []CreatedRange{}, Drift: []Drift{}}
	var grown []string
	// Several server processes started with the same --pools file load it
	// at the same moment: the loser of a race to create a pool sees a
	// unique-name conflict. Loading is additive and idempotent, so the load
	// simply runs again and now finds the pool stored (identical ranges are
	// nothing to do).
	for attempt := 0; ; attempt++ {
		err = a.loadOnce(ctx, pools, res, &grown)
		if e, ok := AsError(err); ok && e.Code == CodeConflict && attempt < 3 {
			continue
		}
		break
	}
	if err != nil {
		return nil, err
	}
	for _, p := range grown {
		a.afterGrowth(ctx, p)
	}
	return res, nil
}

func (a *Allocator) loadOnce(ctx context.Context, pools []FilePool, res *LoadResult, grownOut *[]string) error {
	var grown []string
	err := a.write(ctx, func(t *tx) error {
		res.Created, res.Drift, grown = []CreatedRange{}, []Drift{}, nil
		names := make([]string, len(pools))
		for i, fp := range pools {
			names[i] = fp.Name
		}
		locked, err := t.lockPools(names...)
		if err != nil {
			return err
		}
		for _, fp := range pools {
			p, exists := locked[fp.Name]
			if !exists {
				// A range that overlaps another address pool is drift;
				// the pool is created with the others, or not at all.
				var keep []parsedRange
				for _, r := range fp.ranges {
					o, err := t.otherPoolOverlap(&models.Pool{Name: fp.Name}, fp.space, r.first, r.last, 0)
					if err != nil {
						return err
					}
					if o != nil {
						res.Drift = append(res.Drift, overlapDrift(fp, r, o))
						continue
					}
					keep = append(keep, r)
				}
				if len(keep) == 0 {
					res.Drift = append(res.Drift, Drift{Pool: fp.Name, Message: "pool not created: every range of it overlaps another address pool"})
					continue
				}
				if err := t.createPool(fp.Spec, fp.space, keep); err != nil {
					return err
				}
				for _, r := range keep {
					res.Created = append(res.Created, CreatedRange{Pool: fp.Name, First: fp.space.format(r.first), Last: fp.space.format(r.last)})
				}
				grown = append(grown, fp.Name)
				continue
			}
			if p.Type != fp.Spec.Type || p.DelegatePrefixLen != fp.Spec.DelegatePrefixLen {
				res.Drift = append(res.Drift, Drift{Pool: fp.Name, Message: fmt.Sprintf(
					"file says type %s (delegate_prefix_len %d), stored pool is %s (delegate_prefix_len %d): not changed",
					fp.Spec.Type, fp.Spec.DelegatePrefixLen, p.Type, p.DelegatePrefixLen)})
				continue
			}
			var stored []models.PoolRange
			if err := t.Where("pool_id = ?", p.ID).Order("first_key").Find(&stored).Error; err != nil {
				return err
			}
			for _, r := range fp.ranges {
				fk, lk := r.first.key(), r.last.key()
				disjoint, identical := true, false
				for _, s := range stored {
					if s.FirstKey == fk && s.LastKey == lk && s.AutoAssign == r.auto {
						identical = true
						break
					}
					if s.FirstKey <= lk && fk <= s.LastKey {
						disjoint = false
						res.Drift = append(res.Drift, Drift{Pool: fp.Name, Message: fmt.Sprintf(
							"file range %s..%s (auto_assign=%t) overlaps stored range %s..%s (auto_assign=%t): not changed",
							fp.space.format(r.first), fp.space.format(r.last), r.auto, s.FirstValue, s.LastValue, s.AutoAssign)})
						break
					}
				}
				if identical || !disjoint {
					continue
				}
				if o, err := t.otherPoolOverlap(p, fp.space, r.first, r.last, 0); err != nil {
					return err
				} else if o != nil {
					res.Drift = append(res.Drift, overlapDrift(fp, r, o))
					continue
				}
				row, err := t.insertRange(p, fp.space, r)
				if err != nil {
					return err
				}
				if err := t.audit("pool.range.add", "pool", p.Name, nil, rangeOut(fp.space, row)); err != nil {
					return err
				}
				res.Created = append(res.Created, CreatedRange{Pool: fp.Name, First: row.FirstValue, Last: row.LastValue})
				grown = append(grown, fp.Name)
			}
		}
		b, _ := json.Marshal(res.Drift)
		if err := t.Where("key = ?", driftSetting).Delete(&models.Setting{}).Error; err != nil {
			return err
		}
		return t.Create(&models.Setting{Key: driftSetting, Value: string(b)}).Error
	})
	*grownOut = grown
	return err
}

func overlapDrift(fp FilePool, r parsedRange, o *familyRange) Drift {
	return Drift{Pool: fp.Name, Message: fmt.Sprintf(
		"file range %s..%s overlaps range %s..%s of pool %q (address pools never overlap one another): not created",
		fp.space.format(r.first), fp.space.format(r.last), o.FirstValue, o.LastValue, o.Name)}
}

// PoolFileDrift returns the drift reported by the last pool file load.
func (a *Allocator) PoolFileDrift(ctx context.Context) ([]Drift, error) {
	var s models.Setting
	var rows []models.Setting
	if err := a.read(ctx, func(db *gorm.DB) error { return db.Where("key = ?", driftSetting).Limit(1).Find(&rows).Error }); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, nil
	}
	s = rows[0]
	var d []Drift
	if err := json.Unmarshal([]byte(s.Value), &d); err != nil {
		return nil, err
	}
	return d, nil
}
