package handlers

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/views"
)

// AddRange: POST /pools/:name/ranges (admin) — allocator.AddRange; a
// refused range comes back next to its field (422 malformed, 409 overlap).
func (h *Console) AddRange(c echo.Context) error {
	name := Param(c, "name")
	f := views.RangeForm{First: formValue(c, "first"), Last: formValue(c, "last"), AutoAssign: checked(c, "auto_assign")}
	r, err := h.A.AddRange(Ctx(c), name, allocator.RangeSpec{First: f.First, Last: f.Last, AutoAssign: &f.AutoAssign})
	if err == nil {
		return h.redirect(c, views.PoolURL(name), "ok", "Range "+r.First+" – "+r.Last+" added to "+name+".")
	}
	if !isFormError(err) {
		return err
	}
	if IsHTMX(c) {
		return render(c, formStatus(err), views.AddRangeForm(h.page(c, "", ""), name, f, views.FromError(err)))
	}
	v, _, derr := h.poolDetail(c, name)
	if derr != nil {
		return derr
	}
	v.Range, v.RangeErr = f, views.FromError(err)
	return render(c, formStatus(err), views.PoolDetailPage(v))
}

func (h *Console) rangeEditView(c echo.Context) (views.RangeEditView, error) {
	name := Param(c, "name")
	r, err := h.A.GetRange(Ctx(c), name, Param(c, "id"))
	if err != nil {
		return views.RangeEditView{}, err
	}
	return views.RangeEditView{Page: h.page(c, "Edit range", "pools"), Pool: name,
		Range: views.RangeInfo{ID: r.ID, First: r.First, Last: r.Last, Size: r.Size, Version: strconv.FormatInt(r.Version, 10),
			AutoAssign: r.AutoAssign, Allocated: r.Stats.Allocated, Reserved: r.Stats.Reserved, Quar: r.Stats.Quarantined},
		First: r.First, Last: r.Last, AutoAssign: r.AutoAssign}, nil
}

// EditRange: GET /pools/:name/ranges/:id/edit (admin) — the form that
// shrinks a range or flips its auto_assign (a dialog for htmx).
func (h *Console) EditRange(c echo.Context) error {
	v, err := h.rangeEditView(c)
	if err != nil {
		return err
	}
	if IsHTMX(c) {
		return render(c, http.StatusOK, views.RangeEditDialog(v))
	}
	return render(c, http.StatusOK, views.RangeEditPage(v))
}

// UpdateRange: POST /pools/:name/ranges/:id (admin) —
// allocator.UpdateRange with the form's version; a refusal (409 naming
// the allocations, quarantines or reservations in the way, 422 for a bad
// bound, 412 for a concurrent change) comes back beside its field.
func (h *Console) UpdateRange(c echo.Context) error {
	name, id := Param(c, "name"), Param(c, "id")
	first, last, auto := formValue(c, "first"), formValue(c, "last"), checked(c, "auto_assign")
	u := allocator.RangeUpdate{First: &first, Last: &last, AutoAssign: &auto}
	// The edit form always carries the version it was opened at; a post
	// without one (a broken or hand-made form) would overwrite a change
	// made in the meantime, so it is refused like an ExpectedMachine save
	// without a version.
	s := formValue(c, "version")
	n, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil {
		return fault.Errf(fault.CodeInvalid, "version", "version %q: the range form must carry the range's version (reload the page and edit again)", s)
	}
	u.Version = &n
	r, err := h.A.UpdateRange(Ctx(c), name, id, u)
	if err == nil {
		kind := "explicit"
		if r.AutoAssign {
			kind = "auto_assign"
		}
		return h.redirect(c, views.PoolURL(name), "ok", "Range of "+name+" is now "+r.First+" – "+r.Last+" ("+kind+").")
	}
	if !isFormError(err) {
		return err
	}
	v, verr := h.rangeEditView(c)
	if verr != nil {
		return verr
	}
	v.First, v.Last, v.AutoAssign, v.Errors = first, last, auto, views.FromError(err)
	if IsHTMX(c) {
		return render(c, formStatus(err), views.RangeEditForm(v, true))
	}
	return render(c, formStatus(err), views.RangeEditPage(v))
}
