package allocator

import "strings"

// guessedInsertSharedSQL is the guarded INSERT of groupcommit_guess.go for the guessed
// batches of two or more pools (a commit group, groupcommit_shared.go): every
// pool's guard is evaluated, and its rows written, on their own, so the
// statement writes the pools whose guess holds and nothing for the others.
// One statement for several pools runs the INSERT triggers once for all of
// them. A batch alone uses guessedInsertOneSQL, the same guard with scalar
// parameters, which costs the database less; the guard tests run both.
//
// Parameters, one element per pool (in the group's order, its ordinality
// j): $1 pool ids, $2 allocated_at, $5/$6 the offset and length of the
// pool's window in $3/$4 (the windows' keys and values, groupGuess.window,
// one after the other), $7/$8 the guessed range's first and last keys, $9
// the largest index of the window (1-based) the value before the lowest
// free one may have, $10 the number of new owners, $11 the events' object
// id prefix ("pool/"), $12 the column of expected_dpus declaring the
// pool's values ("" for none). One element per new owner, pool after pool
// and in request order within a pool: $13 the pool's j, $14 the owner's
// index in its pool's batch (1-based), $15/$16 owner type and id, $17/$18
// the audit event's actor and request id, $19/$20 its after_json split
// around the value, $21 the actor's role ("" for none), $22 its names
// (audit_names.go; "" for none).
//
// Per pool, f finds the lowest free value F of the guessed range as the
// gap search does — the range's first value if it is free, else the value
// after the end of the run of held values starting there (run-end flags
// are exact) — as s1, the index in the pool's window (wk, wv: its slice of
// $3/$4, so that an index past the window is NULL as in an array of its
// own) of the value before F. g holds the guard ok of each pool; F and the
// n-1 values after it are the pool's new values if ok.
var guessedInsertSharedSQL = guessedInsertShared("")

// guessedInsertShared is guessedInsertSharedSQL with the guard clause
// named drop left out (tests: guardClauseNames; "" for none).
func guessedInsertShared(drop string) string {
	return `WITH p AS (SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $5::int[], $6::int[],
    $7::text[], $8::text[], $9::int[], $10::int[], $11::text[], $12::text[])
  WITH ORDINALITY AS p(pid, at, wo, wl, rf, rl, m, n, oprefix, dcol, j)),
f AS MATERIALIZED (SELECT p.*, ($3::text[])[p.wo + 1 : p.wo + p.wl] AS wk, ($4::text[])[p.wo + 1 : p.wo + p.wl] AS wv,
    ` + guessS1("p.pid", "p.rf", "($3::text[])[p.wo + 1 : p.wo + p.wl]") + ` AS s1
  FROM p),
g AS MATERIALIZED (SELECT f.j, f.pid, f.at, f.n, f.oprefix, f.wk, f.wv, f.s1, x.gap, (
  ` + guardSQL(sharedGuard, drop) + `
  ) IS TRUE AS ok
  FROM f CROSS JOIN LATERAL (SELECT ` + gFirstFrom("f.pid", "f.wk[f.s1 + 1]") + ` AS gap) x),
o AS (SELECT * FROM unnest($13::int[], $14::int[], $15::text[], $16::text[], $17::text[], $18::text[], $19::text[], $20::text[],
    $21::text[], $22::text[])
  WITH ORDINALITY AS o(j, i, ot, oi, ac, rid, pre, suf, ar, nm, ord)),
ins AS (
  INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
  SELECT g.pid, g.wk[g.s1 + o.i], g.wv[g.s1 + o.i], 'allocated', o.ot, o.oi,
    o.i = g.n AND COALESCE(g.gap <> g.wk[g.s1 + o.i + 1], true), g.at
  FROM o JOIN g ON g.j = o.j
  WHERE g.ok
  ORDER BY o.ord
  RETURNING pool_id, id, value_key, value, run_end),
upd AS (UPDATE allocations a SET run_end = false FROM g
  WHERE g.ok AND a.pool_id = g.pid AND a.value_key = g.wk[g.s1] AND a.run_end),
aud AS (INSERT INTO audit_events (at, actor, actor_role, action, object_type, object_id, request_id, after_json, names_json)
  SELECT g.at, o.ac, NULLIF(o.ar, ''), ` + allocationCreateSQL + `, g.oprefix || g.wv[g.s1 + o.i], o.rid,
    o.pre || g.wv[g.s1 + o.i] || o.suf, NULLIF(o.nm, '')
  FROM o JOIN g ON g.j = o.j
  WHERE g.ok
  ORDER BY o.ord)
SELECT pool_id, id, value_key, value, run_end FROM ins`
}

