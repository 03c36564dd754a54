package handlers

import (
	"fmt"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/views"
)

// ImportForm: GET /expected-machines/import (operator).
func (h *Console) ImportForm(c echo.Context) error {
	return render(c, http.StatusOK, views.ImportPage(views.ImportView{Page: h.page(c, "Import expected machines", "expected")}))
}

// Import: POST /expected-machines/import (operator, multipart file). The
// NICo file is parsed by allocator.ParseExpectedMachinesFile. Mode
// "replace" is the REST replace-all (atomic: all or nothing). Mode "merge"
// creates or replaces each record by its BMC MAC on its own (the REST POST
// or PUT), so the page lists a result per record.
func (h *Console) Import(c echo.Context) error {
	v := views.ImportView{Page: h.page(c, "Import expected machines", "expected"), Mode: c.FormValue("mode")}
	fh, err := c.FormFile("file")
	if err != nil {
		v.Err = "Choose a file to import."
		return render(c, http.StatusUnprocessableEntity, views.ImportPage(v))
	}
	file, err := fh.Open()
	if err != nil {
		return err
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, MaxBodyBytes+1))
	if err != nil {
		return err
	}
	if len(data) > MaxBodyBytes {
		v.Err = fmt.Sprintf("The file is larger than %d bytes.", MaxBodyBytes)
		return render(c, http.StatusUnprocessableEntity, views.ImportPage(v))
	}
	specs, err := allocator.ParseExpectedMachinesFile(data)
	if err != nil {
		if !isFormError(err) {
			return err
		}
		e, _ := allocator.AsError(err)
		v.Err = errText(e)
		return render(c, formStatus(err), views.ImportPage(v))
	}
	if v.Mode == "replace" {
		items, err := h.A.ReplaceAllExpectedMachines(Ctx(c), specs)
		if err != nil {
			if !isFormError(err) {
				return err
			}
			e, _ := allocator.AsError(err)
			v.Err = "Nothing was changed: " + errText(e)
			return render(c, formStatus(err), views.ImportPage(v))
		}
		for i, em := range items {
			v.Results = append(v.Results, views.ImportResult{Index: i, MAC: em.BmcMacAddress, Outcome: "updated", Message: "part of the new list"})
		}
		v.Done = true
		return render(c, http.StatusOK, views.ImportPage(v))
	}
	for i, s := range specs {
		r := views.ImportResult{Index: i, MAC: s.BmcMacAddress}
		var err error
		if _, gerr := h.A.GetExpectedMachine(Ctx(c), s.BmcMacAddress); gerr == nil {
			_, err = h.A.ReplaceExpectedMachine(Ctx(c), s.BmcMacAddress, s, nil)
			r.Outcome = "updated"
		} else if e, ok := allocator.AsError(gerr); ok && (e.Code == allocator.CodeNotFound || e.Code == allocator.CodeInvalid) {
			_, err = h.A.CreateExpectedMachine(Ctx(c), s)
			r.Outcome = "created"
		} else {
			err = gerr
		}
		if err != nil {
			e, ok := allocator.AsError(err)
			if !ok || e.Code == allocator.CodeInternal || e.Code == allocator.CodeUnavailable {
				return err
			}
			r.Outcome, r.Message = "failed", errText(allocator.WithFieldPrefix(e, fmt.Sprintf("expected_machines[%d]", i)).(*allocator.Error))
		}
		v.Results = append(v.Results, r)
	}
	v.Done = true
	return render(c, http.StatusOK, views.ImportPage(v))
}

func errText(e *allocator.Error) string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}
