package models

// schemaV33 keeps, on each audit event, the names of the machines and the
// ExpectedMachine it mentions as they were when it was written
// (docs/console.md "Audit log names"): a JSON object from each id — the
// event's object when it is a machine or an ExpectedMachine, and the
// machines its documents name as owners or hosts — to the name the
// console gave it then (allocator/names.go). Names change (an
// ExpectedMachine renamed or deleted renames its host), and an event must
// keep showing what the operator saw when it happened. NULL for an event
// that mentions no machine and for every event written before this
// migration, which the console names as they are now. The API and the
// change feed do not show it (docs/decisions.md "Audit events keep the
// names they had").
const schemaV33 = `
ALTER TABLE audit_events ADD COLUMN names_json TEXT
`
