package handlers

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/txn"
	"github.com/ipledger/ipledger/views"
	"github.com/ipledger/ipledger/webhook"
)

// splitList splits a comma- or space-separated form field.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
}

// Webhooks: GET /webhooks (admin) — the webhooks and a create form.
func (h *Console) Webhooks(c echo.Context) error {
	v := views.WebhooksView{Page: h.page(c, "Webhooks", "webhooks"), Errors: views.Errors{}, Form: views.WebhookForm{Actions: "allocation.*", Enabled: true}}
	ws, err := h.Hooks.ListWebhooks(Ctx(c))
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
	spec := webhook.WebhookSpec{Name: form.Name, URL: form.URL, Secret: c.FormValue("secret"), Actions: splitList(form.Actions), Enabled: &form.Enabled}
	if p := splitList(form.Pools); len(p) > 0 {
		spec.Pools = p
	}
	w, err := h.Hooks.CreateWebhook(Ctx(c), spec)
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
		if v.Webhooks, err = h.Hooks.ListWebhooks(Ctx(c)); err != nil {
			return err
		}
		return render(c, formStatus(err), views.WebhooksPage(v))
	}
	return h.redirect(c, views.WebhookURL(w.ID), "ok", "Webhook "+w.Name+" created.")
}

// Webhook: GET /webhooks/{id} (admin) — the webhook and its delivery log
// (?state=, ?cursor=).
func (h *Console) Webhook(c echo.Context) error {
	w, err := h.Hooks.GetWebhook(Ctx(c), Param(c, "id"))
	if err != nil {
		return err
	}
	v := views.WebhookView{Page: h.page(c, "Webhook "+w.Name, "webhooks"), Webhook: *w, State: c.QueryParam("state")}
	page, err := h.Hooks.ListDeliveries(Ctx(c), w.ID, webhook.DeliveryFilter{State: v.State, Limit: 100, Cursor: c.QueryParam("cursor")})
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
	d, err := h.Hooks.Redeliver(Ctx(c), id, delivery)
	if err != nil {
		if isFormError(err) {
			e, _ := fault.AsError(err)
			return h.redirect(c, views.WebhookURL(id), "bad", e.Message)
		}
		return err
	}
	return h.redirect(c, views.WebhookURL(id), "ok", "Delivery of revision "+strconv.FormatInt(d.Revision, 10)+" queued again.")
}

// DeleteWebhook: POST /webhooks/{id}/delete (admin).
func (h *Console) DeleteWebhook(c echo.Context) error {
	name := "#" + Param(c, "id")
	if w, err := h.Hooks.GetWebhook(Ctx(c), Param(c, "id")); err == nil {
		name = w.Name
	}
	if err := h.Hooks.DeleteWebhook(Ctx(c), Param(c, "id"), nil); err != nil {
		if isFormError(err) {
			e, _ := fault.AsError(err)
			return h.redirect(c, "/webhooks", "bad", e.Message)
		}
		return err
	}
	return h.redirect(c, "/webhooks", "ok", "Webhook "+name+" deleted with its queue.")
}

// ConfirmDeleteWebhook: GET /webhooks/{id}/delete (admin) — the
// confirmation of DeleteWebhook, saying how many deliveries go with it.
func (h *Console) ConfirmDeleteWebhook(c echo.Context) error {
	w, err := h.Hooks.GetWebhook(Ctx(c), Param(c, "id"))
	if err != nil {
		return err
	}
	v := views.ConfirmView{Page: h.page(c, "Delete webhook "+w.Name, "webhooks"), Heading: "Delete webhook " + w.Name,
		Facts:   [][2]string{{"URL", w.URL}, {"actions", strings.Join(w.Actions, ", ")}, {"pending deliveries", strconv.FormatInt(w.Pending, 10)}},
		Says:    "The webhook and its delivery queue are deleted: pending deliveries are never sent, and its delivery log is gone.",
		Warning: "To stop deliveries for a while and keep the queue, disable the webhook instead.",
		PostURL: views.WebhookURL(w.ID) + "/delete", Button: "Delete webhook and its queue", Danger: true, CancelURL: views.WebhookURL(w.ID)}
	return confirm(c, http.StatusOK, v)
}

// EditWebhook: GET /webhooks/{id}/edit (admin) — the edit form.
func (h *Console) EditWebhook(c echo.Context) error {
	w, err := h.Hooks.GetWebhook(Ctx(c), Param(c, "id"))
	if err != nil {
		return err
	}
	form := views.WebhookForm{Name: w.Name, URL: w.URL, Actions: strings.Join(w.Actions, ", "), Enabled: w.Enabled}
	if w.Pools != nil {
		form.Pools = strings.Join(*w.Pools, ", ")
	}
	v := views.WebhookEditView{Page: h.page(c, "Edit webhook "+w.Name, "webhooks"), ID: w.ID, Version: w.Version, Form: form, Errors: views.Errors{}}
	return render(c, http.StatusOK, views.WebhookEditPage(v))
}

// SaveWebhook: POST /webhooks/{id} (admin) — allocator.PatchWebhook with
// the form's version (a concurrent change is 412, not lost). The edit form
// sends every field (an empty secret keeps the current one); the page's
// Enable/Disable button sends only_enabled and enabled.
func (h *Console) SaveWebhook(c echo.Context) error {
	id := Param(c, "id")
	version, err := strconv.ParseInt(formValue(c, "version"), 10, 64)
	if err != nil || version <= 0 {
		return fault.Errf(fault.CodeInvalid, "version", "version %q: the form must carry the webhook's version (reload the page)", c.FormValue("version"))
	}
	enabled := c.FormValue("enabled") == "true"
	p := webhook.WebhookPatch{Enabled: &enabled}
	form := views.WebhookForm{Name: formValue(c, "name"), URL: formValue(c, "url"), Actions: formValue(c, "actions"),
		Pools: formValue(c, "pools"), Enabled: enabled}
	if c.FormValue("only_enabled") != "true" {
		actions := splitList(form.Actions)
		p.Name, p.URL, p.Actions, p.PoolsSet = &form.Name, &form.URL, &actions, true
		if pools := splitList(form.Pools); len(pools) > 0 {
			p.Pools = pools
		}
		if s := c.FormValue("secret"); s != "" {
			p.Secret = &s
		}
	}
	w, err := h.Hooks.PatchWebhook(Ctx(c), id, p, txn.IfMatch{version})
	if err == nil {
		msg := "Webhook " + w.Name + " saved."
		if c.FormValue("only_enabled") == "true" {
			msg = "Webhook " + w.Name + " disabled: its queue is kept and nothing is sent until it is enabled again."
			if w.Enabled {
				msg = "Webhook " + w.Name + " enabled."
			}
		}
		return h.redirect(c, views.WebhookURL(w.ID), "ok", msg)
	}
	if !isFormError(err) {
		return err
	}
	if c.FormValue("only_enabled") == "true" {
		e, _ := fault.AsError(err)
		return h.redirect(c, views.WebhookURL(id), "bad", e.Message)
	}
	v := views.WebhookEditView{Page: h.page(c, "Edit webhook "+form.Name, "webhooks"), ID: id, Version: version, Form: form, Errors: views.Errors{}}
	for f, m := range views.FromError(err) {
		if i := strings.IndexByte(f, '['); i > 0 {
			f = f[:i]
		}
		v.Errors[f] = m
	}
	return render(c, formStatus(err), views.WebhookEditPage(v))
}
