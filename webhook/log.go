package webhook

import (
	"context"
	"errors"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// Delivery is one entry of a webhook's delivery log: an event for the
// webhook, with the result of its last attempt.
type Delivery struct {
	DeliveryID    string     `json:"delivery_id"`
	Revision      int64      `json:"revision"`
	Action        string     `json:"action"`
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	StatusCode    *int       `json:"status_code"`
	Error         string     `json:"error"`
	Response      string     `json:"response"`
	CreatedAt     time.Time  `json:"created_at"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	DeliveredAt   *time.Time `json:"delivered_at"`
}

// DeliveryPage is one page of a delivery log, newest first.
type DeliveryPage struct {
	Items      []Delivery `json:"items"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// DeliveryFilter selects a webhook's deliveries; State "" is every state.
type DeliveryFilter struct {
	State  string
	Limit  int
	Cursor string
}

func deliveryOut(d *models.WebhookDelivery) Delivery {
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC()
		return &u
	}
	return Delivery{DeliveryID: d.DeliveryID, Revision: d.Revision, Action: d.Action, State: d.State, Attempts: d.Attempts,
		StatusCode: d.StatusCode, Error: d.Error, Response: d.ResponseBody, CreatedAt: d.CreatedAt.UTC(),
		NextAttemptAt: utc(d.NextAttemptAt), DeliveredAt: utc(d.DeliveredAt)}
}

// ListDeliveries returns a webhook's delivery log, newest event first,
// keyset-paginated by revision.
func (wh *Service) ListDeliveries(ctx context.Context, webhookID string, f DeliveryFilter) (*DeliveryPage, error) {
	id, err := parseWebhookID(webhookID)
	if err != nil {
		return nil, err
	}
	switch f.State {
	case "", models.DeliveryPending, models.DeliveryDelivered, models.DeliveryFailed:
	default:
		return nil, fault.Errf(fault.CodeInvalid, "state", "state %q is not pending, delivered or failed", f.State)
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	f.Limit = min(f.Limit, 1000)
	var cursor int64
	if f.Cursor != "" {
		if cursor, err = strconv.ParseInt(f.Cursor, 10, 64); err != nil || cursor <= 0 {
			return nil, fault.Errf(fault.CodeInvalid, "cursor", "cursor %q is not one this API returned", f.Cursor)
		}
	}
	var rows []models.WebhookDelivery
	err = wh.read(ctx, func(db *gorm.DB) error {
		var n int64
		if err := db.Model(&models.Webhook{}).Where("id = ?", id).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return fault.Errf(fault.CodeNotFound, "", "webhook %q does not exist", webhookID)
		}
		q := db.Where("webhook_id = ?", id)
		if f.State != "" {
			q = q.Where("state = ?", f.State)
		}
		if cursor > 0 {
			q = q.Where("revision < ?", cursor)
		}
		return q.Order("revision DESC").Limit(f.Limit + 1).Find(&rows).Error
	})
	if err != nil {
		return nil, err
	}
	page := &DeliveryPage{Items: []Delivery{}}
	for i := range rows {
		if i == f.Limit {
			page.NextCursor = strconv.FormatInt(rows[i-1].Revision, 10)
			break
		}
		page.Items = append(page.Items, deliveryOut(&rows[i]))
	}
	return page, nil
}

// Redeliver queues a delivery again, due now, with the same delivery id
// and a fresh 24-hour window; as the oldest pending delivery of its
// webhook it is sent before the ones queued after it.
func (wh *Service) Redeliver(ctx context.Context, webhookID, deliveryID string) (*Delivery, error) {
	id, err := parseWebhookID(webhookID)
	if err != nil {
		return nil, err
	}
	var d models.WebhookDelivery
	err = wh.write(ctx, func(t *txn.Tx) error {
		err := t.Where("webhook_id = ? AND delivery_id = ?", id, deliveryID).Take(&d).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return fault.Errf(fault.CodeNotFound, "", "webhook %q has no delivery %q", webhookID, deliveryID)
		}
		if err != nil {
			return err
		}
		now := t.Now
		d.State, d.NextAttemptAt, d.GiveUpAt = models.DeliveryPending, &now, now.Add(wh.engine.opts().GiveUpAfter)
		// The count tells an attempt in flight right now that its result
		// must not mark the delivery delivered (recordAttempt).
		d.Redeliveries++
		if err := t.Model(&models.WebhookDelivery{}).Where("id = ?", d.ID).Updates(map[string]any{
			"state": d.State, "next_attempt_at": now, "give_up_at": d.GiveUpAt,
			"redeliveries": gorm.Expr("redeliveries + 1")}).Error; err != nil {
			return err
		}
		return audit.Record(t, "webhook.redeliver", "webhook", webhookID, nil, map[string]any{"delivery_id": d.DeliveryID, "revision": d.Revision})
	})
	if err != nil {
		return nil, err
	}
	wh.Wake()
	out := deliveryOut(&d)
	return &out, nil
}

// WebhookQueue is one webhook's queue depth (metrics).
type WebhookQueue struct {
	Name    string
	Pending int64
}

// WebhookQueues returns the pending deliveries of every webhook.
func (wh *Service) WebhookQueues(ctx context.Context) ([]WebhookQueue, error) {
	var out []WebhookQueue
	err := wh.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT w.name AS name, (SELECT COUNT(*) FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.state = 'pending') AS pending
FROM webhooks w ORDER BY w.name`).Scan(&out).Error
	})
	return out, err
}
