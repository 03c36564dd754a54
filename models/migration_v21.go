package models

// schemaV21 records the role a signed-in person or API token acted with on
// each audit event (docs/identity.md): NULL for system actors (startup,
// reconcile, the CLI) and for events written before this migration,
// otherwise one of the three roles.
const schemaV21 = `
ALTER TABLE audit_events ADD COLUMN actor_role TEXT
  CONSTRAINT audit_events_actor_role CHECK (actor_role IS NULL OR actor_role IN ('viewer','operator','admin'))
`
