package allocator

import (
	"database/sql"
	"fmt"

	"github.com/ipledger/ipledger/models"
)

// freePick is a value chosen for a new allocation and whether it ends a
// run of held values once the batch's rows are in.
type freePick struct {
	v       u128
	runEnd  bool
	gapNext *u128 // the held value that closed v's free run when it was read; nil: none
}

// gapColumns are three index seeks that describe the free values from a
// value @from of pool @pool on: the lowest held (or quarantined) value at
// or above @from ("next"), the lowest run end at or above @from ("run
// end"), and the lowest held value above that run end ("after"). When
// @from is held, the free values after its run are run end + 1 .. after -
// 1; otherwise they are @from .. next - 1. Each seek uses the unique index
// (pool_id, value_key) or the partial index allocations_run_end, so the
// cost does not grow with the number of allocations.
func gapColumns(pool, from string) string {
	runEnd := `(SELECT value_key FROM allocations WHERE pool_id = ` + pool + ` AND run_end AND value_key >= ` + from + ` ORDER BY value_key LIMIT 1)`
	return `(SELECT value_key FROM allocations WHERE pool_id = ` + pool + ` AND value_key >= ` + from + ` ORDER BY value_key LIMIT 1), ` +
		runEnd + `, (SELECT a2.value_key FROM allocations a2 WHERE a2.pool_id = ` + pool + ` AND a2.value_key > ` + runEnd + ` ORDER BY a2.value_key LIMIT 1)`
}

// autoRangesQuery lists p's auto_assign ranges in order, each with the
// gap columns from its first value: the first free values of every range
// in one round trip.
var autoRangesQuery = `SELECT r.first_key, r.last_key, ` + gapColumns("r.pool_id", "r.first_key") +
	` FROM pool_ranges r WHERE r.pool_id = @pool AND r.auto_assign = @auto ORDER BY r.first_key`

// gapQuery is the gap columns from one value.
var gapQuery = `SELECT ` + gapColumns("@pool", "@from")

// gap is where the free values from a value start and what closes them.
type gap struct {
	start u128  // first free value (valid unless none)
	next  *u128 // the held value right after the free run; nil: none up to the end of the space
	none  bool  // no free value from there to last
}

// gapOf interprets the gap columns read from c for a range ending at last.
func gapOf(sp space, c, last u128, cols [3]sql.NullString) (gap, error) {
	var v [3]*u128
	for i, s := range cols {
		if s.Valid && s.String != "" {
			k, err := parseKey(s.String)
			if err != nil {
				return gap{}, err
			}
			v[i] = &k
		}
	}
	next, runEnd, after := v[0], v[1], v[2]
	if next == nil || *next != c {
		return gap{start: c, next: next}, nil
	}
	if runEnd == nil {
		return gap{}, fmt.Errorf("value %s is taken but no run end follows it", sp.format(c))
	}
	if runEnd.cmp(last) >= 0 {
		return gap{none: true}, nil
	}
	start, _ := sp.next(*runEnd)
	return gap{start: start, next: after}, nil
}

