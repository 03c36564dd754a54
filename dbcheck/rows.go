package dbcheck

import (
	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/models"
)

// The rules of Check over the feed, webhooks, reservations and machines.

// checkPoolUsage recounts pool_usage_days from the allocation audit events
// (the same grouping its triggers use).
func checkPoolUsage(c *checker) error {
	group := `SELECT split_part(object_id, '/', 1) AS pool, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, action, COUNT(*) AS n
		FROM audit_events WHERE object_type = 'allocation' AND position('/' IN object_id) > 0 GROUP BY 1, 2, 3`
	if c.dialect == models.SQLite {
		group = `SELECT substr(object_id, 1, instr(object_id, '/') - 1) AS pool, substr(at, 1, 10) AS day, action, COUNT(*) AS n
		FROM audit_events WHERE object_type = 'allocation' AND instr(object_id, '/') > 0 GROUP BY 1, 2, 3`
	}
	type day struct {
		Pool, Day, Action string
		N                 int64
	}
	var recount, stored []day
	if err := c.q.Raw(group).Scan(&recount).Error; err != nil {
		return err
	}
	if err := c.q.Raw(`SELECT pool, day, action, n FROM pool_usage_days`).Scan(&stored).Error; err != nil {
		return err
	}
	type k struct{ pool, day, action string }
	want := map[k]int64{}
	for _, d := range recount {
		want[k{d.Pool, d.Day, d.Action}] = d.N
	}
	got := map[k]int64{}
	for _, d := range stored {
		got[k{d.Pool, d.Day, d.Action}] = d.N
	}
	diffCounts(want, got, func(a, b k) int {
		return compareStrings([]string{a.pool, a.day, a.action}, []string{b.pool, b.day, b.action})
	}, func(x k, stored, recount int64) {
		c.add("pool_usage", "pool %q, %s, %s: pool_usage_days says %d, the audit events count %d", x.pool, x.day, x.action, stored, recount)
	})
	return nil
}

// checkRevisions: the sequencer numbers events head+1, head+2, … (and
// migration 13 numbered the older ones 1..n), so the numbered events hold
// exactly 1..N. Events not numbered yet are the feed's lag, not a fault.
func checkRevisions(c *checker) error {
	var s struct {
		N, NDistinct, Lo, Hi int64
	}
	if err := c.q.Raw(`SELECT COUNT(revision) AS n, COUNT(DISTINCT revision) AS n_distinct, COALESCE(MIN(revision), 0) AS lo,
		COALESCE(MAX(revision), 0) AS hi FROM audit_events`).Scan(&s).Error; err != nil {
		return err
	}
	if s.N == 0 {
		return nil
	}
	if s.NDistinct != s.N {
		var reps []int64
		if err := c.q.Raw(`SELECT revision FROM audit_events WHERE revision IS NOT NULL GROUP BY revision HAVING COUNT(*) > 1
			ORDER BY revision LIMIT 20`).Scan(&reps).Error; err != nil {
			return err
		}
		for _, r := range reps {
			c.add("revisions", "revision %d is carried by more than one event", r)
		}
	}
	if s.Lo != 1 {
		c.add("revisions", "the lowest revision is %d, not 1: revisions 1..%d are missing", s.Lo, s.Lo-1)
	}
	if s.Hi != s.NDistinct+s.Lo-1 {
		var gaps []int64
		if err := c.q.Raw(`SELECT e.revision + 1 FROM audit_events e WHERE e.revision IS NOT NULL AND e.revision < ?
			AND NOT EXISTS (SELECT 1 FROM audit_events n WHERE n.revision = e.revision + 1) ORDER BY 1 LIMIT 20`, s.Hi).Scan(&gaps).Error; err != nil {
			return err
		}
		for _, g := range gaps {
			c.add("revisions", "revision %d is missing below the head %d", g, s.Hi)
		}
	}
	return nil
}

func checkWebhookDeliveries(c *checker) error {
	type row struct {
		DeliveryID string
		Revision   int64
		EventRev   *int64
	}
	var rows []row
	if err := c.q.Raw(`SELECT d.delivery_id, d.revision, e.revision AS event_rev FROM webhook_deliveries d
		LEFT JOIN audit_events e ON e.id = d.event_id
		WHERE e.id IS NULL OR e.revision IS NULL OR e.revision <> d.revision ORDER BY d.id`).Scan(&rows).Error; err != nil {
		return err
	}
	for _, r := range rows {
		if r.EventRev == nil {
			c.add("webhook_deliveries", "delivery %s of revision %d points at an event without a revision", r.DeliveryID, r.Revision)
			continue
		}
		c.add("webhook_deliveries", "delivery %s says revision %d, its event has revision %d", r.DeliveryID, r.Revision, *r.EventRev)
	}
	return nil
}

