package models

// schemaV10Postgres announces every committed change to api_tokens on the
// notification channel ipledger_api_tokens (allocator.TokenChannel), once
// per statement, whoever makes it: ipledger serve, the CLI, or an operator
// with psql. Servers cache the tokens they authenticated only while they
// listen on that channel, and empty the cache on each notification, so a
// deleted token stops working everywhere as soon as PostgreSQL delivers
// the notification (milliseconds), without a database read per request.
// SQLite has no notifications; its servers read the token every time.
const schemaV10Postgres = `
CREATE FUNCTION ipledger_api_tokens_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('ipledger_api_tokens', TG_OP);
  RETURN NULL;
END $$
--;
CREATE TRIGGER api_tokens_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON api_tokens
  FOR EACH STATEMENT EXECUTE FUNCTION ipledger_api_tokens_changed()
`
