package handlers

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/views"
)

func (h *Console) poolsView(c echo.Context) (views.PoolsView, error) {
	v := views.PoolsView{Page: h.page(c, "Pools", "pools"), Form: views.PoolForm{Type: "ipv4", AutoAssign: true}}
	pools, err := h.A.ListPools(Ctx(c))
	if err != nil {
		return v, err
	}
	for _, p := range pools {
		v.Pools = append(v.Pools, views.NewPoolBar(p))
	}
	v.Drift, err = h.Reads.PoolFileDrift(Ctx(c))
	return v, err
}

// Pools: GET /pools.
func (h *Console) Pools(c echo.Context) error {
	v, err := h.poolsView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.PoolsPage(v))
}

// CreatePool: POST /pools (admin) — allocator.CreatePool with one range.
func (h *Console) CreatePool(c echo.Context) error {
	f := views.PoolForm{Name: formValue(c, "name"), Type: formValue(c, "type"), First: formValue(c, "first"),
		Last: formValue(c, "last"), DelegatePrefixLen: formValue(c, "delegate_prefix_len"), Gateway: formValue(c, "gateway"),
		AutoAssign: checked(c, "auto_assign")}
	spec := allocator.PoolSpec{Name: f.Name, Type: f.Type, Gateway: f.Gateway,
		Ranges: []allocator.RangeSpec{{First: f.First, Last: f.Last, AutoAssign: &f.AutoAssign}}}
	var err error
	if f.DelegatePrefixLen != "" {
		if spec.DelegatePrefixLen, err = strconv.Atoi(f.DelegatePrefixLen); err != nil {
			err = fault.Errf(fault.CodeInvalid, "delegate_prefix_len", "delegate_prefix_len %q is not a number", f.DelegatePrefixLen)
		}
	}
	if err == nil {
		_, err = h.A.CreatePool(Ctx(c), spec)
	}
	if err == nil {
		return h.redirect(c, views.PoolURL(f.Name), "ok", "Pool "+f.Name+" created.")
	}
	if !isFormError(err) {
		return err
	}
	v, lerr := h.poolsView(c)
	if lerr != nil {
		return lerr
	}
	v.Form, v.Errors = f, views.FromError(err)
	// The form has one range: a refusal of "first" or "last" (an overlap)
	// goes beside that field, not above the form as "first: …".
	for _, k := range []string{"first", "last"} {
		if m, ok := v.Errors[k]; ok {
			delete(v.Errors, k)
			v.Errors["ranges[0]."+k] = m
		}
	}
	if IsHTMX(c) {
		return render(c, formStatus(err), views.CreatePoolForm(v))
	}
	return render(c, formStatus(err), views.PoolsPage(v))
}