// lowestFreeN finds the n lowest values of p's auto_assign ranges that are
// not held, quarantined or declared for an ExpectedDpu (fewer when the
// ranges run out), in ascending order, with each value's run-end flag
// computed for when they are all inserted. It reads every range's first
// gap in one query (autoRangesQuery) and crosses further runs of held
// values with one query each (gapQuery), plus one ExpectedDpu look-up per
// chunk of candidates on loopback pools, whatever the number of
// allocations.
func (t *tx) lowestFreeN(p *models.Pool, n int) ([]freePick, error) {
	if n <= 0 {
		return nil, nil
	}
	rows, err := t.Raw(autoRangesQuery, map[string]any{"pool": p.ID, "auto": true}).Rows()
	if err != nil {
		return nil, err
	}
	var ranges []rangeGap
	for rows.Next() {
		var r rangeGap
		if err := rows.Scan(&r.first, &r.last, &r.cols[0], &r.cols[1], &r.cols[2]); err != nil {
			rows.Close()
			return nil, err
		}
		ranges = append(ranges, r)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return pickFree(p, n, ranges, gormGaps{t: t, p: p})
}

// rangeGap is one auto_assign range as autoRangesQuery returns it: its
// bounds and the gap columns from its first value.
type rangeGap struct {
	first, last string
	cols        [3]sql.NullString
}

// gapReader is what pickFree asks the database beyond the first gap of
// each range: the gap columns from a value, and which candidate keys an
// ExpectedDpu declares.
type gapReader interface {
	gapFrom(c u128) ([3]sql.NullString, error)
	declaredAmong(vals []u128) (map[string]bool, error)
}

type gormGaps struct {
	t *tx
	p *models.Pool
}

func (g gormGaps) gapFrom(c u128) (cols [3]sql.NullString, err error) {
	err = g.t.Raw(gapQuery, map[string]any{"pool": g.p.ID, "from": c.key()}).Row().Scan(&cols[0], &cols[1], &cols[2])
	return cols, err
}

func (g gormGaps) declaredAmong(vals []u128) (map[string]bool, error) {
	col := reservationColumn(g.p.Name)
	if col == "" {
		return nil, nil
	}
	var found []string
	if err := g.t.Raw(`SELECT `+col+` FROM expected_dpus WHERE `+col+` IN ?`, keysOf(vals)).Scan(&found).Error; err != nil {
		return nil, err
	}
	return setOf(found), nil
}

func keysOf(vals []u128) []string {
	keys := make([]string, len(vals))
	for i, v := range vals {
		keys[i] = v.key()
	}
	return keys
}

func setOf(keys []string) map[string]bool {
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out
}

// pickFree is lowestFreeN's walk over the ranges read by autoRangesQuery.
func pickFree(p *models.Pool, n int, ranges []rangeGap, db gapReader) ([]freePick, error) {
	sp := spaceOf(p)
	type pick struct {
		v       u128
		gapNext *u128 // the held value that closes v's free run, if any
	}
	var out []pick
	for _, r := range ranges {
		c, err := parseKey(r.first)
		if err != nil {
			return nil, err
		}
		last, err := parseKey(r.last)
		if err != nil {
			return nil, err
		}
		cols := r.cols
		for guard := 0; len(out) < n && guard < 100000; guard++ {
			g, err := gapOf(sp, c, last, cols)
			if err != nil {
				return nil, fmt.Errorf("pool %q: %w", p.Name, err)
			}
			if g.none {
				break
			}
			// Every value from g.start to gapEnd is free; skip the declared ones.
			gapEnd := last
			if g.next != nil && g.next.cmp(last) <= 0 {
				gapEnd, _ = sp.prev(*g.next)
			}
			c = g.start
			for len(out) < n {
				cands := []u128{c}
				for len(cands) < n-len(out) && cands[len(cands)-1].cmp(gapEnd) < 0 {
					v, _ := sp.next(cands[len(cands)-1])
					cands = append(cands, v)
				}
				declared, err := db.declaredAmong(cands)
				if err != nil {
					return nil, err
				}
				for _, v := range cands {
					if !declared[v.key()] {
						out = append(out, pick{v: v, gapNext: g.next})
					}
				}
				end := cands[len(cands)-1]
				if end.cmp(gapEnd) >= 0 {
					break
				}
				c, _ = sp.next(end)
			}
			if len(out) >= n || gapEnd.cmp(last) >= 0 {
				break
			}
			// More are needed: go on after the held value closing this gap.
			c = *g.next
			if cols, err = db.gapFrom(c); err != nil {
				return nil, err
			}
		}
		if len(out) >= n {
			break
		}
	}
	if len(out) > n {
		out = out[:n]
	}
	chosen := make(map[u128]bool, len(out))
	for _, pk := range out {
		chosen[pk.v] = true
	}
	picks := make([]freePick, len(out))
	for i, pk := range out {
		nx, ok := sp.next(pk.v)
		// The value after a new one is held once the batch is in if it is
		// new too, or the held value that closed pk's free run.
		picks[i] = freePick{v: pk.v, runEnd: !ok || !(chosen[nx] || (pk.gapNext != nil && *pk.gapNext == nx)), gapNext: pk.gapNext}
	}
	return picks, nil
}
