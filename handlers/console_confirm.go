package handlers

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/views"
)

// confirm renders a ConfirmView as a dialog (htmx) or a page.
func confirm(c echo.Context, status int, v views.ConfirmView) error {
	if IsHTMX(c) {
		if v.Err != "" {
			return render(c, status, views.ConfirmForm(v, true))
		}
		return render(c, status, views.ConfirmDialog(v))
	}
	return render(c, status, views.ConfirmPage(v))
}

func (h *Console) removeRangeView(c echo.Context) (views.ConfirmView, error) {
	name, id := Param(c, "name"), Param(c, "id")
	r, err := h.A.GetRange(Ctx(c), name, id)
	if err != nil {
		return views.ConfirmView{}, err
	}
	kind := "auto_assign"
	if !r.AutoAssign {
		kind = "explicit"
	}
	v := views.ConfirmView{Page: h.page(c, "Remove range", "pools"), Heading: "Remove range " + r.First + " – " + r.Last + " from " + name,
		Facts: [][2]string{{"range", r.First + " – " + r.Last + " (" + kind + ")"}, {"size", r.Size},
			{"in use", r.Stats.Allocated + " allocated, " + r.Stats.Reserved + " reserved, " + r.Stats.Quarantined + " quarantined"}},
		Says:    "The range's values leave the pool: none of them can be allocated again until a range covers them.",
		PostURL: views.PoolURL(name) + "/ranges/" + r.ID + "/remove", Button: "Remove range", Danger: true, CancelURL: views.PoolURL(name)}
	if r.Stats.Allocated != "0" || r.Stats.Reserved != "0" || r.Stats.Quarantined != "0" {
		v.Warning = "The range still holds values: the allocator refuses to remove it and names them. Release, move or unreserve them first."
	}
	return v, nil
}

// ConfirmRemoveRange: GET /pools/:name/ranges/:id/remove (admin) — the
// confirmation of RemoveRange; changes nothing.
func (h *Console) ConfirmRemoveRange(c echo.Context) error {
	v, err := h.removeRangeView(c)
	if err != nil {
		return err
	}
	return confirm(c, http.StatusOK, v)
}

// RemoveRange: POST /pools/:name/ranges/:id/remove (admin) —
// allocator.RemoveRange; a refusal (409 while the range holds values) is
// shown in the confirmation with the values the allocator names.
func (h *Console) RemoveRange(c echo.Context) error {
	name := Param(c, "name")
	r, gerr := h.A.GetRange(Ctx(c), name, Param(c, "id"))
	if err := h.A.RemoveRange(Ctx(c), name, Param(c, "id")); err != nil {
		if isFormError(err) && gerr == nil {
			v, verr := h.removeRangeView(c)
			if verr != nil {
				return verr
			}
			e, _ := fault.AsError(err)
			v.Err = e.Message
			return confirm(c, formStatus(err), v)
		}
		return err
	}
	return h.redirect(c, views.PoolURL(name), "ok", "Range "+r.First+" – "+r.Last+" removed from "+name+".")
}

func (h *Console) unquarantineView(c echo.Context, value string) (views.ConfirmView, error) {
	name := Param(c, "name")
	al, err := h.A.GetAllocation(Ctx(c), name, value)
	if err != nil {
		return views.ConfirmView{}, err
	}
	was := views.Str(al.FormerOwnerType) + "/" + views.Str(al.FormerOwnerID)
	if gone, err := h.Reads.GetDeletedMachine(Ctx(c), views.Str(al.FormerOwnerID)); err == nil && views.Str(al.FormerOwnerType) == allocator.OwnerTypeMachine {
		// The usual case: the machine was force-deleted; it is named as
		// it was.
		was = gone.Kind + " " + gone.Name + ", deleted " + views.When(gone.DeletedAt) + " by " + gone.DeletedBy
		if gone.Kind == allocator.KindDPU {
			was = "DPU " + gone.Name + ", deleted " + views.When(gone.DeletedAt) + " by " + gone.DeletedBy
		}
	} else if views.Str(al.FormerOwnerType) == allocator.OwnerTypeMachine {
		if n, err := h.Reads.MachineNames(Ctx(c), []string{views.Str(al.FormerOwnerID)}); err == nil && n[views.Str(al.FormerOwnerID)] != "" {
			was = n[views.Str(al.FormerOwnerID)] + " (" + was + ")"
		} else if err == nil {
			// The usual case: the machine was force-deleted. Its
			// 58-character id says nothing; the reason below names it.
			was = "machine " + views.ShortID(views.Str(al.FormerOwnerID)) + ", no longer ingested (the reason names it)"
		}
	}
	v := views.ConfirmView{Page: h.page(c, "Unquarantine", "pools"), Heading: "Unquarantine " + al.Value + " in " + name,
		Facts:   [][2]string{{"value", al.Value}, {"state", al.State}, {"former owner", was}, {"since", views.WhenPtr(al.QuarantinedAt)}, {"reason", views.Str(al.QuarantineReason)}},
		Says:    "The value becomes free: the next automatic allocation may hand it to another owner.",
		Warning: "Only do this when no hardware carries it any more (the force-deleted machine is gone or readdressed); otherwise two machines answer on one address.",
		PostURL: views.PoolURL(name) + "/unquarantine", Hidden: [][2]string{{"value", al.Value}}, Button: "Unquarantine " + al.Value, Danger: true,
		CancelURL: views.ValueURL(name, al.Value)}
	if al.State != "quarantined" {
		return v, fault.Errf(fault.CodeConflict, "value", "%s in %s is %s, not quarantined", al.Value, name, al.State)
	}
	return v, nil
}

