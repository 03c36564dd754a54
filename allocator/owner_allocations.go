package allocator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// Owner allocations (docs/api.md "Owner allocations"): everything one
// owner needs from several pools, taken or given back in one transaction.
// A Kubernetes controller or a script provisioning an endpoint asks for
// "a value of pod-v4 and this value of endpoint-v6" and gets both or
// neither; it gives them back with one call.
//
// Both operations lock every pool they touch at once, in name order, as
// the other multi-pool writes do, and then run the single-pool rules
// (allocate, release) pool by pool inside that transaction, so each value
// is decided, checked and audited exactly as POST or DELETE
// /api/v1/pools/{name}/allocations would, and a refusal anywhere rolls
// the whole request back.

// MaxOwnerPools is the most pools one owner request may name: an owner
// takes one value from each of a handful of pools, and the bound keeps a
// request from locking an unbounded list.
const MaxOwnerPools = 256

// OwnerPoolRequest is one entry of an owner request: a pool and,
// optionally, the exact value asked for (as Allocate's requested value).
type OwnerPoolRequest struct {
	Pool  string
	Value string
}

// ownerField is the JSON path of entry i ("pools[i]"), or of its value.
func ownerField(i int, value bool) string {
	if value {
		return fmt.Sprintf("pools[%d].value", i)
	}
	return fmt.Sprintf("pools[%d]", i)
}

// AllocateForOwner gives owner one value of each requested pool, in one
// transaction, all or nothing, and returns the allocations in request
// order with whether each was created now. Each entry is decided as
// Allocate decides it: a value the owner already holds in that pool is
// returned (a requested value that differs is 409 conflict), a requested
// value must be requestable (409 not_available saying why), an automatic
// one is the lowest free value (409 pool_exhausted). Refusals name the
// entry: pools[i] for the pool (an empty name, an unknown pool, a pool
// listed twice — the later occurrence — are 422 invalid; exhaustion),
// pools[i].value for the value (malformed or of the wrong family 422
// invalid; not available, conflict). Every 422 of the request is found
// before anything is allocated; a 409 is the first entry's, in request
// order, that meets one; nothing is written either way.
func (a *Allocator) AllocateForOwner(ctx context.Context, owner Owner, reqs []OwnerPoolRequest) ([]Allocation, []bool, error) {
	if err := owner.Validate(); err != nil {
		return nil, nil, err
	}
	if len(reqs) == 0 {
		return nil, nil, fault.Errf(fault.CodeInvalid, "pools", "pools must list at least one pool")
	}
	if len(reqs) > MaxOwnerPools {
		return nil, nil, fault.Errf(fault.CodeInvalid, "pools", "pools lists %d pools; at most %d fit in one request", len(reqs), MaxOwnerPools)
	}
	names := make([]string, len(reqs))
	seen := make(map[string]int, len(reqs))
	for i, r := range reqs {
		if strings.TrimSpace(r.Pool) == "" {
			return nil, nil, fault.Errf(fault.CodeInvalid, ownerField(i, false), "%s names no pool", ownerField(i, false))
		}
		if j, dup := seen[r.Pool]; dup {
			return nil, nil, fault.Errf(fault.CodeInvalid, ownerField(i, false), "pool %q is already listed at pools[%d]; an owner holds one value per pool", r.Pool, j)
		}
		seen[r.Pool], names[i] = i, r.Pool
	}
	var (
		out     []Allocation
		created []bool
	)
	err := a.write(ctx, func(t *tx) error {
		pools, err := t.lockPools(names...)
		if err != nil {
			return err
		}
		// 422 first, for the whole request: unknown pools, then values
		// that do not parse in their pool's space.
		for i, r := range reqs {
			if pools[r.Pool] == nil {
				return fault.Errf(fault.CodeInvalid, ownerField(i, false), "pool %q does not exist", r.Pool)
			}
		}
		for i, r := range reqs {
			if strings.TrimSpace(r.Value) == "" {
				continue
			}
			if _, err := spaceOf(pools[r.Pool]).parse(r.Value); err != nil {
				return fault.Errf(fault.CodeInvalid, ownerField(i, true), "pool %q: %v", r.Pool, err)
			}
		}
		out, created = make([]Allocation, len(reqs)), make([]bool, len(reqs))
		for i, r := range reqs {
			p := pools[r.Pool]
			row, c, err := t.allocate(p, owner, r.Value)
			if err != nil {
				return ownerEntryError(err, i, p.Name, strings.TrimSpace(r.Value) != "")
			}
			out[i], created[i] = allocationOut(p.Name, row), c
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, created, nil
}

// ownerEntryError re-aims a refusal of the single-pool rules at entry i
// of an owner request: its field becomes pools[i].value when the entry
// asked for a value and the refusal is about it, pools[i] otherwise, and
// its message names the pool when it did not already.
func ownerEntryError(err error, i int, pool string, requested bool) error {
	e, ok := fault.AsError(err)
	if !ok {
		return err
	}
	msg := e.Message
	if !strings.Contains(msg, fmt.Sprintf("%q", pool)) {
		msg = fmt.Sprintf("pool %q: %s", pool, msg)
	}
	return fault.Errf(e.Code, ownerField(i, requested && e.Field == "value"), "%s", msg)
}

// ownerHolding is a value an owner holds, with its locked pool.
type ownerHolding struct {
	p   *models.Pool
	row models.Allocation
}

// ReleaseOwner gives back every value owner holds, in every pool, in one
// transaction, and returns what it released (by pool name). An owner
// that holds nothing is a no-op. A value that a DPU's network config
// carries is never released by hand (as Release): 409 conflict naming
// the DPU, and nothing of the owner's is released. Quarantined values
// are no one's and stay.
//
// The pools are found first and then locked, all at once in name order;
// what the owner holds is read again under the locks. A value allocated
// to the owner meanwhile in a pool not among them was allocated after
// this release, and stays.
func (a *Allocator) ReleaseOwner(ctx context.Context, owner Owner) ([]Allocation, error) {
	if err := owner.Validate(); err != nil {
		return nil, err
	}
	var out []Allocation
	err := a.write(ctx, func(t *tx) error {
		out = nil
		var names []string
		if err := t.Raw(`SELECT DISTINCT p.name FROM allocations a JOIN pools p ON p.id = a.pool_id
			WHERE a.owner_type = ? AND a.owner_id = ? AND a.state = ?`, owner.Type, owner.ID, models.StateAllocated).
			Scan(&names).Error; err != nil {
			return err
		}
		if len(names) == 0 {
			return nil
		}
		pools, err := t.lockPools(names...)
		if err != nil {
			return err
		}
		var held []ownerHolding
		for _, name := range slices.Sorted(maps.Keys(pools)) {
			p := pools[name]
			var rows []models.Allocation
			if err := t.Where("pool_id = ? AND owner_type = ? AND owner_id = ? AND state = ?", p.ID, owner.Type, owner.ID, models.StateAllocated).
				Limit(1).Find(&rows).Error; err != nil {
				return err
			}
			if len(rows) == 0 {
				continue // released meanwhile
			}
			if err := t.refuseLiveLoopback(p, rows[0].Value); err != nil {
				if e, ok := fault.AsError(err); ok {
					return fault.Errf(e.Code, "", "owner %s: %s; nothing was released", owner, e.Message)
				}
				return err
			}
			held = append(held, ownerHolding{p, rows[0]})
		}
		for _, h := range held {
			v, err := parseKey(h.row.ValueKey)
			if err != nil {
				return err
			}
			if err := t.release(h.p, v, owner); err != nil {
				return err
			}
			out = append(out, allocationOut(h.p.Name, &h.row))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
