package models

// schemaV27 keeps, with a single sign-on session, the ID token the issuer
// gave at sign-in, for sign-out's id_token_hint (docs/identity.md). It is
// stored sealed: AES-GCM under a key derived from the session id, which
// the database does not hold (only its SHA-256), so a copy of the
// database or of a backup holds no usable token. The CHECK keeps a
// plaintext token out (a JWT starts "eyJ", a sealed one "v1.") and bounds
// its size. NULL: no token (a session opened before this migration, or a
// token too large to keep).
const schemaV27 = `
ALTER TABLE user_sessions ADD COLUMN id_token TEXT
  CONSTRAINT user_sessions_id_token_sealed CHECK (id_token IS NULL OR (substr(id_token, 1, 3) = 'v1.' AND length(id_token) <= 16384))
`
