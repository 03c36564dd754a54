package allocator

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
)

// The pools of DPU loopbacks (DESIGN.md §1): lo-ip is required for DPU
// ingestion, lo-ip-v6 is optional. ExpectedDpu reservations refer to them.
const (
	PoolLoopbackV4 = "lo-ip"
	PoolLoopbackV6 = "lo-ip-v6"
)

var poolNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// PoolSpec is the body of POST /api/v1/pools.
type PoolSpec struct {
	Name              string      `json:"name"`
	Type              string      `json:"type"`
	Ranges            []RangeSpec `json:"ranges"`
	DelegatePrefixLen int         `json:"delegate_prefix_len,omitempty"`
	Gateway           string      `json:"gateway,omitempty"`
}

// RangeSpec is one inclusive range as the JSON API and console take it.
// AutoAssign defaults to true when absent.
type RangeSpec struct {
	First      string `json:"first"`
	Last       string `json:"last"`
	AutoAssign *bool  `json:"auto_assign,omitempty"`
}

// RangeUpdate is the body of PATCH /api/v1/pools/{name}/ranges/{id}: any of
// the fields; absent ones keep their value. Version, when set, must match.
type RangeUpdate struct {
	First      *string `json:"first,omitempty"`
	Last       *string `json:"last,omitempty"`
	AutoAssign *bool   `json:"auto_assign,omitempty"`
	Version    *int64  `json:"version,omitempty"`
	// IfMatch carries the request's If-Match versions (REST); empty is no
	// precondition.
	IfMatch IfMatch `json:"-"`
}

// Pool is a resource pool as the API shows it.
type Pool struct {
	Name              string    `json:"name"`
	Type              PoolType  `json:"type"`
	DelegatePrefixLen int       `json:"delegate_prefix_len,omitempty"`
	Gateway           string    `json:"gateway,omitempty"`
	Version           int64     `json:"version"`
	Ranges            []Range   `json:"ranges"`
	Stats             PoolStats `json:"stats"`
}

// Range is one inclusive range (`first`..`last`) with its size as a
// decimal string and its own counts.
type Range struct {
	ID         string `json:"id"`
	First      string `json:"first"`
	Last       string `json:"last"`
	AutoAssign bool   `json:"auto_assign"`
	Size       string `json:"size"`
	Version    int64  `json:"version"`
	Stats      Counts `json:"stats"`
}

// Counts are the figures of one kind of range; every count is a decimal
// string because an IPv6 pool does not fit in 64 bits. free = size −
// allocated − quarantined − reserved.
type Counts struct {
	Size        string `json:"size"`
	Allocated   string `json:"allocated"`
	Free        string `json:"free"`
	Quarantined string `json:"quarantined"`
	Reserved    string `json:"reserved"`
}

// PoolStats splits the counts by auto_assign and explicit ranges.
type PoolStats struct {
	Auto     Counts `json:"auto"`
	Explicit Counts `json:"explicit"`
}

type bigCounts struct{ size, alloc, quar, resv *big.Int }

func newBigCounts() bigCounts {
	return bigCounts{new(big.Int), new(big.Int), new(big.Int), new(big.Int)}
}

func (c bigCounts) add(o bigCounts) {
	c.size.Add(c.size, o.size)
	c.alloc.Add(c.alloc, o.alloc)
	c.quar.Add(c.quar, o.quar)
	c.resv.Add(c.resv, o.resv)
}

func (c bigCounts) counts() Counts {
	free := new(big.Int).Sub(c.size, c.alloc)
	free.Sub(free, c.quar)
	free.Sub(free, c.resv)
	return Counts{Size: c.size.String(), Allocated: c.alloc.String(), Free: free.String(),
		Quarantined: c.quar.String(), Reserved: c.resv.String()}
}

