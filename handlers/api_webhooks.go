package handlers

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/webhook"
)

// WebhookBody is the JSON of a webhook create or patch; a pointer is nil
// when the member is absent. Pools keeps its raw form so that PATCH can
// tell null (every pool) from absent (unchanged).
type WebhookBody struct {
	Name    *string         `json:"name"`
	URL     *string         `json:"url"`
	Secret  *string         `json:"secret"`
	Actions *[]string       `json:"actions"`
	Pools   json.RawMessage `json:"pools"`
	Enabled *bool           `json:"enabled"`
}

func (b *WebhookBody) pools() (set bool, pools []string, err error) {
	if b.Pools == nil {
		return false, nil, nil
	}
	if strings.TrimSpace(string(b.Pools)) == "null" {
		return true, nil, nil
	}
	if err := json.Unmarshal(b.Pools, &pools); err != nil || pools == nil {
		return false, nil, fault.Errf(fault.CodeInvalid, "pools", "pools must be a JSON array of pool names, or null for every pool")
	}
	return true, pools, nil
}

func webhookLocation(id string) string { return "/api/v1/webhooks/" + url.PathEscape(id) }

// CreateWebhook: POST /api/v1/webhooks {name, url, secret, actions, pools?, enabled?}.
func (h *API) CreateWebhook(c echo.Context) error {
	var b WebhookBody
	if err := DecodeJSONStrict(c, &b); err != nil {
		return err
	}
	for _, m := range []struct {
		name    string
		present bool
	}{{"name", b.Name != nil}, {"url", b.URL != nil}, {"secret", b.Secret != nil}, {"actions", b.Actions != nil}} {
		if !m.present {
			return fault.Errf(fault.CodeInvalid, m.name, "%s is required", m.name)
		}
	}
	_, pools, err := b.pools()
	if err != nil {
		return err
	}
	w, err := h.Hooks.CreateWebhook(Ctx(c), webhook.WebhookSpec{Name: *b.Name, URL: *b.URL, Secret: *b.Secret,
		Actions: *b.Actions, Pools: pools, Enabled: b.Enabled})
	if err != nil {
		return err
	}
	c.Response().Header().Set("Location", webhookLocation(w.ID))
	setETag(c, w.Version)
	return c.JSON(http.StatusCreated, w)
}

// ListWebhooks: GET /api/v1/webhooks.
func (h *API) ListWebhooks(c echo.Context) error {
	if err := OnlyQuery(c); err != nil {
		return err
	}
	ws, err := h.Hooks.ListWebhooks(Ctx(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"items": ws})
}

// GetWebhook: GET /api/v1/webhooks/{id}.
func (h *API) GetWebhook(c echo.Context) error {
	w, err := h.Hooks.GetWebhook(Ctx(c), Param(c, "id"))
	if err != nil {
		return err
	}
	setETag(c, w.Version)
	return c.JSON(http.StatusOK, w)
}

// PatchWebhook: PATCH /api/v1/webhooks/{id} (If-Match honoured); absent
// members keep their value, "pools": null means every pool.
func (h *API) PatchWebhook(c echo.Context) error {
	var b WebhookBody
	if err := DecodeJSONStrict(c, &b); err != nil {
		return err
	}
	set, pools, err := b.pools()
	if err != nil {
		return err
	}
	w, err := h.Hooks.PatchWebhook(Ctx(c), Param(c, "id"), webhook.WebhookPatch{Name: b.Name, URL: b.URL, Secret: b.Secret,
		Actions: b.Actions, PoolsSet: set, Pools: pools, Enabled: b.Enabled}, IfMatchOf(c))
	if err != nil {
		return err
	}
	setETag(c, w.Version)
	return c.JSON(http.StatusOK, w)
}

// DeleteWebhook: DELETE /api/v1/webhooks/{id} (If-Match honoured).
func (h *API) DeleteWebhook(c echo.Context) error {
	if err := h.Hooks.DeleteWebhook(Ctx(c), Param(c, "id"), IfMatchOf(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// ListDeliveries: GET /api/v1/webhooks/{id}/deliveries?state=&limit=&cursor=,
// newest event first.
func (h *API) ListDeliveries(c echo.Context) error {
	if err := OnlyQuery(c, "state", "limit", "cursor"); err != nil {
		return err
	}
	limit, err := Limit(c)
	if err != nil {
		return err
	}
	page, err := h.Hooks.ListDeliveries(Ctx(c), Param(c, "id"), webhook.DeliveryFilter{State: c.QueryParam("state"), Limit: limit, Cursor: c.QueryParam("cursor")})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// Redeliver: POST /api/v1/webhooks/{id}/deliveries/{delivery}:redeliver.
func (h *API) Redeliver(c echo.Context) error {
	d, ok := strings.CutSuffix(Param(c, "delivery"), ":redeliver")
	if !ok {
		return fault.Errf(fault.CodeNotFound, "", "unknown action on delivery %q", Param(c, "delivery"))
	}
	out, err := h.Hooks.Redeliver(Ctx(c), Param(c, "id"), d)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
