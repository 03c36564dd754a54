// Package dbcheck is the database's own consistency check (`ipledger
// check`, docs/operations.md "`ipledger check`"). It reads everything
// in one snapshot — a read-only REPEATABLE READ transaction on
// PostgreSQL, a deferred read transaction on SQLite (WAL) — so it may run
// beside a writing server, and it recomputes from the rows themselves
// what the constraints, triggers and counters claim: a database restored
// from a backup, repaired by hand, or written around the allocator is
// held to the same rules as one the allocator wrote. It reads the
// database directly through the models and takes the value arithmetic
// and binding rules from the allocator, which never imports it.
package dbcheck

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/models"
)

// Rule is one rule the check verifies.
type Rule struct {
	Name string `json:"name"`
	Rule string `json:"rule"`
}

// Rules lists the rules in the order they run.
var Rules = []Rule{
	{"schema_version", "the schema is at the version of this build"},
	{"constraints", "every constraint, index and trigger the migrations create is in the catalog"},
	{"value_held_once", "a value is held once per pool"},
	{"owner_holds_one", "an owner holds one value per pool"},
	{"allocation_state", "an allocation is owned or quarantined, never both"},
	{"stored_values", "each stored sort key and canonical text name the same value of the pool's type"},
	{"range_order", "a range's first value is not above its last"},
	{"ranges_disjoint", "the ranges of one pool never overlap"},
	{"pools_disjoint", "address pools never overlap one another"},
	{"allocation_in_range", "an allocation lies in a range of its pool"},
	{"run_end", "an allocation's run_end is true exactly when the pool's next value is not held"},
	{"range_counts", "range_counts equal a recount of each range's allocations, quarantines and reservations no allocation holds"},
	{"pool_usage", "pool_usage_days equal a recount of the allocation audit events"},
	{"revisions", "numbered audit events have the revisions 1..N, without a gap or a repeat"},
	{"webhook_deliveries", "a webhook delivery carries the revision of its event"},
	{"queued_once", "an event is queued once per webhook"},
	{"reservations", "a reserved loopback lies in an auto_assign=false range of lo-ip or lo-ip-v6"},
	{"dpu_loopbacks", "a DPU's loopbacks are allocated to that DPU"},
	{"machine_tree", "a DPU's host is a host; a host has no host"},
	{"declared_once", "a DPU serial number (in any case) and each reserved loopback are declared for one ExpectedMachine DPU"},
	{"carried_once", "a DPU serial number is carried by one machine, a loopback by one DPU"},
	{"bmc_macs", "a BMC MAC is declared by one ExpectedMachine and carried by one machine (host or DPU), in canonical form"},
	{"token_names", "a token name is given once (but for duplicates kept from before the rule)"},
	{"visible_text", "host names, chassis serial numbers and SKUs hold no control or invisible format character"},
	{"fleet_names", "a machine's stored sort name is the name the console shows it by, in lower case"},
	{"fleet_bindings", "a DPU's stored binding classes equal its bindings computed from its network config and reservations"},
	{"fleet_counts", "fleet_counts equal a recount of the machines by kind, state and binding classes"},
}

// Finding is one thing the check found wrong.
type Finding struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// Result is the outcome of Check: every rule checked, what was found
// wrong (at most checkShown per rule) and how many findings per rule were
// left out.
type Result struct {
	Dialect  string    `json:"dialect"`
	Rules    []Rule    `json:"rules"`
	Findings []Finding `json:"findings"`
	// Omitted counts, per rule, the findings beyond the ones listed.
	Omitted map[string]int `json:"omitted,omitempty"`
	// NotRun says why the rules after the failed ones were not run (a
	// schema of another version: they read this build's tables).
	NotRun string `json:"not_run,omitempty"`
	// Notes are what an operator may want to know that breaks no rule:
	// the console's search for part of a text scanning the fleet because
	// PostgreSQL's pg_trgm is missing (database.SearchIndexStatus).
	Notes []string `json:"notes,omitempty"`
}

// OK reports a database with nothing wrong.
func (r *Result) OK() bool { return len(r.Findings) == 0 }

// Failed reports whether rule found something.
func (r *Result) Failed(rule string) bool {
	for _, f := range r.Findings {
		if f.Rule == rule {
			return true
		}
	}
	return false
}

// checkShown bounds the findings listed per rule.
const checkShown = 20

// checker carries the snapshot and the findings of one Check.
type checker struct {
	q       *gorm.DB
	dialect models.Dialect
	res     *Result
	shown   map[string]int
	// filled by the pool and range pass, read by later rules
	pools  map[int64]*checkPool
	byName map[string]*checkPool
}

func (c *checker) add(rule, format string, args ...any) {
	if c.shown[rule] >= checkShown {
		c.res.Omitted[rule]++
		return
	}
	c.shown[rule]++
	c.res.Findings = append(c.res.Findings, Finding{Rule: rule, Message: fmt.Sprintf(format, args...)})
}