// Used is the share of the pool (both kinds of range) that is not free, in
// [0, 1], for utilization bars and alerts.
func (s PoolStats) Used() float64 {
	size, free := new(big.Float), new(big.Float)
	for _, c := range []Counts{s.Auto, s.Explicit} {
		a, _ := new(big.Float).SetString(c.Size)
		f, _ := new(big.Float).SetString(c.Free)
		if a != nil {
			size.Add(size, a)
		}
		if f != nil {
			free.Add(free, f)
		}
	}
	if size.Sign() == 0 {
		return 0
	}
	used := new(big.Float).Sub(size, free)
	r, _ := new(big.Float).Quo(used, size).Float64()
	return r
}

func spaceOf(p *models.Pool) space { return newSpace(PoolType(p.Type), p.DelegatePrefixLen) }

// reservationColumn names the ExpectedDpu key column that declares values of
// this pool, or "" for pools that carry no reservations.
func reservationColumn(pool string) string {
	switch pool {
	case PoolLoopbackV4:
		return "loopback_ip_key"
	case PoolLoopbackV6:
		return "loopback_ip_v6_key"
	}
	return ""
}

type parsedRange struct {
	first, last u128
	auto        bool
}

func (s space) parseRange(r RangeSpec, field string) (parsedRange, error) {
	f, err := s.parse(r.First)
	if err != nil {
		return parsedRange{}, Errf(CodeInvalid, field+".first", "%v", err)
	}
	l, err := s.parse(r.Last)
	if err != nil {
		return parsedRange{}, Errf(CodeInvalid, field+".last", "%v", err)
	}
	if f.cmp(l) > 0 {
		return parsedRange{}, Errf(CodeInvalid, field+".last", "range is reversed: last %s is below first %s", s.format(l), s.format(f))
	}
	if s.holdsMapped(f, l) {
		return parsedRange{}, Errf(CodeInvalid, field, "range %s..%s includes IPv4-mapped IPv6 addresses (::ffff:0:0/96), which are rejected everywhere",
			s.format(f), s.format(l))
	}
	auto := true
	if r.AutoAssign != nil {
		auto = *r.AutoAssign
	}
	return parsedRange{first: f, last: l, auto: auto}, nil
}

func overlaps(a, b parsedRange) bool { return a.first.cmp(b.last) <= 0 && b.first.cmp(a.last) <= 0 }

// validatePoolSpec checks a new pool's fields and ranges (422 with field).
func validatePoolSpec(spec PoolSpec) (space, []parsedRange, error) {
	if !poolNameRE.MatchString(spec.Name) {
		return space{}, nil, Errf(CodeInvalid, "name", "pool name %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", spec.Name)
	}
	typ, ok := ParsePoolType(spec.Type)
	if !ok {
		return space{}, nil, Errf(CodeInvalid, "type", "unknown pool type %q: want ipv4, ipv6, ipv6prefix or integer", spec.Type)
	}
	if typ == TypeIPv6Prefix {
		if spec.DelegatePrefixLen < 1 || spec.DelegatePrefixLen > 128 {
			return space{}, nil, Errf(CodeInvalid, "delegate_prefix_len", "an ipv6prefix pool needs delegate_prefix_len between 1 and 128, got %d", spec.DelegatePrefixLen)
		}
	} else if spec.DelegatePrefixLen != 0 {
		return space{}, nil, Errf(CodeInvalid, "delegate_prefix_len", "delegate_prefix_len applies only to ipv6prefix pools, not %s", typ)
	}
	if spec.Gateway != "" {
		if err := validateGateway(typ, spec.Gateway); err != nil {
			return space{}, nil, err
		}
	}
	sp := newSpace(typ, spec.DelegatePrefixLen)
	var rs []parsedRange
	for i, r := range spec.Ranges {
		field := fmt.Sprintf("ranges[%d]", i)
		pr, err := sp.parseRange(r, field)
		if err != nil {
			return space{}, nil, err
		}
		for j, o := range rs {
			if overlaps(pr, o) {
				return space{}, nil, Errf(CodeInvalid, field, "range %s..%s overlaps ranges[%d]", sp.format(pr.first), sp.format(pr.last), j)
			}
		}
		rs = append(rs, pr)
	}
	return sp, rs, nil
}

