package handlers

import (
	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
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

// RemoveRange: POST /pools/:name/ranges/:id/remove (admin) —
// allocator.RemoveRange, refused (409) while the range holds values.
func (h *Console) RemoveRange(c echo.Context) error {
	name := Param(c, "name")
	if err := h.A.RemoveRange(Ctx(c), name, Param(c, "id")); err != nil {
		if isFormError(err) {
			e, _ := allocator.AsError(err)
			return h.redirect(c, views.PoolURL(name), "bad", e.Message)
		}
		return err
	}
	return h.redirect(c, views.PoolURL(name), "ok", "Range removed from "+name+".")
}

// Unquarantine: POST /pools/:name/unquarantine with form field value
// (admin) — allocator.Unquarantine returns the value to free.
func (h *Console) Unquarantine(c echo.Context) error {
	name, value := Param(c, "name"), formValue(c, "value")
	if err := h.A.Unquarantine(Ctx(c), name, value); err != nil {
		if isFormError(err) {
			e, _ := allocator.AsError(err)
			return h.redirect(c, views.PoolURL(name)+"?state=quarantined", "bad", e.Message)
		}
		return err
	}
	return h.redirect(c, views.PoolURL(name)+"?state=quarantined", "ok", value+" is free again.")
}