// Check runs every rule of Rules over one snapshot of the database db.
// An error means the check could not run (the database was unreachable,
// a table is missing); what is wrong with the data is in the result.
func Check(ctx context.Context, db *gorm.DB) (*Result, error) {
	dialect := models.DialectOf(db)
	res := &Result{Dialect: string(dialect), Rules: Rules, Findings: []Finding{}, Omitted: map[string]int{}}
	err := db.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		begin := "BEGIN"
		if dialect == models.Postgres {
			begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
		}
		if err := conn.Exec(begin).Error; err != nil {
			return fmt.Errorf("start the check's snapshot: %w", err)
		}
		defer conn.Exec("ROLLBACK")
		// A fresh session on the pinned connection: each rule's chain
		// starts from a clean statement.
		c := &checker{q: conn.Session(&gorm.Session{NewDB: true}), dialect: dialect, res: res, shown: map[string]int{}}
		for i, step := range []func(*checker) error{
			checkSchemaVersion, checkConstraints, checkDuplicates, checkAllocationState, checkPoolsAndRanges,
			checkAllocations, checkPoolUsage, checkRevisions, checkWebhookDeliveries, checkQueuedOnce,
			checkReservations, checkDPULoopbacks, checkMachineTree, checkDeclaredOnce, checkCarriedOnce,
			checkBMCMACs, checkTokenNames, checkVisibleText, checkFleetNames, checkFleetBindings, checkFleetCounts,
		} {
			if err := step(c); err != nil {
				return fmt.Errorf("check (step %d): %w", i, err)
			}
			if i == 0 && res.Failed("schema_version") {
				// The other rules read this build's tables and columns,
				// which a schema of another version lacks or shapes
				// differently: the version is the one finding.
				res.Rules = Rules[:1]
				res.NotRun = fmt.Sprintf("the other %d rules were not run: they read the schema of this build", len(Rules)-1)
				return nil
			}
		}
		st, err := database.SearchIndexStatus(c.q)
		if st != "" {
			res.Notes = append(res.Notes, st)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func checkSchemaVersion(c *checker) error {
	if !c.q.Migrator().HasTable("schema_migrations") {
		return fmt.Errorf("not an ipledger database: it has no schema_migrations table (check the database URL; `ipledger migrate` creates the schema)")
	}
	var v int
	if err := c.q.Raw(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v).Error; err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	switch want := models.SchemaVersion(); {
	case v < want:
		c.add("schema_version", "the schema is at version %d, this build's is %d: run `ipledger migrate` (or start the server) first", v, want)
	case v > want:
		c.add("schema_version", "the schema is at version %d, newer than this build's %d: check it with the release that wrote it", v, want)
	}
	return nil
}

func checkDuplicates(c *checker) error {
	type dup struct {
		Pool  string
		Value string
		N     int64
	}
	var rows []dup
	if err := c.q.Raw(`SELECT p.name AS pool, MIN(a.value) AS value, COUNT(*) AS n FROM allocations a JOIN pools p ON p.id = a.pool_id
		GROUP BY p.name, a.value_key HAVING COUNT(*) > 1 ORDER BY p.name, MIN(a.value_key)`).Scan(&rows).Error; err != nil {
		return err
	}
	for _, d := range rows {
		c.add("value_held_once", "pool %q: %s is stored %d times", d.Pool, d.Value, d.N)
	}
	type own struct {
		Pool      string
		OwnerType string
		OwnerID   string
		N         int64
		Vals      string
	}
	var owners []own
	if err := c.q.Raw(`SELECT p.name AS pool, a.owner_type, a.owner_id, COUNT(*) AS n, MIN(a.value) || ', ' || MAX(a.value) AS vals
		FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE a.owner_id IS NOT NULL
		GROUP BY p.name, a.owner_type, a.owner_id HAVING COUNT(*) > 1 ORDER BY p.name, a.owner_type, a.owner_id`).Scan(&owners).Error; err != nil {
		return err
	}
	for _, o := range owners {
		c.add("owner_holds_one", "pool %q: owner %s/%s holds %d values (%s)", o.Pool, o.OwnerType, o.OwnerID, o.N, o.Vals)
	}
	return nil
}

func checkAllocationState(c *checker) error {
	type row struct {
		Pool, Value, State string
	}
	var rows []row
	if err := c.q.Raw(`SELECT p.name AS pool, a.value, a.state FROM allocations a JOIN pools p ON p.id = a.pool_id
		WHERE NOT ((a.state = 'allocated' AND a.owner_type IS NOT NULL AND a.owner_id IS NOT NULL AND a.quarantined_at IS NULL)
		        OR (a.state = 'quarantined' AND a.owner_type IS NULL AND a.owner_id IS NULL AND a.quarantined_at IS NOT NULL))
		ORDER BY p.name, a.value_key`).Scan(&rows).Error; err != nil {
		return err
	}
	for _, r := range rows {
		c.add("allocation_state", "pool %q: %s is %q but its owner and quarantine time do not say so", r.Pool, r.Value, r.State)
	}
	return nil
}

// diffCounts calls differ, in key order, for every key whose stored count
// differs from its recount (a key missing on one side counts 0 there).
func diffCounts[K comparable](recount, stored map[K]int64, compare func(a, b K) int, differ func(k K, stored, recount int64)) {
	keys := make([]K, 0, len(recount)+len(stored))
	for k := range recount {
		keys = append(keys, k)
	}
	for k := range stored {
		if _, ok := recount[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compare)
	for _, k := range keys {
		if stored[k] != recount[k] {
			differ(k, stored[k], recount[k])
		}
	}
}

// deref is the string s points at, "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// compareStrings orders keys made of strings field by field.
func compareStrings(a, b []string) int {
	for i := range a {
		if c := cmp.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}