func validateGateway(typ PoolType, gw string) error {
	a, err := parseAddr(strings.TrimSpace(gw))
	if err != nil {
		return Errf(CodeInvalid, "gateway", "%v", err)
	}
	switch typ {
	case TypeIPv4:
		if !a.Is4() {
			return Errf(CodeInvalid, "gateway", "gateway %q of an ipv4 pool must be an IPv4 address", gw)
		}
	case TypeIPv6, TypeIPv6Prefix:
		if !a.Is6() {
			return Errf(CodeInvalid, "gateway", "gateway %q of an %s pool must be an IPv6 address", gw, typ)
		}
	default:
		return Errf(CodeInvalid, "gateway", "an integer pool has no gateway")
	}
	return nil
}

// CreatePool creates a pool with its ranges (admin). A pool with the same
// name is 409 conflict; bad fields are 422 invalid naming the field.
func (a *Allocator) CreatePool(ctx context.Context, spec PoolSpec) (*Pool, error) {
	spec.Name = strings.TrimSpace(spec.Name)
	sp, ranges, err := validatePoolSpec(spec)
	if err != nil {
		return nil, err
	}
	err = a.write(ctx, func(t *tx) error {
		return t.createPool(spec, sp, ranges)
	})
	if err != nil {
		if e, ok := AsError(err); ok && e.Code == CodeConflict && e.Field == "" {
			return nil, Errf(CodeConflict, "name", "pool %q already exists", spec.Name)
		}
		return nil, err
	}
	// A new pool counts as growth (DESIGN.md §10: creating lo-ip-v6
	// completes the DPUs ingested before it).
	a.afterGrowth(ctx, spec.Name)
	return a.GetPool(ctx, spec.Name)
}

func (t *tx) createPool(spec PoolSpec, sp space, ranges []parsedRange) error {
	var n int64
	if err := t.Model(&models.Pool{}).Where("name = ?", spec.Name).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return Errf(CodeConflict, "name", "pool %q already exists", spec.Name)
	}
	gw := ""
	if spec.Gateway != "" {
		g, _ := parseAddr(strings.TrimSpace(spec.Gateway))
		gw = g.String()
	}
	p := models.Pool{Name: spec.Name, Type: string(sp.typ), DelegatePrefixLen: sp.plen, Gateway: gw,
		Version: 1, CreatedAt: t.now, UpdatedAt: t.now}
	if err := t.Create(&p).Error; err != nil {
		return err
	}
	t.locked[p.Name] = &p
	var created []Range
	for _, r := range ranges {
		row, err := t.insertRange(&p, sp, r)
		if err != nil {
			return err
		}
		created = append(created, rangeOut(sp, row))
	}
	return t.audit("pool.create", "pool", p.Name, nil, map[string]any{
		"name": p.Name, "type": p.Type, "delegate_prefix_len": p.DelegatePrefixLen, "gateway": p.Gateway, "ranges": created})
}

func (t *tx) insertRange(p *models.Pool, sp space, r parsedRange) (*models.PoolRange, error) {
	var others []models.PoolRange
	if err := t.Where("pool_id = ? AND first_key <= ? AND last_key >= ?", p.ID, r.last.key(), r.first.key()).
		Find(&others).Error; err != nil {
		return nil, err
	}
	if len(others) > 0 {
		o := others[0]
		return nil, Errf(CodeConflict, "first", "range %s..%s overlaps range %d (%s..%s) of pool %q",
			sp.format(r.first), sp.format(r.last), o.ID, o.FirstValue, o.LastValue, p.Name)
	}
	row := models.PoolRange{PoolID: p.ID, FirstKey: r.first.key(), LastKey: r.last.key(),
		FirstValue: sp.format(r.first), LastValue: sp.format(r.last), AutoAssign: r.auto, Version: 1, CreatedAt: t.now}
	if err := t.Create(&row).Error; err != nil {
		return nil, err
	}
	return &row, nil
}

func rangeOut(sp space, r *models.PoolRange) Range {
	f, _ := parseKey(r.FirstKey)
	l, _ := parseKey(r.LastKey)
	return Range{ID: itoa(r.ID), First: r.FirstValue, Last: r.LastValue,
		AutoAssign: r.AutoAssign, Size: sp.count(f, l).String(), Version: r.Version}
}

