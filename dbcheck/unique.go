package dbcheck

import (
	"github.com/ipledger/ipledger/ident"
)

// The rules of Check that unique keys hold (ARCHITECTURE.md, "Storage"):
// each is recounted here (GROUP BY … HAVING COUNT(*) > 1), so that a
// database whose unique index is missing — a partial restore, a table
// rebuilt by hand — is held to the rule as well as one whose index holds
// it; the "constraints" rule says which index is missing.

// onceKey is one unique key to recount: the rows of table whose column
// col is set must all differ in it (compared as the SQL expression key),
// named by the column who.
type onceKey struct {
	table, col, key, who string
	// what the finding calls a value and its rows, e.g. "serial %s is
	// declared by %d ExpectedMachine DPUs (%s)"
	format string
}

func checkOnce(c *checker, rule string, keys []onceKey) error {
	for _, k := range keys {
		type dup struct {
			Value string
			N     int64
			Who   string
		}
		var rows []dup
		if err := c.q.Raw(`SELECT MIN(` + k.col + `) AS value, COUNT(*) AS n, MIN(` + k.who + `) || ', ' || MAX(` + k.who + `) AS who
			FROM ` + k.table + ` WHERE ` + k.col + ` IS NOT NULL GROUP BY ` + k.key + ` HAVING COUNT(*) > 1 ORDER BY 1`).Scan(&rows).Error; err != nil {
			return err
		}
		for _, d := range rows {
			c.add(rule, k.format, d.Value, d.N, d.Who)
		}
	}
	return nil
}

// checkDeclaredOnce: one ExpectedMachine DPU per serial number, compared
// in any case (the serials migration 32 kept are named here until one of
// each is removed), and per reserved loopback, by its text and by its
// sort key.
func checkDeclaredOnce(c *checker) error {
	var keys []onceKey
	for _, k := range []struct{ col, key, label string }{
		{"serial_number", "LOWER(serial_number)", "serial number"}, {"loopback_ip", "loopback_ip", "loopback"},
		{"loopback_ip_key", "loopback_ip_key", "loopback key"}, {"loopback_ip_v6", "loopback_ip_v6", "loopback"},
		{"loopback_ip_v6_key", "loopback_ip_v6_key", "loopback key"},
	} {
		keys = append(keys, onceKey{table: "expected_dpus", col: k.col, key: k.key, who: "expected_machine_id",
			format: k.label + " %s is declared for %d DPUs (of ExpectedMachines %s)"})
	}
	return checkOnce(c, "declared_once", keys)
}

// checkCarriedOnce: one machine per DPU serial number, one DPU per
// loopback.
func checkCarriedOnce(c *checker) error {
	return checkOnce(c, "carried_once", []onceKey{
		{"machines", "serial_number", "serial_number", "machine_id", "serial number %s is carried by %d machines (%s)"},
		{"network_configs", "loopback_ip", "loopback_ip", "machine_id", "loopback %s is carried by %d DPUs (%s)"},
		{"network_configs", "loopback_ip_v6", "loopback_ip_v6", "machine_id", "loopback %s is carried by %d DPUs (%s)"},
	})
}

// checkBMCMACs: a BMC MAC once among the ExpectedMachines and once among
// the machines (hosts and DPUs share the column), compared in any case,
// and stored only in ident.ParseMAC's canonical spelling.
func checkBMCMACs(c *checker) error {
	if err := checkOnce(c, "bmc_macs", []onceKey{
		{"expected_machines", "bmc_mac_address", "LOWER(bmc_mac_address)", "id", "BMC MAC %s is declared by %d ExpectedMachines (%s)"},
		{"machines", "bmc_mac_address", "LOWER(bmc_mac_address)", "machine_id", "BMC MAC %s is carried by %d machines (%s)"},
	}); err != nil {
		return err
	}
	for _, src := range []struct{ query, what string }{
		{`SELECT id, bmc_mac_address FROM expected_machines ORDER BY id`, "ExpectedMachine"},
		{`SELECT machine_id, bmc_mac_address FROM machines WHERE bmc_mac_address IS NOT NULL ORDER BY machine_id`, "machine"},
	} {
		rows, err := c.q.Raw(src.query).Rows()
		if err != nil {
			return err
		}
		for rows.Next() {
			var id, mac string
			if err := rows.Scan(&id, &mac); err != nil {
				rows.Close()
				return err
			}
			if canon, err := ident.ParseMAC(mac); err != nil || canon != mac {
				c.add("bmc_macs", "%s %s: BMC MAC %q is not in the canonical form (six lower-case hex octets joined by ':')", src.what, id, mac)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}

// checkTokenNames: a token name once, but for the tokens migration 12
// found sharing a name and marked legacy_duplicate.
func checkTokenNames(c *checker) error {
	type dup struct {
		Name string
		N    int64
	}
	var rows []dup
	if err := c.q.Raw(`SELECT name, COUNT(*) AS n FROM api_tokens WHERE NOT legacy_duplicate
		GROUP BY name HAVING COUNT(*) > 1 ORDER BY name`).Scan(&rows).Error; err != nil {
		return err
	}
	for _, d := range rows {
		c.add("token_names", "token name %q is given to %d tokens", d.Name, d.N)
	}
	return nil
}

// checkQueuedOnce: the sequencer queues an event once per webhook.
func checkQueuedOnce(c *checker) error {
	type dup struct {
		Webhook  string
		Revision int64
		N        int64
	}
	var rows []dup
	if err := c.q.Raw(`SELECT COALESCE(w.name, CAST(d.webhook_id AS TEXT)) AS webhook, d.revision, COUNT(*) AS n
		FROM webhook_deliveries d LEFT JOIN webhooks w ON w.id = d.webhook_id
		GROUP BY d.webhook_id, w.name, d.revision HAVING COUNT(*) > 1 ORDER BY d.webhook_id, d.revision`).Scan(&rows).Error; err != nil {
		return err
	}
	for _, d := range rows {
		c.add("queued_once", "revision %d is queued %d times for webhook %s", d.Revision, d.N, d.Webhook)
	}
	return nil
}
