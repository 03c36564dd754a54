package models

import "time"

// schemaV17 keeps the name a machine had when it was deleted (force or
// not), so the audit log, the wallboard, the dashboard, the
// ExpectedMachine's page and the quarantine list still name it as
// operators knew it: a host by its ExpectedMachine's name (else chassis
// serial, else BMC MAC), a DPU by its serial. One row per deleted machine;
// a machine ingested again and deleted again overwrites its row.
const schemaV17 = `
CREATE TABLE deleted_machines (
  machine_id {{KEY}} PRIMARY KEY,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  host_machine_id TEXT,
  deleted_at {{TS}} NOT NULL,
  deleted_by TEXT NOT NULL,
  CONSTRAINT deleted_machines_kind CHECK (kind IN ('host','dpu')),
  CONSTRAINT deleted_machines_name CHECK (length(name) BETWEEN 1 AND 512)
)
`

// DeletedMachine is a row of deleted_machines.
type DeletedMachine struct {
	MachineID     string `gorm:"primaryKey"`
	Kind          string
	Name          string
	HostMachineID *string
	DeletedAt     time.Time
	DeletedBy     string
}