// ListPools returns every pool with ranges and stats, by name.
func (a *Allocator) ListPools(ctx context.Context) ([]Pool, error) {
	var rows []models.Pool
	if err := a.read(ctx, func(db *gorm.DB) error { return db.Order("name").Find(&rows).Error }); err != nil {
		return nil, err
	}
	out := make([]Pool, 0, len(rows))
	for i := range rows {
		p, err := a.poolOut(ctx, &rows[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *p)
	}
	return out, nil
}

// GetPool returns one pool with ranges and stats, or 404.
func (a *Allocator) GetPool(ctx context.Context, name string) (*Pool, error) {
	var p models.Pool
	err := a.read(ctx, func(db *gorm.DB) error { return db.Where("name = ?", name).Take(&p).Error })
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, Errf(CodeNotFound, "", "pool %q does not exist", name)
	}
	if err != nil {
		return nil, err
	}
	return a.poolOut(ctx, &p)
}

// quarantineActive is the SQL condition (on alias a) for a quarantine that
// still holds its value, given the configured hold.
func (a *Allocator) activeQuarantineCond() (string, []any) {
	if a.hold <= 0 {
		return "1=1", nil
	}
	return "(a.state <> 'quarantined' OR a.quarantined_at > ?)", []any{a.now().Add(-a.hold)}
}

