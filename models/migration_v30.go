package models

// schemaV30 remembers the ID tokens ipledger received at console
// sign-ins (docs/identity.md "JWT bearer tokens (REST and gRPC)"): such
// a token is never a bearer credential, also after its session ended,
// expired or the server restarted, until the token's own exp (expires_at,
// with the verifier's leeway). A row holds only a SHA-256 of the token's signed
// part, never the token: the CHECK takes 64 lower-case hexadecimal
// digits and nothing else, so a token written here by mistake is
// refused by the database itself.
const schemaV30Postgres = `
CREATE TABLE signin_id_tokens (
  hash TEXT PRIMARY KEY,
  expires_at BIGINT NOT NULL,
  CONSTRAINT signin_id_tokens_hash_hex CHECK (hash ~ '^[0-9a-f]{64}$')
)
--;
CREATE INDEX signin_id_tokens_expires ON signin_id_tokens (expires_at)
`

const schemaV30SQLite = `
CREATE TABLE signin_id_tokens (
  hash TEXT PRIMARY KEY,
  expires_at BIGINT NOT NULL,
  CONSTRAINT signin_id_tokens_hash_hex CHECK (length(hash) = 64 AND hash NOT GLOB '*[^0-9a-f]*')
)
--;
CREATE INDEX signin_id_tokens_expires ON signin_id_tokens (expires_at)
`
