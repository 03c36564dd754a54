package allocator

// Upgrades from every release (docs/operations.md, "Upgrades"): a
// database at each schema version ever released — from version 1, the
// first schema — is filled as the code of that time wrote it (raw rows:
// pools, ranges, allocations with their run ends and audit events, a
// quarantine, tokens, an ExpectedMachine with reservations, an ingested
// host and DPU with its loopbacks), then today's migrations and code run
// on it. Nothing may be lost: every row reads back through today's
// allocator, the check is clean, and new writes continue where the old
// ones stopped.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/models"
)

const (
	upgradeToken = "upgrade-admin-token-0123456789"
	upgradeMAC   = "1a:1b:1c:1d:1e:1f"
	upgradeEM    = "0f9d6c1e-4a57-4c1b-9d0e-3f7d1a2b8c40"
)

// oldRows writes what a release at schema version v stored, through the
// columns of the first schema (every later release kept them).
func oldRows(t *testing.T, db *gorm.DB, v int) {
	t.Helper()
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	exec := func(q string, args ...any) {
		t.Helper()
		if err := db.Exec(q, args...).Error; err != nil {
			t.Fatalf("schema %d: %v\n%s", v, err, q)
		}
	}
	type rg struct {
		first, last string
		auto        bool
	}
	pools := []struct {
		name, typ string
		plen      int
		ranges    []rg
	}{
		{"lo-ip", "ipv4", 0, []rg{{"10.0.0.1", "10.0.0.9", true}, {"10.0.0.100", "10.0.0.199", false}}},
		{"lo-ip-v6", "ipv6", 0, []rg{{"fd00::1", "fd00::ff", true}, {"fd00:1::1", "fd00:1::ff", false}}},
		{"pfx", "ipv6prefix", 56, []rg{{"2001:db8::", "2001:db8:0:ff00::", true}}},
		{"vlan", "integer", 0, []rg{{"100", "199", true}}},
	}
	ids := map[string]int64{}
	spaces := map[string]space{}
	for _, p := range pools {
		exec(`INSERT INTO pools (name, type, delegate_prefix_len, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, p.name, p.typ, p.plen, at, at)
		var id int64
		if err := db.Raw(`SELECT id FROM pools WHERE name = ?`, p.name).Scan(&id).Error; err != nil {
			t.Fatal(err)
		}
		ids[p.name], spaces[p.name] = id, newSpace(PoolType(p.typ), p.plen)
		for _, r := range p.ranges {
			f, err := spaces[p.name].parse(r.first)
			if err != nil {
				t.Fatal(err)
			}
			l, err := spaces[p.name].parse(r.last)
			if err != nil {
				t.Fatal(err)
			}
			exec(`INSERT INTO pool_ranges (pool_id, first_key, last_key, first_value, last_value, auto_assign, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				id, f.key(), l.key(), spaces[p.name].format(f), spaces[p.name].format(l), r.auto, at)
		}
	}
	// Allocations as the allocator of the time stored them: canonical text,
	// sort key, run_end true where the next value is free, and an
	// allocation.create event each (object id pool/value).
	held := []struct {
		pool, value, ownerType, ownerID string
		runEnd                          bool
	}{
		{"lo-ip", "10.0.0.1", "vm", "a", false},
		{"lo-ip", "10.0.0.2", "vm", "b", false},
		{"lo-ip", "10.0.0.3", "vm", "c", true},
		{"lo-ip", "10.0.0.100", OwnerTypeMachine, DPUMachineID("MT1"), true},
		{"lo-ip-v6", "fd00:1::1", OwnerTypeMachine, DPUMachineID("MT1"), true},
		{"pfx", "2001:db8::/56", "tenant", "t1", false},
		{"pfx", "2001:db8:0:100::/56", "tenant", "t2", true},
		{"vlan", "100", "net", "n100", false},
		{"vlan", "101", "net", "n101", true},
		{"vlan", "103", "net", "n103", true},
	}
	for i, h := range held {
		x, err := spaces[h.pool].parse(h.value)
		if err != nil {
			t.Fatal(err)
		}
		exec(`INSERT INTO allocations (pool_id, value_key, value, state, owner_type, owner_id, run_end, allocated_at) VALUES (?, ?, ?, 'allocated', ?, ?, ?, ?)`,
			ids[h.pool], x.key(), h.value, h.ownerType, h.ownerID, h.runEnd, at.Add(time.Duration(i)*time.Second))
		exec(`INSERT INTO audit_events (at, actor, action, object_type, object_id, request_id, after_json) VALUES (?, 'token:ops', 'allocation.create', 'allocation', ?, ?, ?)`,
			at.Add(time.Duration(i)*time.Second), h.pool+"/"+h.value, fmt.Sprintf("req-%d", i),
			fmt.Sprintf(`{"pool":%q,"value":%q,"owner_type":%q,"owner_id":%q,"state":"allocated"}`, h.pool, h.value, h.ownerType, h.ownerID))
	}
	// A quarantine: 10.0.0.5, formerly vm/e.
	q, _ := spaces["lo-ip"].parse("10.0.0.5")
	exec(`INSERT INTO allocations (pool_id, value_key, value, state, run_end, allocated_at, quarantine_reason, former_owner_type, former_owner_id, quarantined_at)
		VALUES (?, ?, '10.0.0.5', 'quarantined', TRUE, ?, 'force delete', 'vm', 'e', ?)`, ids["lo-ip"], q.key(), at, at.Add(time.Hour))
	for _, a := range []string{"allocation.create", "allocation.quarantine"} {
		exec(`INSERT INTO audit_events (at, actor, action, object_type, object_id, request_id) VALUES (?, 'token:ops', ?, 'allocation', 'lo-ip/10.0.0.5', '')`, at.Add(time.Hour), a)
	}
	hash := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	exec(`INSERT INTO api_tokens (name, role, token_hash, created_at) VALUES ('ops', 'admin', ?, ?)`, hash(upgradeToken), at)
	exec(`INSERT INTO api_tokens (name, role, token_hash, created_at) VALUES ('ci', 'operator', ?, ?)`, hash("upgrade-ci-token-1-0123456789"), at)
	if v < 12 {
		// Token names were not unique before migration 12.
		exec(`INSERT INTO api_tokens (name, role, token_hash, created_at) VALUES ('ci', 'viewer', ?, ?)`, hash("upgrade-ci-token-2-0123456789"), at)
	}
	// An ExpectedMachine reserving MT1's loopbacks, and the host and DPU
	// ingested with them.
	exec(`INSERT INTO expected_machines (id, bmc_mac_address, bmc_username, bmc_password, chassis_serial_number, fallback_dpu_serial_numbers,
		metadata_name, metadata_labels, created_at, updated_at) VALUES (?, ?, 'root', 'secret', 'SN-0001', '["MT9"]', 'rack7-u12', '[]', ?, ?)`,
		upgradeEM, upgradeMAC, at, at)
	l4, _ := spaces["lo-ip"].parse("10.0.0.100")
	l6, _ := spaces["lo-ip-v6"].parse("fd00:1::1")
	exec(`INSERT INTO expected_dpus (expected_machine_id, position, serial_number, loopback_ip, loopback_ip_key, loopback_ip_v6, loopback_ip_v6_key)
		VALUES (?, 0, 'MT1', '10.0.0.100', ?, 'fd00:1::1', ?)`, upgradeEM, l4.key(), l6.key())
	host := HostMachineID(upgradeMAC)
	exec(`INSERT INTO machines (machine_id, kind, state, bmc_mac_address, chassis_serial_number, expected_machine_id, created_at, updated_at)
		VALUES (?, 'host', 'ready', ?, 'SN-0001', ?, ?, ?)`, host, upgradeMAC, upgradeEM, at, at)
	exec(`INSERT INTO machines (machine_id, kind, host_machine_id, state, serial_number, created_at, updated_at) VALUES (?, 'dpu', ?, 'ready', 'MT1', ?, ?)`,
		DPUMachineID("MT1"), host, at, at)
	exec(`INSERT INTO network_configs (machine_id, loopback_ip, loopback_ip_v6, updated_at) VALUES (?, '10.0.0.100', 'fd00:1::1', ?)`, DPUMachineID("MT1"), at)
}

