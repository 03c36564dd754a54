package dbcheck

// Tests of Check: a site written through the allocator passes every rule;
// each rule is then broken around the allocator (raw SQL, with the
// constraint or trigger in the way dropped from the test's own database)
// and Check must name it. Every case runs on SQLite and PostgreSQL.

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/internal/testkit/sitekit"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/webhook"
)

// checkSite fills a site over db with a bit of everything the rules look
// at: address, prefix and integer pools with runs and gaps, reservations
// (one held by its DPU, two that no DPU holds yet) and ingested DPUs (one
// reserved, some automatic, one quarantined by a force delete), a webhook
// with queued deliveries, and numbered revisions.
func checkSite(t *testing.T, db *gorm.DB) *sitekit.Site {
	t.Helper()
	s := sitekit.New(t, db, allocator.Options{})
	s.Pool(allocator.PoolLoopbackV4, "ipv4", 0, sitekit.Range("10.0.0.1", "10.0.0.9", true), sitekit.Range("10.0.0.100", "10.0.0.199", false))
	s.Pool(allocator.PoolLoopbackV6, "ipv6", 0, sitekit.Range("fd00::1", "fd00::ff", true), sitekit.Range("fd00:1::1", "fd00:1::ff", false))
	s.Pool("pfx", "ipv6prefix", 56, sitekit.Range("2001:db8::", "2001:db8:0:ff00::", true))
	s.Pool("vlan", "integer", 0, sitekit.Range("100", "199", true), sitekit.Range("300", "399", false))
	s.Pool("spare", "integer", 0, sitekit.Range("1000", "1100", false))
	wantTrue := true
	hooks := webhook.New(s.DB, webhook.Options{})
	fd := feed.New(s.DB, feed.Options{})
	fd.SetDeliveries(hooks)
	if _, err := hooks.CreateWebhook(s.Ctx, webhook.WebhookSpec{Name: "sink", URL: "http://127.0.0.1:9/", Secret: "check-test-secret-0123", Actions: []string{"*"}, Enabled: &wantTrue}); err != nil {
		t.Fatal(err)
	}
	vm := func(id string) allocator.Owner { return allocator.Owner{Type: "vm", ID: id} }
	for _, p := range []string{"pfx", "vlan"} {
		for i := 0; i < 6; i++ {
			if _, _, err := s.A.Allocate(s.Ctx, p, vm(p+string(rune('a'+i))), ""); err != nil {
				t.Fatalf("allocate %s: %v", p, err)
			}
		}
		al, err := s.A.ListAllocations(s.Ctx, p, allocator.AllocationFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.A.Release(s.Ctx, p, al.Items[2].Value, vm(p+"c")); err != nil {
			t.Fatalf("release: %v", err)
		}
	}
	if _, _, err := s.A.Allocate(s.Ctx, "vlan", vm("named"), "350"); err != nil {
		t.Fatal(err)
	}
	s.ExpectedMachine("1a:1b:1c:1d:1e:01", sitekit.DPU{Serial: "MT1", V4: "10.0.0.100"})
	s.ExpectedMachine("1a:1b:1c:1d:1e:09", sitekit.DPU{Serial: "MT8", V4: "10.0.0.120", V6: "fd00:1::20"})
	s.Report("1a:1b:1c:1d:1e:01", "MT1", "MT2")
	s.Report("1a:1b:1c:1d:1e:02", "MT3")
	if _, err := s.A.DeleteMachine(s.Ctx, allocator.HostMachineID("1a:1b:1c:1d:1e:02"), true); err != nil {
		t.Fatalf("force delete: %v", err)
	}
	for {
		n, err := fd.SequenceOnce(s.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	return s
}

func runCheck(t *testing.T, db *gorm.DB) *Result {
	t.Helper()
	res, err := Check(t.Context(), db)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	return res
}

// ipv4Key is the sort key of an IPv4 address (ARCHITECTURE.md "Storage":
// 32 hexadecimal digits, the address in the low 32 bits).
func ipv4Key(v string) string {
	a := netip.MustParseAddr(v).As4()
	return integerKey(uint64(binary.BigEndian.Uint32(a[:])))
}

// integerKey is the sort key of an integer.
func integerKey(n uint64) string { return fmt.Sprintf("%032x", n) }

// exec runs statements on one connection (a PRAGMA holds for its own
// connection only).
func execAll(t *testing.T, db *gorm.DB, stmts ...string) {
	t.Helper()
	err := db.Connection(func(c *gorm.DB) error {
		for _, s := range stmts {
			if err := c.Exec(s).Error; err != nil {
				return &stmtError{s, err}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type stmtError struct {
	stmt string
	err  error
}

func (e *stmtError) Error() string { return e.err.Error() + "\nstatement: " + e.stmt }

// looseAllocations rebuilds the allocations table without its constraints,
// indexes and triggers, so that a test can store what they refuse.
func looseAllocations(t *testing.T, db *gorm.DB) {
	t.Helper()
	// SQLite: the range triggers name allocations; the legacy rename
	// leaves them alone instead of checking them against a missing table.
	execAll(t, db, onDialect(db,
		[]string{"CREATE TABLE allocations_loose AS SELECT * FROM allocations", "DROP TABLE allocations CASCADE",
			"ALTER TABLE allocations_loose RENAME TO allocations"},
		[]string{"PRAGMA legacy_alter_table = ON", "CREATE TABLE allocations_loose AS SELECT * FROM allocations", "DROP TABLE allocations",
			"ALTER TABLE allocations_loose RENAME TO allocations", "PRAGMA legacy_alter_table = OFF"})...)
}

func onDialect(db *gorm.DB, pg, sqlite []string) []string {
	if models.DialectOf(db) == models.Postgres {
		return pg
	}
	return sqlite
}

// checkCase breaks one rule of a checkSite; Check must name the rule, in
// a finding that says want when it is set.
type checkCase struct {
	rule    string
	want    string
	corrupt func(t *testing.T, db *gorm.DB)
}

func TestCheckNamesEachBrokenRule(t *testing.T) {
	t.Parallel()
	k := ipv4Key
	cases := []checkCase{
		{rule: "schema_version", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, "DELETE FROM schema_migrations WHERE version = (SELECT MAX(version) FROM schema_migrations)")
		}},
		{rule: "value_held_once", corrupt: func(t *testing.T, db *gorm.DB) {
			looseAllocations(t, db)
			execAll(t, db, `INSERT INTO allocations (id, pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
				SELECT id + 100000, pool_id, value_key, value, state, 'vm', 'intruder', run_end, allocated_at FROM allocations WHERE value = '10.0.0.1'`)
		}},
		{rule: "owner_holds_one", corrupt: func(t *testing.T, db *gorm.DB) {
			looseAllocations(t, db)
			execAll(t, db, `INSERT INTO allocations (id, pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
				SELECT id + 100000, pool_id, '`+k("10.0.0.150")+`', '10.0.0.150', state, owner_type, owner_id, TRUE, allocated_at FROM allocations WHERE value = '10.0.0.1'`)
		}},
		{rule: "allocation_state", corrupt: func(t *testing.T, db *gorm.DB) {
			looseAllocations(t, db)
			execAll(t, db, `UPDATE allocations SET quarantined_at = allocated_at WHERE value = '10.0.0.1'`)
		}},
		{rule: "stored_values", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, `UPDATE allocations SET value = '10.0.0.77' WHERE value = '10.0.0.1'`)
		}},
		{rule: "range_order", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, onDialect(db,
				[]string{"ALTER TABLE pool_ranges DROP CONSTRAINT pool_ranges_order", "ALTER TABLE pool_ranges DROP CONSTRAINT pool_ranges_no_overlap",
					"UPDATE pool_ranges SET first_key = last_key, last_key = first_key, first_value = last_value, last_value = first_value WHERE first_value = '1000'"},
				[]string{"PRAGMA ignore_check_constraints = ON",
					"UPDATE pool_ranges SET first_key = last_key, last_key = first_key, first_value = last_value, last_value = first_value WHERE first_value = '1000'",
					"PRAGMA ignore_check_constraints = OFF"})...)
		}},
		{rule: "ranges_disjoint", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, onDialect(db,
				[]string{"ALTER TABLE pool_ranges DROP CONSTRAINT pool_ranges_no_overlap"},
				[]string{"DROP TRIGGER pool_ranges_no_overlap_insert"})...)
			execAll(t, db, `INSERT INTO pool_ranges (pool_id, first_key, last_key, first_value, last_value, auto_assign, created_at)
				SELECT pool_id, '`+integerKey(1050)+`', '`+integerKey(1200)+`', '1050', '1200', FALSE, created_at FROM pool_ranges WHERE first_value = '1000'`)
		}},
		{rule: "pools_disjoint", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, onDialect(db,
				[]string{"DROP TRIGGER pool_ranges_family_overlap ON pool_ranges"},
				[]string{"DROP TRIGGER pool_ranges_family_overlap_insert"})...)
			execAll(t, db, `INSERT INTO pools (name, type, created_at, updated_at) SELECT 'other', 'ipv4', created_at, updated_at FROM pools WHERE name = 'lo-ip'`)
			execAll(t, db, `INSERT INTO pool_ranges (pool_id, first_key, last_key, first_value, last_value, auto_assign, created_at)
				SELECT (SELECT id FROM pools WHERE name = 'other'), '`+k("10.0.0.5")+`', '`+k("10.0.0.6")+`', '10.0.0.5', '10.0.0.6', TRUE, created_at FROM pools WHERE name = 'lo-ip'`)
		}},
		{rule: "allocation_in_range", corrupt: func(t *testing.T, db *gorm.DB) {
			looseAllocations(t, db)
			execAll(t, db, `INSERT INTO allocations (id, pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at)
				SELECT id + 100000, pool_id, '`+k("10.0.0.250")+`', '10.0.0.250', state, 'vm', 'astray', TRUE, allocated_at FROM allocations WHERE value = '10.0.0.1'`)
		}},
		{rule: "run_end", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, `UPDATE allocations SET run_end = NOT run_end WHERE value = '10.0.0.1'`)
		}},
		{rule: "range_counts", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, `UPDATE range_counts SET allocated = allocated + 1 WHERE range_id = (SELECT MIN(id) FROM pool_ranges)`)
		}},
		{rule: "range_counts", want: "counts 0 reserved values no allocation holds; a recount finds 1", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, `UPDATE range_counts SET reserved_unheld = 0 WHERE range_id IN (SELECT id FROM pool_ranges WHERE first_value = 'fd00:1::1')`)
		}},
		{rule: "range_counts", want: "counts 2 reserved values no allocation holds; a recount finds 1", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, `UPDATE range_counts SET reserved_unheld = reserved_unheld + 1 WHERE range_id IN (SELECT id FROM pool_ranges WHERE first_value = '10.0.0.100')`)
		}},
		{rule: "pool_usage", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, `UPDATE pool_usage_days SET n = n + 1 WHERE pool = 'vlan' AND action = 'allocation.create'`)
		}},
		{rule: "revisions", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, `UPDATE audit_events SET revision = revision + 1 WHERE revision = (SELECT MAX(revision) FROM audit_events)`)
		}},
		{rule: "webhook_deliveries", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, `UPDATE webhook_deliveries SET revision = revision + 1000 WHERE id = (SELECT MIN(id) FROM webhook_deliveries)`)
		}},
		{rule: "reservations", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, `UPDATE expected_dpus SET loopback_ip = '10.0.0.5', loopback_ip_key = '`+k("10.0.0.5")+`' WHERE serial_number = 'MT1'`)
		}},
		{rule: "dpu_loopbacks", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, `UPDATE network_configs SET loopback_ip = '10.0.0.160' WHERE loopback_ip = '10.0.0.100'`)
		}},
		{rule: "machine_tree", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, `UPDATE machines SET host_machine_id = (SELECT MIN(machine_id) FROM machines WHERE kind = 'dpu')
				WHERE machine_id = (SELECT MAX(machine_id) FROM machines WHERE kind = 'dpu')`)
		}},
		{rule: "visible_text", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, onDialect(db,
				[]string{"ALTER TABLE machines DROP CONSTRAINT machines_visible_text"},
				[]string{"DROP TRIGGER machines_visible_text_update"})...)
			execAll(t, db, "UPDATE machines SET chassis_serial_number = 'CHS\u200b-1' WHERE kind = 'host'")
		}},
		{rule: "fleet_names", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, `UPDATE machines SET sort_name = 'aaa' WHERE kind = 'host'`)
		}},
		{rule: "fleet_bindings", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, `UPDATE machines SET binding_v4 = 'pending' WHERE kind = 'dpu'`)
		}},
		{rule: "fleet_counts", corrupt: func(t *testing.T, db *gorm.DB) {
			execAll(t, db, `UPDATE fleet_counts SET n = n + 1 WHERE kind = 'dpu'`)
		}},
	}
	cases = append(cases, uniqueCheckCases()...)
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.rule] = true
	}
	for _, r := range Rules {
		if !covered[r.Name] {
			t.Errorf("rule %s has no case that breaks it", r.Name)
		}
	}
	for _, tc := range cases {
		name := tc.rule
		if tc.want != "" {
			name += "/" + tc.want
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
				t.Parallel()
				checkSite(t, db)
				if res := runCheck(t, db); !res.OK() {
					t.Fatalf("a site written through the allocator fails the check: %+v", res.Findings)
				}
				tc.corrupt(t, db)
				res := runCheck(t, db)
				for _, f := range res.Findings {
					t.Logf("%s: %s", f.Rule, f.Message)
				}
				if !res.Failed(tc.rule) {
					t.Fatalf("check did not name %s; findings: %+v", tc.rule, res.Findings)
				}
				wanted := tc.want == ""
				for _, f := range res.Findings {
					if f.Rule == tc.rule && strings.TrimSpace(f.Message) == "" {
						t.Errorf("finding of %s without a message", tc.rule)
					}
					wanted = wanted || f.Rule == tc.rule && strings.Contains(f.Message, tc.want)
				}
				if !wanted {
					t.Errorf("no finding of %s says %q", tc.rule, tc.want)
				}
			})
		})
	}
}