// ConfirmUnquarantine: GET /pools/:name/unquarantine?value= (admin) — the
// confirmation of Unquarantine, with the value's former owner and reason.
func (h *Console) ConfirmUnquarantine(c echo.Context) error {
	v, err := h.unquarantineView(c, c.QueryParam("value"))
	if err != nil {
		return err
	}
	if c.QueryParam("from") == "quarantine" {
		v.Hidden = append(v.Hidden, [2]string{"from", "quarantine"})
		v.CancelURL = "/quarantine"
	}
	return confirm(c, http.StatusOK, v)
}

// Unquarantine: POST /pools/:name/unquarantine with form field value
// (admin) — allocator.Unquarantine returns the value to free.
func (h *Console) Unquarantine(c echo.Context) error {
	name, value := Param(c, "name"), formValue(c, "value")
	back := views.PoolURL(name) + "?state=quarantined"
	if formValue(c, "from") == "quarantine" {
		back = "/quarantine"
	}
	if err := h.A.Unquarantine(Ctx(c), name, value); err != nil {
		if isFormError(err) {
			e, _ := fault.AsError(err)
			if IsHTMX(c) {
				// The dialog shows the refusal with its status (422 for a
				// malformed value, 404/409 otherwise), as every form does.
				v := views.ConfirmView{Page: h.page(c, "Unquarantine", "pools"), Heading: "Unquarantine " + value + " in " + name,
					Says: "Nothing was changed.", PostURL: views.PoolURL(name) + "/unquarantine", Hidden: [][2]string{{"value", value}},
					Button: "Unquarantine " + value, Danger: true, CancelURL: back, Err: e.Message}
				return confirm(c, formStatus(err), v)
			}
			return h.redirect(c, back, "bad", e.Message)
		}
		return err
	}
	return h.redirect(c, back, "ok", value+" is free again in "+name+".")
}

// ConfirmDeleteExpectedMachine: GET /expected-machines/:id/delete
// (operator) — the confirmation of DeleteExpectedMachine.
func (h *Console) ConfirmDeleteExpectedMachine(c echo.Context) error {
	em, err := h.A.GetExpectedMachine(Ctx(c), Param(c, "id"))
	if err != nil {
		return err
	}
	name := allocator.ExpectedMachineName(em.Metadata.Name, em.BmcMacAddress)
	var dpus []string
	for _, d := range em.ExpectedDPUs {
		dpus = append(dpus, d.SerialNumber)
	}
	v := views.ConfirmView{Page: h.page(c, "Delete "+name, "expected"), Heading: "Delete ExpectedMachine " + name,
		Facts: [][2]string{{"BMC MAC", em.BmcMacAddress}, {"chassis serial", em.ChassisSerialNumber},
			{"expected DPUs", fmt.Sprintf("%d: %s", len(dpus), strings.Join(dpus, ", "))}},
		Says:    "The record and its loopback reservations are deleted. Ingested DPUs keep their loopbacks; their bindings become automatic and the next ingestion allocates automatically.",
		PostURL: views.ExpectedMachineURL(em.ID) + "/delete", Hidden: [][2]string{{"version", strconv.FormatInt(em.Version, 10)}},
		Button: "Delete " + name, Danger: true, CancelURL: views.ExpectedMachineURL(em.ID)}
	return confirm(c, http.StatusOK, v)
}
