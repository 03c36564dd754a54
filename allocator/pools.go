package allocator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// The pools of DPU loopbacks (docs/pools.md): lo-ip is required for DPU
// ingestion, lo-ip-v6 is optional. ExpectedDpu reservations refer to them.
const (
	PoolLoopbackV4 = "lo-ip"
	PoolLoopbackV6 = "lo-ip-v6"
)

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
	IfMatch txn.IfMatch `json:"-"`
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
		return parsedRange{}, fault.Errf(fault.CodeInvalid, field+".first", "%v", err)
	}
	l, err := s.parse(r.Last)
	if err != nil {
		return parsedRange{}, fault.Errf(fault.CodeInvalid, field+".last", "%v", err)
	}
	if f.cmp(l) > 0 {
		return parsedRange{}, fault.Errf(fault.CodeInvalid, field+".last", "range is reversed: last %s is below first %s", s.format(l), s.format(f))
	}
	if s.holdsMapped(f, l) {
		return parsedRange{}, fault.Errf(fault.CodeInvalid, field, "range %s..%s includes IPv4-mapped IPv6 addresses (::ffff:0:0/96), which are rejected everywhere",
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
	if !ident.ValidPoolName(spec.Name) {
		return space{}, nil, fault.Errf(fault.CodeInvalid, "name", "pool name %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", spec.Name)
	}
	typ, ok := ParsePoolType(spec.Type)
	if !ok {
		return space{}, nil, fault.Errf(fault.CodeInvalid, "type", "unknown pool type %q: want ipv4, ipv6, ipv6prefix or integer", spec.Type)
	}
	if typ == TypeIPv6Prefix {
		if spec.DelegatePrefixLen < 1 || spec.DelegatePrefixLen > 128 {
			return space{}, nil, fault.Errf(fault.CodeInvalid, "delegate_prefix_len", "an ipv6prefix pool needs delegate_prefix_len between 1 and 128, got %d", spec.DelegatePrefixLen)
		}
	} else if spec.DelegatePrefixLen != 0 {
		return space{}, nil, fault.Errf(fault.CodeInvalid, "delegate_prefix_len", "delegate_prefix_len applies only to ipv6prefix pools, not %s", typ)
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
				return space{}, nil, fault.Errf(fault.CodeInvalid, field, "range %s..%s overlaps ranges[%d]", sp.format(pr.first), sp.format(pr.last), j)
			}
		}
		rs = append(rs, pr)
	}
	return sp, rs, nil
}

func validateGateway(typ PoolType, gw string) error {
	a, err := parseAddr(strings.TrimSpace(gw))
	if err != nil {
		return fault.Errf(fault.CodeInvalid, "gateway", "%v", err)
	}
	switch typ {
	case TypeIPv4:
		if !a.Is4() {
			return fault.Errf(fault.CodeInvalid, "gateway", "gateway %q of an ipv4 pool must be an IPv4 address", gw)
		}
	case TypeIPv6, TypeIPv6Prefix:
		if !a.Is6() {
			return fault.Errf(fault.CodeInvalid, "gateway", "gateway %q of an %s pool must be an IPv6 address", gw, typ)
		}
	default:
		return fault.Errf(fault.CodeInvalid, "gateway", "an integer pool has no gateway")
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
		if e, ok := fault.AsError(err); ok && e.Code == fault.CodeConflict && e.Field == "" {
			return nil, fault.Errf(fault.CodeConflict, "name", "pool %q already exists", spec.Name)
		}
		return nil, err
	}
	// A new pool counts as growth (docs/api.md: creating lo-ip-v6
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
		return fault.Errf(fault.CodeConflict, "name", "pool %q already exists", spec.Name)
	}
	gw := ""
	if spec.Gateway != "" {
		g, _ := parseAddr(strings.TrimSpace(spec.Gateway))
		gw = g.String()
	}
	// The family's lock before the pool's row: a load creating a pool of
	// this name holds the family when it inserts its row.
	if fam := addressFamily(sp.typ); fam != "" {
		if err := t.lockFamilies(fam); err != nil {
			return err
		}
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
		return nil, fault.Errf(fault.CodeConflict, "first", "range %s..%s overlaps range %d (%s..%s) of pool %q",
			sp.format(r.first), sp.format(r.last), o.ID, o.FirstValue, o.LastValue, p.Name)
	}
	if err := t.refuseOverlap(p, sp, r.first, r.last, 0, "first"); err != nil {
		return nil, err
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
		return nil, fault.Errf(fault.CodeNotFound, "", "pool %q does not exist", name)
	}
	if err != nil {
		return nil, err
	}
	return a.poolOut(ctx, &p)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
