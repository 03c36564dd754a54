package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// Webhook is a webhook as the API shows it; the secret never leaves the
// server (SecretSet says one is stored).
type Webhook struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	Actions   []string  `json:"actions"`
	Pools     *[]string `json:"pools"` // null: every pool and events of none
	Enabled   bool      `json:"enabled"`
	SecretSet bool      `json:"secret_set"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Pending counts the deliveries waiting for the receiver.
	Pending int64 `json:"pending"`
}

// WebhookSpec creates a webhook. Pools nil means every pool.
type WebhookSpec struct {
	Name    string
	URL     string
	Secret  string
	Actions []string
	Pools   []string
	Enabled *bool // nil: true
}

// WebhookPatch changes the fields it carries; PoolsSet with Pools nil
// goes back to every pool.
type WebhookPatch struct {
	Name     *string
	URL      *string
	Secret   *string
	Actions  *[]string
	PoolsSet bool
	Pools    []string
	Enabled  *bool
}

// Secret lengths: long enough to resist guessing, short enough to type.
const (
	minSecretLen = 16
	maxSecretLen = 256
	maxURLLen    = 2048
)

// validateWebhook checks a webhook's fields, naming the JSON member.
func validateWebhook(w *models.Webhook, actions, pools []string) error {
	if !ident.ValidPoolName(w.Name) {
		return fault.Errf(fault.CodeInvalid, "name", "name %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", w.Name)
	}
	if err := validateWebhookURL(w.URL); err != nil {
		return err
	}
	if n := len(w.Secret); n < minSecretLen || n > maxSecretLen {
		return fault.Errf(fault.CodeInvalid, "secret", "secret must be %d to %d bytes long, not %d", minSecretLen, maxSecretLen, n)
	}
	if strings.ContainsRune(w.Secret, 0) {
		return fault.Errf(fault.CodeInvalid, "secret", "secret contains a NUL character")
	}
	if len(actions) == 0 {
		return fault.Errf(fault.CodeInvalid, "actions", "actions must list at least one action, prefix (allocation.*) or *")
	}
	seen := map[string]bool{}
	for i, s := range actions {
		f := fmt.Sprintf("actions[%d]", i)
		if _, err := feed.ParseActionFilter(f, s); err != nil {
			return err
		}
		if err := checkActionMatches(f, s); err != nil {
			return err
		}
		if seen[s] {
			return fault.Errf(fault.CodeInvalid, f, "%s %q is listed twice", f, s)
		}
		seen[s] = true
	}
	if pools != nil {
		if len(pools) == 0 {
			return fault.Errf(fault.CodeInvalid, "pools", "pools is empty (no event would match); leave it out for every pool")
		}
		seenP := map[string]bool{}
		for i, p := range pools {
			f := fmt.Sprintf("pools[%d]", i)
			if !ident.ValidPoolName(p) {
				return fault.Errf(fault.CodeInvalid, f, "%s %q is not a pool name", f, p)
			}
			if seenP[p] {
				return fault.Errf(fault.CodeInvalid, f, "%s %q is listed twice", f, p)
			}
			seenP[p] = true
		}
	}
	a, _ := json.Marshal(actions)
	w.Actions = string(a)
	w.Pools = nil
	if pools != nil {
		p, _ := json.Marshal(pools)
		s := string(p)
		w.Pools = &s
	}
	return nil
}

func validateWebhookURL(s string) error {
	if len(s) > maxURLLen {
		return fault.Errf(fault.CodeInvalid, "url", "url is longer than %d bytes", maxURLLen)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return fault.Errf(fault.CodeInvalid, "url", "url %q must be an absolute http:// or https:// URL", s)
	}
	if u.Scheme+"://" != s[:len(u.Scheme)+3] {
		return fault.Errf(fault.CodeInvalid, "url", "url %q must start with http:// or https:// in lower case", s)
	}
	if u.User != nil {
		return fault.Errf(fault.CodeInvalid, "url", "url must not carry a user or password; the receiver checks the X-Ipledger-Signature header instead")
	}
	if u.Fragment != "" {
		return fault.Errf(fault.CodeInvalid, "url", "url %q has a fragment, which is never sent", s)
	}
	return nil
}

// webhookAudit is what a webhook's audit event records: never the secret,
// and of the URL only its scheme and host (paths often carry a token).
func webhookAudit(w *models.Webhook) map[string]any {
	host := ""
	if u, err := url.Parse(w.URL); err == nil {
		host = u.Scheme + "://" + u.Host
	}
	out := webhookOut(w, 0)
	return map[string]any{"id": out.ID, "name": w.Name, "url_host": host, "actions": out.Actions, "pools": out.Pools, "enabled": w.Enabled}
}

func webhookOut(w *models.Webhook, pending int64) Webhook {
	out := Webhook{ID: strconv.FormatInt(w.ID, 10), Name: w.Name, URL: w.URL, Enabled: w.Enabled, SecretSet: w.Secret != "",
		Version: w.Version, CreatedAt: w.CreatedAt.UTC(), UpdatedAt: w.UpdatedAt.UTC(), Pending: pending, Actions: []string{}}
	_ = json.Unmarshal([]byte(w.Actions), &out.Actions)
	if w.Pools != nil {
		_ = json.Unmarshal([]byte(*w.Pools), &out.Pools)
	}
	return out
}

// webhookMatch selects the events a webhook wants.
type webhookMatch struct {
	actions []feed.ActionFilter
	pools   map[string]bool // nil: every pool and events of none
}

func webhookMatcher(w *models.Webhook) (*webhookMatch, error) {
	var acts, pools []string
	if err := json.Unmarshal([]byte(w.Actions), &acts); err != nil {
		return nil, fmt.Errorf("webhook %d: stored actions: %w", w.ID, err)
	}
	m := &webhookMatch{}
	for _, s := range acts {
		f, err := feed.ParseActionFilter("actions", s)
		if err != nil {
			return nil, err
		}
		m.actions = append(m.actions, f)
	}
	if w.Pools != nil {
		if err := json.Unmarshal([]byte(*w.Pools), &pools); err != nil {
			return nil, fmt.Errorf("webhook %d: stored pools: %w", w.ID, err)
		}
		m.pools = map[string]bool{}
		for _, p := range pools {
			m.pools[p] = true
		}
	}
	return m, nil
}

func (m *webhookMatch) match(action, objectType, objectID string) bool {
	if m.pools != nil {
		p, _ := audit.EventPool(objectType, objectID)
		if !m.pools[p] {
			return false
		}
	}
	for _, f := range m.actions {
		if f.Match(action) {
			return true
		}
	}
	return false
}

// CreateWebhook stores a new webhook; it receives the events numbered
// after it exists.
func (wh *Service) CreateWebhook(ctx context.Context, spec WebhookSpec) (*Webhook, error) {
	w := models.Webhook{Name: spec.Name, URL: spec.URL, Secret: spec.Secret, Enabled: spec.Enabled == nil || *spec.Enabled, Version: 1}
	if err := validateWebhook(&w, spec.Actions, spec.Pools); err != nil {
		return nil, err
	}
	err := wh.write(ctx, func(t *txn.Tx) error {
		if err := checkPoolsExist(t, spec.Pools, nil); err != nil {
			return err
		}
		w.CreatedAt, w.UpdatedAt = t.Now, t.Now
		var n int64
		if err := t.Model(&models.Webhook{}).Where("name = ?", w.Name).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return fault.Errf(fault.CodeConflict, "name", "a webhook named %q exists already", w.Name)
		}
		if err := t.Create(&w).Error; err != nil {
			return err
		}
		return audit.Record(t, "webhook.create", "webhook", strconv.FormatInt(w.ID, 10), nil, webhookAudit(&w))
	})
	if err != nil {
		return nil, err
	}
	out := webhookOut(&w, 0)
	return &out, nil
}

func parseWebhookID(id string) (int64, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return 0, fault.Errf(fault.CodeNotFound, "", "webhook %q does not exist", id)
	}
	return n, nil
}

func webhookRow(t *txn.Tx, id string) (*models.Webhook, error) {
	n, err := parseWebhookID(id)
	if err != nil {
		return nil, err
	}
	var w models.Webhook
	err = t.Where("id = ?", n).Take(&w).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.Errf(fault.CodeNotFound, "", "webhook %q does not exist", id)
	}
	return &w, err
}

// GetWebhook returns one webhook.
func (wh *Service) GetWebhook(ctx context.Context, id string) (*Webhook, error) {
	n, err := parseWebhookID(id)
	if err != nil {
		return nil, err
	}
	var w models.Webhook
	var pending int64
	err = wh.read(ctx, func(db *gorm.DB) error {
		if err := db.Where("id = ?", n).Take(&w).Error; err != nil {
			return err
		}
		return db.Model(&models.WebhookDelivery{}).Where("webhook_id = ? AND state = ?", n, models.DeliveryPending).Count(&pending).Error
	})
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.Errf(fault.CodeNotFound, "", "webhook %q does not exist", id)
	}
	if err != nil {
		return nil, err
	}
	out := webhookOut(&w, pending)
	return &out, nil
}

// ListWebhooks returns every webhook by name.
func (wh *Service) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	var rows []models.Webhook
	type count struct {
		WebhookID int64
		N         int64
	}
	var counts []count
	err := wh.read(ctx, func(db *gorm.DB) error {
		if err := db.Order("name").Find(&rows).Error; err != nil {
			return err
		}
		return db.Raw(`SELECT webhook_id, COUNT(*) AS n FROM webhook_deliveries WHERE state = ? GROUP BY webhook_id`, models.DeliveryPending).Scan(&counts).Error
	})
	if err != nil {
		return nil, err
	}
	pending := map[int64]int64{}
	for _, c := range counts {
		pending[c.WebhookID] = c.N
	}
	out := make([]Webhook, 0, len(rows))
	for i := range rows {
		out = append(out, webhookOut(&rows[i], pending[rows[i].ID]))
	}
	return out, nil
}

// PatchWebhook changes the fields p carries (If-Match: the version).
func (wh *Service) PatchWebhook(ctx context.Context, id string, p WebhookPatch, ifMatch txn.IfMatch) (*Webhook, error) {
	var out Webhook
	err := wh.write(ctx, func(t *txn.Tx) error {
		w, err := webhookRow(t, id)
		if err != nil {
			return err
		}
		if err := ifMatch.Check("webhook "+id, w.Version); err != nil {
			return err
		}
		before := webhookAudit(w)
		cur := webhookOut(w, 0)
		actions, pools, kept := cur.Actions, []string(nil), []string(nil)
		if cur.Pools != nil {
			pools, kept = *cur.Pools, *cur.Pools
		}
		if p.Name != nil {
			w.Name = *p.Name
		}
		if p.URL != nil {
			w.URL = *p.URL
		}
		if p.Secret != nil {
			w.Secret = *p.Secret
		}
		if p.Actions != nil {
			actions = *p.Actions
		}
		if p.PoolsSet {
			pools = p.Pools
		}
		if p.Enabled != nil {
			w.Enabled = *p.Enabled
		}
		if err := validateWebhook(w, actions, pools); err != nil {
			return err
		}
		if err := checkPoolsExist(t, pools, kept); err != nil {
			return err
		}
		var n int64
		if err := t.Model(&models.Webhook{}).Where("name = ? AND id <> ?", w.Name, w.ID).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return fault.Errf(fault.CodeConflict, "name", "a webhook named %q exists already", w.Name)
		}
		res := t.Model(&models.Webhook{}).Where("id = ? AND version = ?", w.ID, w.Version).Updates(map[string]any{
			"name": w.Name, "url": w.URL, "secret": w.Secret, "actions": w.Actions, "pools": w.Pools,
			"enabled": w.Enabled, "version": w.Version + 1, "updated_at": t.Now})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return fault.Errf(fault.CodeStaleVersion, "", "webhook %s changed while it was being edited; read it again and retry", id)
		}
		w.Version++
		w.UpdatedAt = t.Now
		out = webhookOut(w, 0)
		return audit.Record(t, "webhook.update", "webhook", id, before, webhookAudit(w))
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteWebhook removes a webhook and its queue; a delivery in flight at
// that moment finishes, its result is dropped.
func (wh *Service) DeleteWebhook(ctx context.Context, id string, ifMatch txn.IfMatch) error {
	return wh.write(ctx, func(t *txn.Tx) error {
		w, err := webhookRow(t, id)
		if err != nil {
			return err
		}
		if err := ifMatch.Check("webhook "+id, w.Version); err != nil {
			return err
		}
		if err := t.Where("webhook_id = ?", w.ID).Delete(&models.WebhookDelivery{}).Error; err != nil {
			return err
		}
		if err := t.Delete(&models.Webhook{}, w.ID).Error; err != nil {
			return err
		}
		return audit.Record(t, "webhook.delete", "webhook", id, webhookAudit(w), nil)
	})
}