func (a *Allocator) poolOut(ctx context.Context, p *models.Pool) (*Pool, error) {
	sp := spaceOf(p)
	var ranges []models.PoolRange
	if err := a.read(ctx, func(db *gorm.DB) error {
		return db.Where("pool_id = ?", p.ID).Order("first_key").Find(&ranges).Error
	}); err != nil {
		return nil, err
	}
	type row struct {
		RangeID int64
		State   string
		N       int64
	}
	// Counts come from range_counts (kept by triggers in every write
	// transaction, migration 6), so a pool page costs the same with 1M
	// allocations as with ten. Under a quarantine hold, the quarantines
	// whose hold has run out are subtracted (partial index on quarantines:
	// the cost follows the number of quarantines).
	var counts []struct {
		RangeID     int64
		Allocated   int64
		Quarantined int64
	}
	err := a.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT c.range_id, c.allocated, c.quarantined FROM range_counts c JOIN pool_ranges r ON r.id = c.range_id
			WHERE r.pool_id = ?`, p.ID).Scan(&counts).Error
	})
	if err != nil {
		return nil, err
	}
	expired := map[int64]int64{}
	if a.hold > 0 {
		var ex []row
		err := a.read(ctx, func(db *gorm.DB) error {
			return db.Raw(`SELECT r.id AS range_id, COUNT(*) AS n
				FROM pool_ranges r JOIN allocations a ON a.pool_id = r.pool_id AND a.value_key BETWEEN r.first_key AND r.last_key
				WHERE r.pool_id = ? AND a.state = 'quarantined' AND a.quarantined_at <= ? GROUP BY r.id`, p.ID, a.now().Add(-a.hold)).Scan(&ex).Error
		})
		if err != nil {
			return nil, err
		}
		for _, e := range ex {
			expired[e.RangeID] = e.N
		}
	}
	var rows []row
	for _, c := range counts {
		rows = append(rows, row{RangeID: c.RangeID, State: models.StateAllocated, N: c.Allocated},
			row{RangeID: c.RangeID, State: models.StateQuarantined, N: c.Quarantined - expired[c.RangeID]})
	}
	resv := map[int64]int64{}
	if col := reservationColumn(p.Name); col != "" {
		cond, args := a.activeQuarantineCond()
		var rr []row
		// An expired quarantine no longer holds its value: the value counts
		// as reserved again at once (DESIGN.md §10).
		err := a.read(ctx, func(db *gorm.DB) error {
			return db.Raw(`SELECT r.id AS range_id, 'reserved' AS state, COUNT(*) AS n
				FROM pool_ranges r JOIN expected_dpus d ON d.`+col+` BETWEEN r.first_key AND r.last_key
				WHERE r.pool_id = ? AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = r.pool_id AND a.value_key = d.`+col+` AND `+cond+`)
				GROUP BY r.id`, append([]any{p.ID}, args...)...).Scan(&rr).Error
		})
		if err != nil {
			return nil, err
		}
		for _, r := range rr {
			resv[r.RangeID] = r.N
		}
	}
	per := map[int64]bigCounts{}
	for _, r := range rows {
		c, ok := per[r.RangeID]
		if !ok {
			c = newBigCounts()
			per[r.RangeID] = c
		}
		if r.State == models.StateQuarantined {
			c.quar.SetInt64(r.N)
		} else {
			c.alloc.SetInt64(r.N)
		}
	}
	out := &Pool{Name: p.Name, Type: PoolType(p.Type), DelegatePrefixLen: p.DelegatePrefixLen, Gateway: p.Gateway, Version: p.Version, Ranges: []Range{}}
	auto, expl := newBigCounts(), newBigCounts()
	for i := range ranges {
		r := rangeOut(sp, &ranges[i])
		c, ok := per[ranges[i].ID]
		if !ok {
			c = newBigCounts()
		}
		c.size.SetString(r.Size, 10)
		c.resv.SetInt64(resv[ranges[i].ID])
		r.Stats = c.counts()
		if ranges[i].AutoAssign {
			auto.add(c)
		} else {
			expl.add(c)
		}
		out.Ranges = append(out.Ranges, r)
	}
	out.Stats = PoolStats{Auto: auto.counts(), Explicit: expl.counts()}
	return out, nil
}

// AddRange grows a pool by one range (admin). Overlap with a stored range is
// 409 conflict; a malformed or reversed range is 422 invalid.
func (a *Allocator) AddRange(ctx context.Context, pool string, spec RangeSpec) (*Range, error) {
	var out Range
	err := a.write(ctx, func(t *tx) error {
		p, err := t.lockPool(pool)
		if err != nil {
			return err
		}
		sp := spaceOf(p)
		pr, err := sp.parseRange(spec, "range")
		if err != nil {
			e, _ := AsError(err)
			e.Field = strings.TrimPrefix(e.Field, "range.")
			return e
		}
		row, err := t.insertRange(p, sp, pr)
		if err != nil {
			return err
		}
		out = rangeOut(sp, row)
		t.changed(pool, "grow")
		return t.audit("pool.range.add", "pool", pool, nil, out)
	})
	if err != nil {
		return nil, err
	}
	a.afterGrowth(ctx, pool)
	return &out, nil
}

// GetRange returns one range of a pool, or 404.
func (a *Allocator) GetRange(ctx context.Context, pool, id string) (*Range, error) {
	p, err := a.GetPool(ctx, pool)
	if err != nil {
		return nil, err
	}
	for _, r := range p.Ranges {
		if r.ID == id {
			return &r, nil
		}
	}
	return nil, Errf(CodeNotFound, "", "pool %q has no range %q", pool, id)
}

func (t *tx) rangeByID(p *models.Pool, id string) (*models.PoolRange, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return nil, Errf(CodeNotFound, "", "pool %q has no range %q", p.Name, id)
	}
	var r models.PoolRange
	err = t.Where("id = ? AND pool_id = ?", n, p.ID).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, Errf(CodeNotFound, "", "pool %q has no range %q", p.Name, id)
	}
	return &r, err
}

// blockers lists the allocations, quarantines and declared reservations of
// pool p whose values lie in first..last and, when keepFirst/keepLast are
// given, outside keepFirst..keepLast. At most 20 are named.
func (t *tx) blockers(p *models.Pool, first, last string, keep *[2]string) ([]string, error) {
	var out []string
	q := t.Model(&models.Allocation{}).Where("pool_id = ? AND value_key BETWEEN ? AND ?", p.ID, first, last)
	if keep != nil {
		q = q.Where("NOT (value_key BETWEEN ? AND ?)", keep[0], keep[1])
	}
	var allocs []models.Allocation
	if err := q.Order("value_key").Limit(20).Find(&allocs).Error; err != nil {
		return nil, err
	}
	for _, al := range allocs {
		if al.State == models.StateQuarantined {
			out = append(out, fmt.Sprintf("%s (quarantined, former owner %s/%s)", al.Value, deref(al.FormerOwnerType), deref(al.FormerOwnerID)))
		} else {
			out = append(out, fmt.Sprintf("%s (allocated to %s/%s)", al.Value, deref(al.OwnerType), deref(al.OwnerID)))
		}
	}
	if col := reservationColumn(p.Name); col != "" {
		q := t.Model(&models.ExpectedDpu{}).Where(col+" BETWEEN ? AND ?", first, last)
		if keep != nil {
			q = q.Where("NOT ("+col+" BETWEEN ? AND ?)", keep[0], keep[1])
		}
		var dpus []models.ExpectedDpu
		if err := q.Order(col).Limit(20).Find(&dpus).Error; err != nil {
			return nil, err
		}
		for _, d := range dpus {
			v := deref(d.LoopbackIP)
			if p.Name == PoolLoopbackV6 {
				v = deref(d.LoopbackIPv6)
			}
			out = append(out, fmt.Sprintf("%s (declared for DPU %s)", v, d.SerialNumber))
		}
	}
	sort.Strings(out)
	return out, nil
}

// UpdateRange flips auto_assign or moves a range's bounds (admin), with the
// refusals of DESIGN.md §2: shrinking may not leave an allocation,
// quarantine or declared reservation outside the range, and flipping
// auto_assign from false to true is refused while any of those lie in the
// range (reservations must stay in explicit ranges, and an explicitly
// requested value must not turn into an automatic one). Refusals are 409
// conflict naming the blocking values.
func (a *Allocator) UpdateRange(ctx context.Context, pool, id string, u RangeUpdate) (*Range, error) {
	var out Range
	grew := false
	err := a.write(ctx, func(t *tx) error {
		p, err := t.lockPool(pool)
		if err != nil {
			return err
		}
		sp := spaceOf(p)
		row, err := t.rangeByID(p, id)
		if err != nil {
			return err
		}
		// An expired quarantine must not block the change (nor trip the
		// database trigger that guards allocations).
		if err := t.purgeExpired(p); err != nil {
			return err
		}
		if u.Version != nil && *u.Version != row.Version {
			return Errf(CodeStaleVersion, "version", "range %s is at version %d, not %d", id, row.Version, *u.Version)
		}
		if err := u.IfMatch.check("range "+id, row.Version); err != nil {
			return err
		}
		before := rangeOut(sp, row)
		spec := RangeSpec{First: row.FirstValue, Last: row.LastValue, AutoAssign: &row.AutoAssign}
		if u.First != nil {
			spec.First = *u.First
		}
		if u.Last != nil {
			spec.Last = *u.Last
		}
		if u.AutoAssign != nil {
			spec.AutoAssign = u.AutoAssign
		}
		pr, err := sp.parseRange(spec, "range")
		if err != nil {
			e, _ := AsError(err)
			e.Field = strings.TrimPrefix(e.Field, "range.")
			return e
		}
		keep := [2]string{pr.first.key(), pr.last.key()}
		if keep[0] == row.FirstKey && keep[1] == row.LastKey && pr.auto == row.AutoAssign {
			out = before // nothing to change: no new version, no audit event
			return nil
		}
		if b, err := t.blockers(p, row.FirstKey, row.LastKey, &keep); err != nil {
			return err
		} else if len(b) > 0 {
			field := "first"
			if pr.first.key() == row.FirstKey {
				field = "last"
			}
			return Errf(CodeConflict, field, "shrinking range %s..%s to %s..%s would leave values outside it: %s",
				row.FirstValue, row.LastValue, sp.format(pr.first), sp.format(pr.last), strings.Join(b, ", "))
		}
		if !row.AutoAssign && pr.auto {
			if b, err := t.blockers(p, keep[0], keep[1], nil); err != nil {
				return err
			} else if len(b) > 0 {
				return Errf(CodeConflict, "auto_assign", "range %s..%s cannot become auto_assign while it holds explicitly placed values: %s",
					sp.format(pr.first), sp.format(pr.last), strings.Join(b, ", "))
			}
		}
		oldF, _ := parseKey(row.FirstKey)
		oldL, _ := parseKey(row.LastKey)
		grew = pr.first.cmp(oldF) < 0 || pr.last.cmp(oldL) > 0 || (pr.auto && !row.AutoAssign)
		var others int64
		if err := t.Model(&models.PoolRange{}).Where("pool_id = ? AND id <> ? AND first_key <= ? AND last_key >= ?",
			p.ID, row.ID, keep[1], keep[0]).Count(&others).Error; err != nil {
			return err
		}
		if others > 0 {
			return Errf(CodeConflict, "first", "range %s..%s would overlap another range of pool %q", sp.format(pr.first), sp.format(pr.last), pool)
		}
		res := t.Model(&models.PoolRange{}).Where("id = ? AND version = ?", row.ID, row.Version).Updates(map[string]any{
			"first_key": keep[0], "last_key": keep[1], "first_value": sp.format(pr.first), "last_value": sp.format(pr.last),
			"auto_assign": pr.auto, "version": row.Version + 1})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return Errf(CodeStaleVersion, "version", "range %s changed meanwhile", id)
		}
		if err := t.Where("id = ?", row.ID).Take(row).Error; err != nil {
			return err
		}
		out = rangeOut(sp, row)
		return t.audit("pool.range.update", "pool", pool, before, out)
	})
	if err != nil {
		return nil, err
	}
	if grew {
		a.afterGrowth(ctx, pool)
	}
	return &out, nil
}

// RemoveRange deletes a range that holds no allocation, quarantine or
// declared reservation (admin); otherwise 409 conflict naming them.
func (a *Allocator) RemoveRange(ctx context.Context, pool, id string) error {
	return a.RemoveRangeIf(ctx, pool, id, nil)
}

// RemoveRangeIf is RemoveRange with an If-Match precondition on the range's
// version (412 stale_version when it does not match).
func (a *Allocator) RemoveRangeIf(ctx context.Context, pool, id string, m IfMatch) error {
	return a.write(ctx, func(t *tx) error {
		p, err := t.lockPool(pool)
		if err != nil {
			return err
		}
		row, err := t.rangeByID(p, id)
		if err != nil {
			return err
		}
		if err := m.check("range "+id, row.Version); err != nil {
			return err
		}
		if err := t.purgeExpired(p); err != nil {
			return err
		}
		if b, err := t.blockers(p, row.FirstKey, row.LastKey, nil); err != nil {
			return err
		} else if len(b) > 0 {
			return Errf(CodeConflict, "id", "range %s..%s still holds values: %s", row.FirstValue, row.LastValue, strings.Join(b, ", "))
		}
		before := rangeOut(spaceOf(p), row)
		if err := t.Delete(&models.PoolRange{}, row.ID).Error; err != nil {
			return err
		}
		return t.audit("pool.range.remove", "pool", pool, before, nil)
	})
}

// afterGrowth runs after a pool gained values; set by the lifecycle code to
// complete DPUs that are missing a loopback of that family.
func (a *Allocator) afterGrowth(ctx context.Context, pool string) {
	if growthHook != nil {
		growthHook(a, ctx, pool)
	}
}

// growthHook is set by the lifecycle part of this package (init) so that
// pool growth completes DPUs missing a loopback.
var growthHook func(a *Allocator, ctx context.Context, pool string)

// ParseValue parses a value for the named pool's type and returns its
// canonical text (422 invalid with field "value" when malformed).
func (a *Allocator) ParseValue(ctx context.Context, pool, value string) (string, error) {
	var p models.Pool
	err := a.read(ctx, func(db *gorm.DB) error { return db.Where("name = ?", pool).Take(&p).Error })
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", Errf(CodeNotFound, "", "pool %q does not exist", pool)
	}
	if err != nil {
		return "", err
	}
	v, err := spaceOf(&p).parse(value)
	if err != nil {
		return "", Errf(CodeInvalid, "value", "%v", err)
	}
	return spaceOf(&p).format(v), nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
