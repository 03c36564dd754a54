package models

// schemaV13 is the change feed and its webhooks (docs/feed.md).
//
//   - audit_events.revision is the event's place in commit order. Writers
//     insert events without it; the feed's sequencer (allocator/
//     feed_sequencer.go) numbers committed events afterwards, one
//     sequencer transaction at a time, so revisions become visible in
//     increasing order and a reader that resumes after revision R never
//     misses one. Existing events are numbered here in id order.
//     audit_events_unsequenced is the sequencer's work list.
//   - webhooks are the admin-set receivers; the secret is stored because
//     each delivery is signed with it, and never leaves the server.
//     lease_owner/lease_until is the one-delivery-in-flight lease.
//   - webhook_deliveries is the queue: one row per (webhook, event),
//     created by the sequencer in the transaction that gives the event its
//     revision, so an event is queued exactly once per webhook (the unique
//     key) and a kill -9 at any moment loses nothing.
const schemaV13 = `
ALTER TABLE audit_events ADD COLUMN revision BIGINT
--;
UPDATE audit_events SET revision = s.rn
FROM (SELECT id, row_number() OVER (ORDER BY id) AS rn FROM audit_events) AS s
WHERE audit_events.id = s.id
--;
CREATE UNIQUE INDEX audit_events_revision ON audit_events (revision)
--;
CREATE INDEX audit_events_unsequenced ON audit_events (id) WHERE revision IS NULL
--;
CREATE TABLE webhooks (
  id {{ID}},
  name TEXT NOT NULL,
  url TEXT NOT NULL,
  secret TEXT NOT NULL,
  actions TEXT NOT NULL,
  pools TEXT,
  enabled BOOLEAN NOT NULL,
  version BIGINT NOT NULL DEFAULT 1,
  created_at {{TS}} NOT NULL,
  updated_at {{TS}} NOT NULL,
  lease_owner TEXT,
  lease_until {{TS}},
  CONSTRAINT webhooks_name_key UNIQUE (name),
  CONSTRAINT webhooks_url_scheme CHECK (url LIKE 'http://%' OR url LIKE 'https://%'),
  CONSTRAINT webhooks_secret_set CHECK (length(secret) > 0),
  CONSTRAINT webhooks_actions_set CHECK (length(actions) > 2)
)
--;
CREATE TABLE webhook_deliveries (
  id {{ID}},
  webhook_id BIGINT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
  delivery_id TEXT NOT NULL,
  event_id BIGINT NOT NULL REFERENCES audit_events(id),
  revision BIGINT NOT NULL,
  action TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending','delivered','failed')),
  attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  status_code INTEGER,
  error TEXT NOT NULL DEFAULT '',
  response_body TEXT NOT NULL DEFAULT '',
  created_at {{TS}} NOT NULL,
  give_up_at {{TS}} NOT NULL,
  next_attempt_at {{TS}},
  delivered_at {{TS}},
  CONSTRAINT webhook_deliveries_delivery_key UNIQUE (delivery_id),
  CONSTRAINT webhook_deliveries_event_key UNIQUE (webhook_id, revision),
  CONSTRAINT webhook_deliveries_pending_due CHECK (state <> 'pending' OR next_attempt_at IS NOT NULL),
  CONSTRAINT webhook_deliveries_body_size CHECK (length(response_body) <= 4096)
)
--;
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (webhook_id, revision) WHERE state = 'pending'
`