func TestUpgradeFromEverySchemaVersion(t *testing.T) {
	t.Parallel()
	var versions []int
	for _, m := range models.Migrations {
		versions = append(versions, m.Version)
	}
	for _, d := range dbtest.Dialects {
		for _, v := range versions {
			t.Run(fmt.Sprintf("%s/from-%d", d, v), func(t *testing.T) {
				t.Parallel()
				u := dbtest.NewSQLiteURL(t)
				if d == models.Postgres {
					u = dbtest.NewPostgresURL(t)
				}
				old, _, err := database.Open(u)
				if err != nil {
					t.Fatal(err)
				}
				if err := models.MigrateTo(old, v); err != nil {
					t.Fatalf("build schema %d: %v", v, err)
				}
				oldRows(t, old, v)
				if s, e := old.DB(); e == nil {
					s.Close()
				}
				// Today's code: dbtest.OpenURL applies every migration.
				upgradeChecks(t, dbtest.OpenURL(t, u), v)
			})
		}
	}
}

func upgradeChecks(t *testing.T, db *gorm.DB, from int) {
	ctx := audit.WithActor(context.Background(), "upgrade", "req-upgrade")
	a := New(db, Options{})
	fd := feed.New(db, feed.Options{})
	for {
		n, err := fd.SequenceOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if res := runDBCheck(t, ctx, db); !res.OK() {
		t.Fatalf("upgraded from %d, check finds: %+v", from, res)
	}
	for _, w := range []struct{ pool, value, owner string }{
		{"lo-ip", "10.0.0.2", "b"}, {"lo-ip", "10.0.0.100", DPUMachineID("MT1")}, {"pfx", "2001:db8:0:100::/56", "t2"}, {"vlan", "103", "n103"},
	} {
		al, err := a.GetAllocation(ctx, w.pool, w.value)
		if err != nil || al.OwnerID == nil || *al.OwnerID != w.owner {
			t.Errorf("%s %s after the upgrade: %+v, %v; want owner %s", w.pool, w.value, al, err, w.owner)
		}
	}
	if al, err := a.GetAllocation(ctx, "lo-ip", "10.0.0.5"); err != nil || al.State != models.StateQuarantined || al.FormerOwnerID == nil || *al.FormerOwnerID != "e" {
		t.Errorf("quarantine after the upgrade: %+v, %v", al, err)
	}
	tok, err := auth.New(a.DB(), auth.Options{}).Authenticate(ctx, upgradeToken)
	if err != nil || tok.Name != "ops" || tok.Role != "admin" {
		t.Errorf("old admin token: %+v, %v", tok, err)
	}
	secondCI := "upgrade-ci-token-1-0123456789"
	if from < 12 {
		secondCI = "upgrade-ci-token-2-0123456789"
	}
	if tok, err := auth.New(a.DB(), auth.Options{}).Authenticate(ctx, secondCI); err != nil || tok.Name != "ci" {
		t.Errorf("old ci token: %+v, %v", tok, err)
	}
	em, err := a.GetExpectedMachine(ctx, upgradeMAC)
	if err != nil || em.ID != upgradeEM || len(em.ExpectedDPUs) != 1 || em.ExpectedDPUs[0].LoopbackIP == nil || *em.ExpectedDPUs[0].LoopbackIP != "10.0.0.100" ||
		!em.BmcPasswordSet {
		t.Errorf("ExpectedMachine after the upgrade: %+v, %v", em, err)
	}
	m, err := a.GetMachine(ctx, DPUMachineID("MT1"))
	if err != nil || m.NetworkConfig == nil || m.NetworkConfig.LoopbackIP == nil || *m.NetworkConfig.LoopbackIP != "10.0.0.100" ||
		m.NetworkConfig.LoopbackIPv6 == nil || *m.NetworkConfig.LoopbackIPv6 != "fd00:1::1" {
		t.Errorf("DPU after the upgrade: %+v, %v", m, err)
	}
	page, err := fd.ReadFeed(ctx, feed.FeedQuery{After: 0, Limit: 100})
	if err != nil || len(page.Items) != 12 {
		t.Fatalf("feed after the upgrade: %d events, %v; want the 12 stored", len(page.Items), err)
	}
	for i, e := range page.Items {
		if e.Revision == nil || *e.Revision != int64(i+1) {
			t.Errorf("event %d has revision %v, want %d", i, e.Revision, i+1)
		}
	}
	// New writes continue where the old ones stopped: the lowest free
	// values, past the old runs and the quarantine.
	for _, w := range []struct{ pool, want string }{{"lo-ip", "10.0.0.4"}, {"pfx", "2001:db8:0:200::/56"}, {"vlan", "102"}} {
		al, _, err := a.Allocate(ctx, w.pool, Owner{Type: "vm", ID: "after-upgrade"}, "")
		if err != nil || al.Value != w.want {
			t.Errorf("allocate from %s after the upgrade: %+v, %v; want %s", w.pool, al, err, w.want)
		}
	}
	if err := a.Release(ctx, "lo-ip", "10.0.0.2", Owner{Type: "vm", ID: "b"}); err != nil {
		t.Errorf("release an old allocation: %v", err)
	}
	if res := runDBCheck(t, ctx, db); !res.OK() {
		t.Fatalf("check after new writes on the upgraded database: %+v", res)
	}
}
