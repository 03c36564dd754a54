package allocator

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// CreatedRange is one range a pool load created.
type CreatedRange struct {
	Pool  string `json:"pool"`
	First string `json:"first"`
	Last  string `json:"last"`
}

// Drift is a difference between the pools of a load (a pool file) and
// stored state that the load cannot apply (additive loading never removes
// or changes anything).
type Drift struct {
	Pool    string `json:"pool"`
	Message string `json:"message"`
}

// LoadResult is the answer of POST /api/v1/pools:load.
type LoadResult struct {
	Created []CreatedRange `json:"created"`
	Drift   []Drift        `json:"drift"`
}

// PoolFileDriftSetting is the settings key under which LoadPools keeps the
// drift of the last load, a JSON list of Drift (the console's banner).
const PoolFileDriftSetting = "pool_file_drift"

// loadPool is one pool of a load, validated.
type loadPool struct {
	spec   PoolSpec
	space  space
	ranges []parsedRange
}

// LoadPools applies pools additively (the pools of a NICo pool file,
// package poolfile; admin, and at start with --pools): new pools and
// disjoint new ranges are created; identical ranges are nothing to do; any
// other difference is drift, reported and never applied. The pools are
// validated whole before anything is written (422 invalid naming
// pools[i] and the field), and applied in one transaction. The drift of
// the last load is kept for the console's banner (PoolFileDriftSetting).
func (a *Allocator) LoadPools(ctx context.Context, specs []PoolSpec) (*LoadResult, error) {
	pools := make([]loadPool, len(specs))
	seen := map[string]bool{}
	for i, spec := range specs {
		field := fmt.Sprintf("pools[%d]", i)
		sp, ranges, err := validatePoolSpec(spec)
		if err != nil {
			return nil, fault.WithFieldPrefix(err, field)
		}
		if seen[spec.Name] {
			return nil, fault.Errf(fault.CodeInvalid, field+".name", "pool %q is given twice", spec.Name)
		}
		seen[spec.Name] = true
		pools[i] = loadPool{spec: spec, space: sp, ranges: ranges}
	}
	res := &LoadResult{Created: []CreatedRange{}, Drift: []Drift{}}
	var grown []string
	// Several server processes started with the same --pools file load it
	// at the same moment: the loser of a race to create a pool sees a
	// unique-name conflict. Loading is additive and idempotent, so the load
	// simply runs again and now finds the pool stored (identical ranges are
	// nothing to do).
	var err error
	for attempt := 0; ; attempt++ {
		err = a.loadOnce(ctx, pools, res, &grown)
		if e, ok := fault.AsError(err); ok && e.Code == fault.CodeConflict && attempt < 3 {
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

func (a *Allocator) loadOnce(ctx context.Context, pools []loadPool, res *LoadResult, grownOut *[]string) error {
	var grown []string
	err := a.write(ctx, func(t *tx) error {
		res.Created, res.Drift, grown = []CreatedRange{}, []Drift{}, nil
		names := make([]string, len(pools))
		for i, fp := range pools {
			names[i] = fp.spec.Name
		}
		locked, err := t.lockPools(names...)
		if err != nil {
			return err
		}
		// Every family the load may check, before its first write: a
		// reservation pool's range takes the reserved lock, and a family
		// taken after it would invert the order AddRange takes them in.
		var families []string
		for _, fp := range pools {
			families = append(families, addressFamily(fp.space.typ))
		}
		if err := t.lockFamilies(families...); err != nil {
			return err
		}
		for _, fp := range pools {
			name := fp.spec.Name
			p, exists := locked[name]
			if !exists {
				// A range that overlaps another address pool is drift;
				// the pool is created with the others, or not at all.
				var keep []parsedRange
				for _, r := range fp.ranges {
					o, err := t.otherPoolOverlap(&models.Pool{Name: name}, fp.space, r.first, r.last, 0)
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
					res.Drift = append(res.Drift, Drift{Pool: name, Message: "pool not created: every range of it overlaps another address pool"})
					continue
				}
				if err := t.createPool(fp.spec, fp.space, keep); err != nil {
					return err
				}
				for _, r := range keep {
					res.Created = append(res.Created, CreatedRange{Pool: name, First: fp.space.format(r.first), Last: fp.space.format(r.last)})
				}
				grown = append(grown, name)
				continue
			}
			if p.Type != fp.spec.Type || p.DelegatePrefixLen != fp.spec.DelegatePrefixLen {
				res.Drift = append(res.Drift, Drift{Pool: name, Message: fmt.Sprintf(
					"file says type %s (delegate_prefix_len %d), stored pool is %s (delegate_prefix_len %d): not changed",
					fp.spec.Type, fp.spec.DelegatePrefixLen, p.Type, p.DelegatePrefixLen)})
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
						res.Drift = append(res.Drift, Drift{Pool: name, Message: fmt.Sprintf(
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
				res.Created = append(res.Created, CreatedRange{Pool: name, First: row.FirstValue, Last: row.LastValue})
				grown = append(grown, name)
			}
		}
		b, _ := json.Marshal(res.Drift)
		if err := t.Where("key = ?", PoolFileDriftSetting).Delete(&models.Setting{}).Error; err != nil {
			return err
		}
		return t.Create(&models.Setting{Key: PoolFileDriftSetting, Value: string(b)}).Error
	})
	*grownOut = grown
	return err
}

func overlapDrift(fp loadPool, r parsedRange, o *familyRange) Drift {
	return Drift{Pool: fp.spec.Name, Message: fmt.Sprintf(
		"file range %s..%s overlaps range %s..%s of pool %q (address pools never overlap one another): not created",
		fp.space.format(r.first), fp.space.format(r.last), o.FirstValue, o.LastValue, o.Name)}
}