// checkReservations: a declared loopback keeps its key in step with its
// text and stays in an explicit range of its pool (range edits that would
// strand it are refused, docs/pools.md "Ranges"). Whether it is free is
// not a rule: the lifecycle foresees a declared value being unavailable.
func checkReservations(c *checker) error {
	var dpus []models.ExpectedDPU
	if err := c.q.Raw(`SELECT * FROM expected_dpus WHERE loopback_ip IS NOT NULL OR loopback_ip_v6 IS NOT NULL ORDER BY serial_number`).Scan(&dpus).Error; err != nil {
		return err
	}
	check := func(serial, poolName string, typ allocator.PoolType, val, key *string) {
		if val == nil && key == nil {
			return
		}
		if val == nil || key == nil {
			c.add("reservations", "serial %s: the %s reservation has a value or a key but not both", serial, poolName)
			return
		}
		p := c.byName[poolName]
		vals := allocator.PoolValuesOf(&models.Pool{Type: string(typ)})
		if p != nil {
			vals = p.vals
		}
		if !vals.StoredForm(*key, *val) {
			c.add("reservations", "serial %s: reservation %q has the key %s, which does not name an %s value", serial, *val, *key, typ)
			return
		}
		if p == nil || p.Type != string(typ) {
			c.add("reservations", "serial %s: %s is reserved but pool %s does not exist as an %s pool", serial, *val, poolName, typ)
			return
		}
		for _, r := range p.ranges {
			if r.FirstKey <= *key && *key <= r.LastKey {
				if r.AutoAssign {
					c.add("reservations", "serial %s: %s is reserved in the auto_assign range %s..%s of %s", serial, *val, r.FirstValue, r.LastValue, poolName)
				}
				return
			}
		}
		c.add("reservations", "serial %s: %s is reserved outside every range of %s", serial, *val, poolName)
	}
	for _, d := range dpus {
		check(d.SerialNumber, "lo-ip", allocator.TypeIPv4, d.LoopbackIP, d.LoopbackIPKey)
		check(d.SerialNumber, "lo-ip-v6", allocator.TypeIPv6, d.LoopbackIPv6, d.LoopbackIPv6Key)
	}
	return nil
}

func checkDPULoopbacks(c *checker) error {
	for _, f := range []struct{ col, pool string }{{"loopback_ip", "lo-ip"}, {"loopback_ip_v6", "lo-ip-v6"}} {
		type row struct{ MachineID, Value string }
		var rows []row
		if err := c.q.Raw(`SELECT n.machine_id, n.`+f.col+` AS value FROM network_configs n WHERE n.`+f.col+` IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM allocations a JOIN pools p ON p.id = a.pool_id
			  WHERE p.name = ? AND a.value = n.`+f.col+` AND a.state = 'allocated' AND a.owner_type = ? AND a.owner_id = n.machine_id)
			ORDER BY n.machine_id`, f.pool, allocator.OwnerTypeMachine).Scan(&rows).Error; err != nil {
			return err
		}
		for _, r := range rows {
			c.add("dpu_loopbacks", "machine %s carries %s, which %s does not hold for it", r.MachineID, r.Value, f.pool)
		}
	}
	return nil
}

func checkMachineTree(c *checker) error {
	type row struct {
		MachineID, Kind string
		Host            *string
		HostKind        *string
	}
	var rows []row
	if err := c.q.Raw(`SELECT m.machine_id, m.kind, m.host_machine_id AS host, h.kind AS host_kind FROM machines m
		LEFT JOIN machines h ON h.machine_id = m.host_machine_id
		WHERE m.host_machine_id IS NOT NULL AND (m.kind = 'host' OR h.kind IS NULL OR h.kind <> 'host')
		ORDER BY m.machine_id`).Scan(&rows).Error; err != nil {
		return err
	}
	for _, r := range rows {
		if r.Kind == "host" {
			c.add("machine_tree", "host %s has a host of its own (%s)", r.MachineID, *r.Host)
			continue
		}
		c.add("machine_tree", "DPU %s sits under %s, which is not a host", r.MachineID, *r.Host)
	}
	return nil
}

// checkVisibleText names the rows written before migration 25 (or around
// its constraints) whose names, chassis serials or SKUs break the
// visible-text rule.
func checkVisibleText(c *checker) error {
	type text struct{ ID, Field, Value string }
	var rows []text
	if err := c.q.Raw(`SELECT id, 'metadata.name' AS field, metadata_name AS value FROM expected_machines
UNION ALL SELECT id, 'chassis_serial_number', chassis_serial_number FROM expected_machines
UNION ALL SELECT id, 'sku_id', sku_id FROM expected_machines WHERE sku_id IS NOT NULL
UNION ALL SELECT machine_id, 'machine chassis_serial_number', chassis_serial_number FROM machines`).Scan(&rows).Error; err != nil {
		return err
	}
	for _, r := range rows {
		if ch, bad := ident.Invisible(r.Value, false); bad {
			c.add("visible_text", "%s of %s is %q: it holds U+%04X", r.Field, r.ID, r.Value, ch)
		}
	}
	return nil
}
