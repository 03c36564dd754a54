package models

// schemaV20 stores the console sessions of people who signed in through
// single sign-on (docs/identity.md): server-side, one row per session,
// holding only the SHA-256 of the session id, the person's name and the
// role their groups gave them at sign-in. A session never exists without
// a role (the CHECK), and ends at expires_at whatever its use. Token
// sessions (console_sessions) gain last_seen_at for the sessions page.
const schemaV20 = `
CREATE TABLE user_sessions (
  id TEXT PRIMARY KEY,
  username TEXT NOT NULL,
  role TEXT NOT NULL,
  source TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  last_seen_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  CONSTRAINT user_sessions_id_hex CHECK (length(id) = 64),
  CONSTRAINT user_sessions_role CHECK (role IN ('viewer','operator','admin')),
  CONSTRAINT user_sessions_username CHECK (length(username) BETWEEN 1 AND 128),
  CONSTRAINT user_sessions_expiry CHECK (expires_at > created_at)
)
--;
CREATE INDEX user_sessions_expires ON user_sessions (expires_at)
--;
ALTER TABLE console_sessions ADD COLUMN last_seen_at BIGINT NOT NULL DEFAULT 0
`
