package models

// schemaV15 backs the console's global search and the wallboard with
// indexes, so every look-up is an index probe whatever the size of the
// site: a chassis serial (machines and ExpectedMachines), an
// ExpectedMachine name in any case (the search compares lower(name)), and
// the newest audit events of one action (recent force deletes), which
// would otherwise walk the whole log backwards until it found a few.
const schemaV15 = `
CREATE INDEX machines_chassis ON machines (chassis_serial_number)
--;
CREATE INDEX expected_machines_chassis ON expected_machines (chassis_serial_number)
--;
CREATE INDEX expected_machines_name ON expected_machines (lower(metadata_name))
--;
CREATE INDEX audit_events_action ON audit_events (action, id)
`
