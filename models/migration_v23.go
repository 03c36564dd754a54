package models

import "strings"

// Migration 23 makes the console's fleet pages cost the same at 100,000
// machines as at 100: no read counts or sorts the fleet (docs/decisions.md
// "Fleet counts are kept on write").
//
//   - machines.sort_name is the name the console shows a host by (its
//     ExpectedMachine's metadata.name matched by BMC MAC, else its chassis
//     serial, else its BMC MAC, else its machine_id), in lower case; the
//     Machines list is keyset-paginated on the index (sort_name,
//     machine_id). PostgreSQL compares it with collation C, SQLite
//     bytewise, so the order is the same on both.
//   - machines.binding_v4 and binding_v6 hold a DPU's binding class per
//     family: automatic, reserved, pending, conflict, or unbound (no value
//     and nothing declared: missing or none depending on whether the pool
//     exists, which the reader knows). NULL for hosts.
//   - fleet_counts holds how many machines there are per kind, state and
//     pair of binding classes.
//
// Triggers keep all three right in the writing transaction, whichever path
// writes (ingestion one by one or set-based, decommission, deletes,
// ExpectedMachine edits, a repair in SQL): a change of a machine, of its
// network config, of the ExpectedDpu declaring its serial, or of the
// ExpectedMachine matching its BMC MAC recomputes the machine's columns
// from the current rows, and a change of those columns moves the machine
// from one fleet_counts row to another. `ipledger check` recounts them.
//
// Each is backfilled from the existing rows.

// fleetNameSQL is the sort name of the machine whose BMC MAC, chassis
// serial and machine_id are the given SQL expressions.
func fleetNameSQL(mac, chassis, id string) string {
	return strings.NewReplacer("$MAC", mac, "$CHASSIS", chassis, "$ID", id).Replace(
		`LOWER(COALESCE(NULLIF(TRIM((SELECT MIN(em.metadata_name) FROM expected_machines em WHERE LOWER(em.bmc_mac_address) = LOWER($MAC))), ''), NULLIF(TRIM($CHASSIS), ''), $MAC, $ID))`)
}

// fleetBindingSQL is the binding class of one family (col: loopback_ip or
// loopback_ip_v6) of the DPU with the given machine_id and serial
// expressions; allocator.bindingStatus is the same decision.
func fleetBindingSQL(col, id, serial string) string {
	return strings.NewReplacer("$COL", col, "$ID", id, "$SERIAL", serial).Replace(
		`(SELECT CASE WHEN x.a IS NOT NULL AND x.r IS NULL THEN 'automatic' WHEN x.a IS NOT NULL AND x.a = x.r THEN 'reserved' ` +
			`WHEN x.a IS NOT NULL THEN 'pending' WHEN x.r IS NOT NULL THEN 'conflict' ELSE 'unbound' END ` +
			`FROM (SELECT (SELECT nc.$COL FROM network_configs nc WHERE nc.machine_id = $ID) AS a, ` +
			`(SELECT ed.$COL FROM expected_dpus ed WHERE ed.serial_number = $SERIAL) AS r) x)`)
}

// fleetRebindSQL recomputes the binding classes of the DPUs that where
// selects (a condition on machines m).
func fleetRebindSQL(where string) string {
	v4 := fleetBindingSQL("loopback_ip", "machines.machine_id", "machines.serial_number")
	v6 := fleetBindingSQL("loopback_ip_v6", "machines.machine_id", "machines.serial_number")
	return `UPDATE machines SET binding_v4 = ` + v4 + `, binding_v6 = ` + v6 +
		` WHERE machines.kind = 'dpu' AND (` + where + `)`
}

// fleetRenameSQL recomputes the sort names of the machines where selects.
func fleetRenameSQL(where string) string {
	return `UPDATE machines SET sort_name = ` + fleetNameSQL("machines.bmc_mac_address", "machines.chassis_serial_number", "machines.machine_id") +
		` WHERE ` + where
}

const fleetCountsTable = `
CREATE TABLE fleet_counts (
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  binding_v4 TEXT NOT NULL,
  binding_v6 TEXT NOT NULL,
  n BIGINT NOT NULL,
  PRIMARY KEY (kind, state, binding_v4, binding_v6)
)
--;
CREATE INDEX machines_binding_v4 ON machines (binding_v4, machine_id) WHERE kind = 'dpu'
--;
CREATE INDEX machines_binding_v6 ON machines (binding_v6, machine_id) WHERE kind = 'dpu'
--;
CREATE INDEX machines_hostless ON machines (serial_number) WHERE kind = 'dpu' AND host_machine_id IS NULL
--;
`

