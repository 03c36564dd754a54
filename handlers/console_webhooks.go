package handlers

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/views"
)

// splitList splits a comma- or space-separated form field.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
}

// Webhooks: GET /webhooks (admin) — the webhooks and a create form.
func (h *Console) Webhooks(c echo.Context) error {
	v := views.WebhooksView{Page: h.page(c, "Webhooks", "webhooks"), Errors: views.Errors{}, Form: views.WebhookForm{Actions: "allocation.*", Enabled: true}}
	ws, err := h.A.ListWebhooks(Ctx(c))
	if err != nil {
		return err
	}
	v.Webhooks = ws
	return render(c, http.StatusOK, views.WebhooksPage(v))
}

// CreateWebhook: POST /webhooks (admin). A refused form is shown again
// with the allocator's message beside its field (the secret is not
// echoed); success goes to the webhook's page.
func (h *Console) CreateWebhook(c echo.Context) error {
	form := views.WebhookForm{Name: formValue(c, "name"), URL: formValue(c, "url"), Actions: formValue(c, "actions"),
		Pools: formValue(c, "pools"), Enabled: c.FormValue("enabled") == "true"}
	spec := allocator.WebhookSpec{Name: form.Name, URL: form.URL, Secret: c.FormValue("secret"), Actions: splitList(form.Actions), Enabled: &form.Enabled}
	if p := splitList(form.Pools); len(p) > 0 {
		spec.Pools = p
	}
	w, err := h.A.CreateWebhook(Ctx(c), spec)
	if err != nil {
		if !isFormError(err) {
			return err
		}
		v := views.WebhooksView{Page: h.page(c, "Webhooks", "webhooks"), Form: form, Errors: views.Errors{}}
		for f, m := range views.FromError(err) {
			// actions[2] is the actions field of this form.
			if i := strings.IndexByte(f, '['); i > 0 {
				f = f[:i]
			}
			v.Errors[f] = m
		}
		if v.Webhooks, err = h.A.ListWebhooks(Ctx(c)); err != nil {
			return err
		}
		return render(c, formStatus(err), views.WebhooksPage(v))
	}
	return h.redirect(c, views.WebhookURL(w.ID), "ok", "Webhook "+w.Name+" created.")
}

// Webhook: GET /webhooks/{id} (admin) — the webhook and its delivery log
// (?state=, ?cursor=).
func (h *Console) Webhook(c echo.Context) error {
	w, err := h.A.GetWebhook(Ctx(c), Param(c, "id"))
	if err != nil {
		return err
	}
	v := views.WebhookView{Page: h.page(c, "Webhook "+w.Name, "webhooks"), Webhook: *w, State: c.QueryParam("state")}
	page, err := h.A.ListDeliveries(Ctx(c), w.ID, allocator.DeliveryFilter{State: v.State, Limit: 100, Cursor: c.QueryParam("cursor")})
	if err != nil {
		return err
	}
	v.Deliveries, v.Next = page.Items, page.NextCursor
	return render(c, http.StatusOK, views.WebhookPage(v))
}

// RedeliverWebhook: POST /webhooks/{id}/redeliver (admin, form field
// delivery).
func (h *Console) RedeliverWebhook(c echo.Context) error {
	id, delivery := Param(c, "id"), formValue(c, "delivery")
	d, err := h.A.Redeliver(Ctx(c), id, delivery)
	if err != nil {
		if isFormError(err) {
			e, _ := allocator.AsError(err)
			return h.redirect(c, views.WebhookURL(id), "bad", e.Message)
		}
		return err
	}
	return h.redirect(c, views.WebhookURL(id), "ok", "Delivery of revision "+strconv.FormatInt(d.Revision, 10)+" queued again.")
}

// DeleteWebhook: POST /webhooks/{id}/delete (admin).
func (h *Console) DeleteWebhook(c echo.Context) error {
	if err := h.A.DeleteWebhook(Ctx(c), Param(c, "id"), nil); err != nil {
		if isFormError(err) {
			e, _ := allocator.AsError(err)
			return h.redirect(c, "/webhooks", "bad", e.Message)
		}
		return err
	}
	return h.redirect(c, "/webhooks", "ok", "Webhook deleted with its queue.")
}
