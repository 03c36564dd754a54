package models

import "time"

// Webhook is one admin-set receiver of the change feed (docs/feed.md).
// Actions and Pools are JSON arrays of the feed's filters; Pools nil means
// every pool and the events that belong to none. Secret signs every
// delivery and is never shown.
type Webhook struct {
	ID         int64 `gorm:"primaryKey"`
	Name       string
	URL        string `gorm:"column:url"`
	Secret     string
	Actions    string
	Pools      *string
	Enabled    bool
	Version    int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
	LeaseOwner *string
	LeaseUntil *time.Time
}

// WebhookDelivery is one event queued for one webhook: pending until it is
// answered with a 2xx (delivered) or its retries run out (failed).
type WebhookDelivery struct {
	ID            int64 `gorm:"primaryKey"`
	WebhookID     int64
	DeliveryID    string
	EventID       int64
	Revision      int64
	Action        string
	State         string
	Attempts      int
	Redeliveries  int // bumped by every redeliver (migration 22)
	StatusCode    *int
	Error         string
	ResponseBody  string
	CreatedAt     time.Time
	GiveUpAt      time.Time
	NextAttemptAt *time.Time
	DeliveredAt   *time.Time
}

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)