// fleetBackfill fills the new columns and the counts from existing rows.
var fleetBackfill = fleetRenameSQL("1 = 1") + `
--;
` + fleetRebindSQL("1 = 1") + `
--;
CREATE INDEX machines_sort_name ON machines (sort_name, machine_id) WHERE kind = 'host' AND host_machine_id IS NULL
--;
INSERT INTO fleet_counts (kind, state, binding_v4, binding_v6, n)
SELECT kind, state, COALESCE(binding_v4, ''), COALESCE(binding_v6, ''), COUNT(*) FROM machines
GROUP BY kind, state, COALESCE(binding_v4, ''), COALESCE(binding_v6, '')
`

// fleetCountSQL adds d (1 or -1) to the fleet_counts row of the machine
// row r (NEW or OLD).
func fleetCountSQL(r, d string) string {
	return strings.NewReplacer("$R", r, "$D", d).Replace(
		`INSERT INTO fleet_counts (kind, state, binding_v4, binding_v6, n) ` +
			`VALUES ($R.kind, $R.state, COALESCE($R.binding_v4, ''), COALESCE($R.binding_v6, ''), $D) ` +
			`ON CONFLICT (kind, state, binding_v4, binding_v6) DO UPDATE SET n = fleet_counts.n + excluded.n`)
}

var schemaV23Postgres = `
ALTER TABLE machines ADD COLUMN sort_name TEXT COLLATE "C"
--;
ALTER TABLE machines ADD COLUMN binding_v4 TEXT
--;
ALTER TABLE machines ADD COLUMN binding_v6 TEXT
--;
` + fleetCountsTable + fleetBackfill + `
--;
CREATE FUNCTION ipledger_machine_derive() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.sort_name := ` + fleetNameSQL("NEW.bmc_mac_address", "NEW.chassis_serial_number", "NEW.machine_id") + `;
  IF NEW.kind = 'dpu' THEN
    NEW.binding_v4 := ` + fleetBindingSQL("loopback_ip", "NEW.machine_id", "NEW.serial_number") + `;
    NEW.binding_v6 := ` + fleetBindingSQL("loopback_ip_v6", "NEW.machine_id", "NEW.serial_number") + `;
  ELSE
    NEW.binding_v4 := NULL;
    NEW.binding_v6 := NULL;
  END IF;
  RETURN NEW;
END $$
--;
CREATE TRIGGER machines_derive BEFORE INSERT OR UPDATE OF kind, bmc_mac_address, chassis_serial_number, serial_number ON machines
  FOR EACH ROW EXECUTE FUNCTION ipledger_machine_derive()
--;
CREATE FUNCTION ipledger_machine_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    ` + fleetCountSQL("OLD", "-1") + `;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    ` + fleetCountSQL("NEW", "1") + `;
  END IF;
  RETURN NULL;
END $$
--;
CREATE TRIGGER machines_count AFTER INSERT OR DELETE OR UPDATE OF kind, state, binding_v4, binding_v6 ON machines
  FOR EACH ROW EXECUTE FUNCTION ipledger_machine_count()
--;
CREATE FUNCTION ipledger_network_config_rebind() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    ` + fleetRebindSQL("machines.machine_id = OLD.machine_id") + `;
  ELSE
    ` + fleetRebindSQL("machines.machine_id = NEW.machine_id") + `;
  END IF;
  RETURN NULL;
END $$
--;
CREATE TRIGGER network_configs_rebind AFTER INSERT OR DELETE OR UPDATE OF machine_id, loopback_ip, loopback_ip_v6 ON network_configs
  FOR EACH ROW EXECUTE FUNCTION ipledger_network_config_rebind()
--;
CREATE FUNCTION ipledger_expected_dpu_rebind() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    ` + fleetRebindSQL("machines.serial_number = OLD.serial_number") + `;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    ` + fleetRebindSQL("machines.serial_number = NEW.serial_number") + `;
  END IF;
  RETURN NULL;
END $$
--;
CREATE TRIGGER expected_dpus_rebind AFTER INSERT OR DELETE OR UPDATE OF serial_number, loopback_ip, loopback_ip_v6 ON expected_dpus
  FOR EACH ROW EXECUTE FUNCTION ipledger_expected_dpu_rebind()
--;
CREATE FUNCTION ipledger_expected_machine_rename() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    ` + fleetRenameSQL("machines.bmc_mac_address = LOWER(OLD.bmc_mac_address)") + `;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    ` + fleetRenameSQL("machines.bmc_mac_address = LOWER(NEW.bmc_mac_address)") + `;
  END IF;
  RETURN NULL;
END $$
--;
CREATE TRIGGER expected_machines_rename AFTER INSERT OR DELETE OR UPDATE OF bmc_mac_address, metadata_name ON expected_machines
  FOR EACH ROW EXECUTE FUNCTION ipledger_expected_machine_rename()
`

