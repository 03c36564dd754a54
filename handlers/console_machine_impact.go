package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/views"
)

// impactView loads the machine and its delete-impact for action
// (decommission and delete: without force; force-delete: with force).
func (h *Console) impactView(c echo.Context, action string) (views.ImpactView, error) {
	v := views.ImpactView{Page: h.page(c, "Confirm", "machines"), Action: action}
	switch action {
	case "decommission", "delete", "force-delete":
	default:
		return v, fault.Errf(fault.CodeInvalid, "action", "unknown action %q: want decommission, delete or force-delete", action)
	}
	m, err := h.A.GetMachine(Ctx(c), Param(c, "id"))
	if err != nil {
		return v, err
	}
	imp, err := h.A.DeleteImpact(Ctx(c), m.MachineID, action == "force-delete")
	if err != nil {
		return v, err
	}
	v.Machine, v.Impact, v.Phrase = *m, *imp, allocator.ConfirmPhrase(m)
	v.Page.Title = v.ActionTitle() + " " + m.Name
	return v, nil
}

// MachineImpact: GET /machines/:id/impact?action=decommission|delete|force-delete
// — the confirmation with allocator.DeleteImpact: a dialog for htmx, a page
// without JavaScript. Viewing it changes nothing. The route needs operator;
// action=force-delete needs admin (web.ConsoleQueryRoles), as the POST
// route does.
func (h *Console) MachineImpact(c echo.Context) error {
	v, err := h.impactView(c, c.QueryParam("action"))
	if err != nil {
		return err
	}
	if IsHTMX(c) {
		return render(c, http.StatusOK, views.ImpactDialog(v))
	}
	return render(c, http.StatusOK, views.ImpactPage(v))
}

// impactRefused re-renders the confirmation with the refusal (409 when the
// machine is not in the state the action needs, 422 for a wrong id).
func (h *Console) impactRefused(c echo.Context, action string, err error, confirm string) error {
	v, lerr := h.impactView(c, action)
	if lerr != nil {
		return lerr
	}
	v.Errors, v.Confirm = views.FromError(err), confirm
	if IsHTMX(c) {
		return render(c, formStatus(err), views.ImpactDialogForm(v))
	}
	return render(c, formStatus(err), views.ImpactPage(v))
}

// Decommission: POST /machines/:id/decommission (operator) —
// allocator.Decommission.
func (h *Console) Decommission(c echo.Context) error {
	m, err := h.A.Decommission(Ctx(c), Param(c, "id"))
	if err != nil {
		if isFormError(err) {
			return h.impactRefused(c, "decommission", err, "")
		}
		return err
	}
	name := m.Name
	if name == "" {
		name = views.ShortID(m.MachineID)
	}
	return h.redirect(c, views.MachineURL(m.MachineID), "ok", name+" decommissioned: its values stay allocated until it is deleted.")
}

// DeleteMachine: POST /machines/:id/delete (operator) —
// allocator.DeleteMachine without force (the machine must be
// decommissioned; otherwise 409, shown in the dialog).
func (h *Console) DeleteMachine(c echo.Context) error {
	m, err := h.A.GetMachine(Ctx(c), Param(c, "id"))
	if err != nil {
		return err
	}
	imp, err := h.A.DeleteMachine(Ctx(c), m.MachineID, false)
	if err != nil {
		if isFormError(err) {
			return h.impactRefused(c, "delete", err, "")
		}
		return err
	}
	return h.redirect(c, "/machines", "ok", m.Name+" ("+views.ShortID(m.MachineID)+") deleted: "+views.RemovalSummary(imp.Values)+".")
}

// ForceDeleteMachine: POST /machines/:id/force-delete (admin) —
// allocator.DeleteMachine with force, only when the form's confirm_name is
// the host's name (compared in Unicode normal form C), or its BMC MAC when
// it has none, or its machine_id (allocator.ConfirmMatches; otherwise 422
// beside the field, nothing done). The flash links to every value that went to quarantine.
func (h *Console) ForceDeleteMachine(c echo.Context) error {
	confirm := formValue(c, "confirm_name")
	m, err := h.A.GetMachine(Ctx(c), Param(c, "id"))
	if err != nil {
		return err
	}
	if !allocator.ConfirmMatches(m, confirm) {
		what := "the host's name"
		if m.Kind == allocator.KindDPU {
			what = "the DPU's serial number"
		} else if m.EMName == "" {
			what = "the host's BMC MAC address"
		}
		return h.impactRefused(c, "force-delete", fault.Errf(fault.CodeInvalid, "confirm_name",
			"confirm_name %q is not %s nor its machine_id: type it exactly to confirm the force delete; nothing was deleted", confirm, what), confirm)
	}
	imp, err := h.A.DeleteMachine(Ctx(c), m.MachineID, true)
	if err != nil {
		if isFormError(err) {
			return h.impactRefused(c, "force-delete", err, confirm)
		}
		return err
	}
	var links []views.Link
	for _, x := range imp.Values {
		if x.Action == allocator.ActionQuarantine {
			links = append(links, views.Link{Href: views.ValueURL(x.Pool, x.Value), Text: x.Pool + " " + x.Value})
		}
	}
	msg := m.Name + " (" + views.ShortID(m.MachineID) + ") force-deleted: " + views.RemovalSummary(imp.Values) + "."
	if len(links) > 0 {
		msg += " Unquarantine a value (on the Quarantine page) once no hardware carries it:"
	}
	return h.redirect(c, "/machines", "warn", msg, links...)
}
