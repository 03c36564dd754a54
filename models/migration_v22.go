package models

// schemaV22 counts the redeliveries asked of each webhook delivery. The
// delivery worker records an attempt's result only if the count is the one
// it read before sending: a redeliver asked while an attempt is in flight
// is then not overwritten by that attempt's "delivered" and the delivery
// is made once more (docs/feed.md, "Delivery").
const schemaV22 = `
ALTER TABLE webhook_deliveries ADD COLUMN redeliveries INTEGER NOT NULL DEFAULT 0
  CONSTRAINT webhook_deliveries_redeliveries CHECK (redeliveries >= 0)
`