var schemaV23SQLite = `
ALTER TABLE machines ADD COLUMN sort_name TEXT
--;
ALTER TABLE machines ADD COLUMN binding_v4 TEXT
--;
ALTER TABLE machines ADD COLUMN binding_v6 TEXT
--;
` + fleetCountsTable + fleetBackfill + `
--;
CREATE TRIGGER machines_count_insert AFTER INSERT ON machines
BEGIN
  ` + fleetCountSQL("NEW", "1") + `;
  ` + fleetRenameSQL("machines.machine_id = NEW.machine_id") + `;
  ` + fleetRebindSQL("machines.machine_id = NEW.machine_id") + `;
END
--;
CREATE TRIGGER machines_derive_update AFTER UPDATE OF kind, bmc_mac_address, chassis_serial_number, serial_number ON machines
BEGIN
  ` + fleetRenameSQL("machines.machine_id = NEW.machine_id") + `;
  UPDATE machines SET binding_v4 = NULL, binding_v6 = NULL WHERE machine_id = NEW.machine_id AND kind <> 'dpu';
  ` + fleetRebindSQL("machines.machine_id = NEW.machine_id") + `;
END
--;
CREATE TRIGGER machines_count_update AFTER UPDATE OF kind, state, binding_v4, binding_v6 ON machines
BEGIN
  ` + fleetCountSQL("OLD", "-1") + `;
  ` + fleetCountSQL("NEW", "1") + `;
END
--;
CREATE TRIGGER machines_count_delete AFTER DELETE ON machines
BEGIN
  ` + fleetCountSQL("OLD", "-1") + `;
END
--;
CREATE TRIGGER network_configs_rebind_insert AFTER INSERT ON network_configs
BEGIN
  ` + fleetRebindSQL("machines.machine_id = NEW.machine_id") + `;
END
--;
CREATE TRIGGER network_configs_rebind_update AFTER UPDATE OF machine_id, loopback_ip, loopback_ip_v6 ON network_configs
BEGIN
  ` + fleetRebindSQL("machines.machine_id = OLD.machine_id OR machines.machine_id = NEW.machine_id") + `;
END
--;
CREATE TRIGGER network_configs_rebind_delete AFTER DELETE ON network_configs
BEGIN
  ` + fleetRebindSQL("machines.machine_id = OLD.machine_id") + `;
END
--;
CREATE TRIGGER expected_dpus_rebind_insert AFTER INSERT ON expected_dpus
BEGIN
  ` + fleetRebindSQL("machines.serial_number = NEW.serial_number") + `;
END
--;
CREATE TRIGGER expected_dpus_rebind_update AFTER UPDATE OF serial_number, loopback_ip, loopback_ip_v6 ON expected_dpus
BEGIN
  ` + fleetRebindSQL("machines.serial_number = OLD.serial_number OR machines.serial_number = NEW.serial_number") + `;
END
--;
CREATE TRIGGER expected_dpus_rebind_delete AFTER DELETE ON expected_dpus
BEGIN
  ` + fleetRebindSQL("machines.serial_number = OLD.serial_number") + `;
END
--;
CREATE TRIGGER expected_machines_rename_insert AFTER INSERT ON expected_machines
BEGIN
  ` + fleetRenameSQL("machines.bmc_mac_address = LOWER(NEW.bmc_mac_address)") + `;
END
--;
CREATE TRIGGER expected_machines_rename_update AFTER UPDATE OF bmc_mac_address, metadata_name ON expected_machines
BEGIN
  ` + fleetRenameSQL("machines.bmc_mac_address = LOWER(OLD.bmc_mac_address) OR machines.bmc_mac_address = LOWER(NEW.bmc_mac_address)") + `;
END
--;
CREATE TRIGGER expected_machines_rename_delete AFTER DELETE ON expected_machines
BEGIN
  ` + fleetRenameSQL("machines.bmc_mac_address = LOWER(OLD.bmc_mac_address)") + `;
END
`
