package handlers

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/txn"
	"github.com/ipledger/ipledger/views"
)

// SaveExpectedMachine: POST /expected-machines (create) and POST
// /expected-machines/:id (replace, with the form's version as If-Match so a
// concurrent edit is 412 instead of lost) — allocator.CreateExpectedMachine
// / ReplaceExpectedMachine, the REST POST/PUT operations. The form always
// carries the DPU list; an empty password keeps the stored one.
//
// Without JavaScript, "Add DPU" and "remove" post the form too: it is
// re-rendered with the row added or removed and nothing is saved.
func (h *Console) SaveExpectedMachine(c echo.Context) error {
	f, pw, err := emForm(c)
	if err != nil {
		return err
	}
	id := Param(c, "id")
	if id != "" {
		f.ID = id
	}
	title := "New ExpectedMachine"
	if f.ID != "" {
		title = "ExpectedMachine " + f.MAC
	}
	v := views.EMFormView{Page: h.page(c, title, "expected"), Form: f}
	if v.Examples, err = h.loopbackExamples(c); err != nil {
		return err
	}
	if f.ID != "" {
		// The form never carries the password back: whether one is kept
		// is the stored record's, so a refused save does not say "No
		// password stored." about a record that has one.
		if em, err := h.A.GetExpectedMachine(Ctx(c), f.ID); err == nil {
			v.Form.PasswordSet = em.BmcPasswordSet
		}
	}
	v.Form.PasswordTyped = pw != ""
	if c.FormValue("add_dpu") != "" {
		v.Form.DPUs = append(v.Form.DPUs, views.NewDPURow())
		return render(c, http.StatusOK, views.EMFormPage(v))
	}
	if key := c.FormValue("remove_dpu"); key != "" {
		var kept []views.DPURow
		for _, d := range f.DPUs {
			if d.Key != key {
				kept = append(kept, d)
			}
		}
		v.Form.DPUs = kept
		return render(c, http.StatusOK, views.EMFormPage(v))
	}
	if f.ID != "" && f.Version <= 0 {
		// The edit form always carries the version it was read at; saving
		// without one would overwrite a concurrent change unseen.
		v.Msgs = views.FieldMessages{"err-form": "version: the form carries no version (got " + i64s(f.Version) +
			"); reload the record and edit it again"}
		status := http.StatusUnprocessableEntity
		if IsHTMX(c) {
			return render(c, status, views.EMFormFragment(v))
		}
		return render(c, status, views.EMFormPage(v))
	}
	pending, perr := h.Reads.PendingLoopbacks(Ctx(c), f.ID, f.Spec(pw))
	if perr != nil {
		return perr
	}
	var em *allocator.ExpectedMachine
	if f.ID == "" {
		em, err = h.A.CreateExpectedMachine(Ctx(c), f.Spec(pw))
	} else {
		em, err = h.A.ReplaceExpectedMachine(Ctx(c), f.ID, f.Spec(pw), txn.IfMatch{f.Version})
	}
	if err == nil {
		name := allocator.ExpectedMachineName(em.Metadata.Name, em.BmcMacAddress)
		if len(pending) > 0 {
			var ms []string
			for _, p := range pending {
				ms = append(ms, p.Message)
			}
			return h.redirect(c, views.ExpectedMachineURL(em.ID), "warn", "ExpectedMachine "+name+" saved. "+strings.Join(ms, ". ")+".")
		}
		return h.redirect(c, views.ExpectedMachineURL(em.ID), "ok", "ExpectedMachine "+name+" saved.")
	}
	if !isFormError(err) {
		return err
	}
	// Show every problem beside its field, not just the first.
	e, _ := fault.AsError(err)
	problems := []*fault.Error{e}
	if e.Code != fault.CodeStaleVersion {
		if ps, perr := h.A.ExpectedMachineProblems(Ctx(c), f.ID, f.Spec(pw)); perr == nil && len(ps) > 0 {
			problems = ps
		}
	}
	v.Msgs = f.Messages(problems).WithWarnings(f.Warnings(pending))
	if IsHTMX(c) {
		return render(c, formStatus(err), views.EMFormFragment(v))
	}
	return render(c, formStatus(err), views.EMFormPage(v))
}

// DeleteExpectedMachine: POST /expected-machines/:id/delete (operator) —
// allocator.DeleteExpectedMachine with the form's version.
func (h *Console) DeleteExpectedMachine(c echo.Context) error {
	id := Param(c, "id")
	version, err := strconv.ParseInt(strings.TrimSpace(c.FormValue("version")), 10, 64)
	if err != nil || version <= 0 {
		// Like saving: the delete form carries the version it was read at.
		return fault.Errf(fault.CodeInvalid, "version", "version %q: the delete form must carry the record's version (reload the record)", c.FormValue("version"))
	}
	name := "ExpectedMachine"
	if em, err := h.A.GetExpectedMachine(Ctx(c), id); err == nil {
		name += " " + allocator.ExpectedMachineName(em.Metadata.Name, em.BmcMacAddress)
	}
	if err := h.A.DeleteExpectedMachine(Ctx(c), id, txn.IfMatch{version}); err != nil {
		if isFormError(err) {
			e, _ := fault.AsError(err)
			return h.redirect(c, "/expected-machines/"+id+"/edit", "bad", e.Message)
		}
		return err
	}
	return h.redirect(c, "/expected-machines", "ok", name+" deleted. Ingested DPUs keep their loopbacks.")
}

func i64s(n int64) string { return strconv.FormatInt(n, 10) }
