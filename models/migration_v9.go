package models

// schemaV9 stores console sessions server-side, so that signing out (or
// deleting the token) ends a session even if a copy of its cookie survives.
// id is the SHA-256 (hex) of the random session id the signed cookie
// carries, never the id itself; expires_at is Unix seconds and slides
// forward while the session is used (the NOC wallboard stays signed in).
// A session belongs to one API token and goes with it (ON DELETE CASCADE;
// allocator.DeleteToken also deletes the rows in the same transaction).
const schemaV9 = `
CREATE TABLE console_sessions (
  id TEXT PRIMARY KEY,
  token_id BIGINT NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  CONSTRAINT console_sessions_id_hex CHECK (length(id) = 64),
  CONSTRAINT console_sessions_expiry CHECK (expires_at > created_at)
)
--;
CREATE INDEX console_sessions_token ON console_sessions (token_id)
--;
CREATE INDEX console_sessions_expires ON console_sessions (expires_at)
`