// guessedInsertOneSQL is the guarded INSERT of a group of one pool whose values ExpectedDpus
// may declare in column col ("" for none). Parameters: $1 pool id, $2
// allocated_at, $3/$4 the window's keys and values (groupGuess.window), $5/$6
// the new owners in request order, $7/$8/$9/$10 their audit events'
// actors, request ids, and after_json split around the value, $11 the
// events' object id prefix ("pool/"), $12/$13 the guessed range's first
// and last keys, $14 the largest index of the window (1-based) the value
// before the lowest free one may have, $15 the actors' roles ("" for
// none), $16 the events' names (audit_names.go; "" for none).
//
// f finds the lowest free value F of the range as the gap search does: the
// range's first value if it is free, else the value after the end of the
// run of held values starting there (run-end flags are exact). s1 is the
// index of the value before F in the window; F and the n-1 values after it
// are the batch's, if the guard g holds.
func guessedInsertOneSQL(col, drop string) string {
	firstFrom := func(from string) string { return gFirstFrom("$1", from) }
	g := guardTerms{pid: "$1", rf: "$12::text", rl: "$13::text", maxS1: "$14::int", n: "cardinality($5::text[])",
		wk: "($3::text[])", declared: declaredNone(col, "($3::text[])", "cardinality($5::text[])")}
	return `WITH f AS MATERIALIZED (SELECT ` + guessS1("$1", "$12::text", "$3::text[]") + ` AS s1),
g AS MATERIALIZED (SELECT f.s1, x.gap, (
  ` + guardSQL(g, drop) + `
  ) IS TRUE AS ok
  FROM f CROSS JOIN LATERAL (SELECT ` + firstFrom("($3::text[])[f.s1 + 1]") + ` AS gap) x),
ins AS (
  INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
  SELECT $1, ($3::text[])[g.s1 + u.i::int], ($4::text[])[g.s1 + u.i::int], 'allocated', u.ot, u.oi,
    u.i = cardinality($5::text[]) AND COALESCE(g.gap <> ($3::text[])[g.s1 + u.i::int + 1], true), $2
  FROM g, unnest($5::text[], $6::text[]) WITH ORDINALITY AS u(ot, oi, i)
  WHERE g.ok
  RETURNING id, value_key, value, run_end),
upd AS (UPDATE allocations a SET run_end = false FROM g
  WHERE g.ok AND a.pool_id = $1 AND a.value_key = ($3::text[])[g.s1] AND a.run_end),
aud AS (INSERT INTO audit_events (at, actor, actor_role, action, object_type, object_id, request_id, after_json, names_json)
  SELECT $2, e.ac, NULLIF(e.ar, ''), ` + allocationCreateSQL + `, $11::text || ($4::text[])[g.s1 + e.i::int], e.rid,
    e.pre || ($4::text[])[g.s1 + e.i::int] || e.suf, NULLIF(e.nm, '')
  FROM g, unnest($7::text[], $8::text[], $9::text[], $10::text[], $15::text[], $16::text[]) WITH ORDINALITY AS e(ac, rid, pre, suf, ar, nm, i)
  WHERE g.ok)
SELECT id, value_key, value, run_end FROM ins`
}

// gFirstFrom is the lowest value of pool pid at or after from, gRunEndFrom
// the lowest run end there (the seeks of the gap search).
func gFirstFrom(pid, from string) string {
	return `(SELECT value_key FROM allocations WHERE pool_id = ` + pid + ` AND value_key >= ` + from + ` ORDER BY value_key LIMIT 1)`
}

func gRunEndFrom(pid, from string) string {
	return `(SELECT value_key FROM allocations WHERE pool_id = ` + pid + ` AND run_end AND value_key >= ` + from + ` ORDER BY value_key LIMIT 1)`
}

// The guard of the guessed INSERT, one text for both statements: each
// clause is a named condition over the terms the statement binds, so that
// a test can leave any one out and watch a check fail
// (TestGroupCommitGuardClausesAreNeeded).

