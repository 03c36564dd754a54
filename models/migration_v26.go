package models

// Migration 26: a DPU's BMC MAC address. A site-explorer report may give
// each DPU the MAC of its own BMC; it is stored in machines.bmc_mac_address,
// the column hosts already use, so that the existing unique key
// machines_bmc_mac_key keeps one BMC MAC to one machine across hosts and
// DPUs (docs/decisions.md "A DPU's BMC MAC shares the hosts' column"), and
// that key's index is the search's look-up. This migration adds what the
// column lacked: it holds only the canonical spelling of ident.ParseMAC
// (six lower-case hex octets joined by ':'), so that a second spelling can
// never slip past the unique key. Every door has always stored ParseMAC's
// output, so existing rows pass.
const (
	schemaV26Postgres = `
ALTER TABLE machines ADD CONSTRAINT machines_bmc_mac_canonical
  CHECK (bmc_mac_address IS NULL OR bmc_mac_address ~ '^[0-9a-f]{2}(:[0-9a-f]{2}){5}$')
`
	// SQLite cannot add a CHECK to an existing table: triggers refuse the
	// same rows, with a message IsConstraintViolation recognises.
	schemaV26SQLite = `
CREATE TRIGGER machines_bmc_mac_canonical_insert BEFORE INSERT ON machines
WHEN NEW.bmc_mac_address IS NOT NULL AND NEW.bmc_mac_address NOT GLOB '` + macGlob + `'
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: machines_bmc_mac_canonical'); END
--;
CREATE TRIGGER machines_bmc_mac_canonical_update BEFORE UPDATE OF bmc_mac_address ON machines
WHEN NEW.bmc_mac_address IS NOT NULL AND NEW.bmc_mac_address NOT GLOB '` + macGlob + `'
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: machines_bmc_mac_canonical'); END
`
	macGlob = `[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]`
)