// guardTerms are the SQL expressions a guard is written over: the pool's
// id, the guessed range's first and last keys, the largest index the value
// before the lowest free one may have in the window, the number of new
// values, the window's keys (an array), and the declared-values clause.
// s1 (the window index of the value before the lowest free one) and gap
// (the lowest held value at or after it) are always f.s1 and x.gap.
type guardTerms struct {
	pid, rf, rl, maxS1, n, wk, declared string
}

// sharedGuard is the guard's terms in guessedInsertSharedSQL.
var sharedGuard = guardTerms{pid: "f.pid", rf: "f.rf", rl: "f.rl", maxS1: "f.m", n: "f.n", wk: "f.wk",
	declared: `CASE f.dcol` + declaredCase("loopback_ip_key") + declaredCase("loopback_ip_v6_key") + `
    ELSE true END`}

func declaredCase(col string) string {
	return `
    WHEN '` + col + `' THEN ` + declaredNone(col, "f.wk", "f.n")
}

// declaredNone says no ExpectedDpu declares one of the n values from the
// lowest free one in column col (true when col is "").
func declaredNone(col, wk, n string) string {
	if col == "" {
		return "true"
	}
	return `NOT EXISTS (SELECT 1 FROM expected_dpus WHERE ` + col + ` = ANY(` + wk + `[f.s1 + 1 : f.s1 + ` + n + `]))`
}

// guardClause is one condition of the guard.
type guardClause struct {
	name string
	sql  func(g guardTerms) string
}

// guardClauses are the guard's conditions, all needed for the guessed
// values to be what the general gap search would pick.
var guardClauses = []guardClause{
	// The value before the lowest free one is in the window's first part
	// (so the free value has a value before it, whose run end clears).
	{"window", func(g guardTerms) string { return `f.s1 BETWEEN 1 AND ` + g.maxS1 }},
	// Every auto range before the guessed one is full.
	{"earlier ranges full", func(g guardTerms) string {
		return `NOT EXISTS (SELECT 1 FROM pool_ranges r WHERE r.pool_id = ` + g.pid + ` AND r.auto_assign AND r.first_key < ` + g.rf + `
    AND NOT COALESCE(` + gFirstFrom(g.pid, "r.first_key") + ` = r.first_key AND ` + gRunEndFrom(g.pid, "r.first_key") + ` >= r.last_key, false))`
	}},
	// The guessed range is unchanged and still auto_assign.
	{"range unchanged", func(g guardTerms) string {
		return `EXISTS (SELECT 1 FROM pool_ranges r WHERE r.pool_id = ` + g.pid + ` AND r.auto_assign AND r.first_key = ` + g.rf + ` AND r.last_key = ` + g.rl + `)`
	}},
	// The n values from the lowest free one are in the range …
	{"values in range", func(g guardTerms) string { return g.wk + `[f.s1 + ` + g.n + `] <= ` + g.rl }},
	// … and free: the next held value lies above them.
	{"values free", func(g guardTerms) string {
		return `(x.gap IS NULL OR x.gap > ` + g.wk + `[f.s1 + ` + g.n + `])`
	}},
	// No ExpectedDpu declares one of them.
	{"not declared", func(g guardTerms) string { return g.declared }},
}

// guardSQL is the guard over g: its clauses joined by AND, without the one
// named drop (tests; "" keeps them all). A dropped clause is still sent,
// always true, so that the statement binds the same parameters.
func guardSQL(g guardTerms, drop string) string {
	var parts []string
	for _, c := range guardClauses {
		if c.name == drop {
			parts = append(parts, `CASE WHEN `+c.sql(g)+` THEN true ELSE true END`)
			continue
		}
		parts = append(parts, c.sql(g))
	}
	return strings.Join(parts, "\n  AND ")
}

// guessS1 is the window index (in the array wk) of the value before the
// lowest free value of pool pid's range starting at rf, found as the gap
// search does: the range's first value if it is free, else the value after
// the end of the run of held values starting there (run-end flags are
// exact).
func guessS1(pid, rf, wk string) string {
	return `CASE WHEN COALESCE(` + gFirstFrom(pid, rf) + ` = ` + rf + `, false)
    THEN array_position(` + wk + `, ` + gRunEndFrom(pid, rf) + `)
    ELSE array_position(` + wk + `, ` + rf + `) - 1 END`
}
