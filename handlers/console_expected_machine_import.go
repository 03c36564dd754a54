package handlers

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/views"
)

// ImportForm: GET /expected-machines/import (operator). With ?result= (the
// post-redirect-get of an import without JavaScript) it shows that
// import's result: the counts and every failed record, signed by seal so a
// link cannot show a made-up result.
func (h *Console) ImportForm(c echo.Context) error {
	v := views.ImportView{Page: h.page(c, "Import expected machines", "expected")}
	if r := c.QueryParam("result"); r != "" {
		raw, ok := h.unseal(c, "import", r)
		var res importResult
		if !ok || json.Unmarshal(raw, &res) != nil {
			v.Err = "This import result link is not valid; import the file again to see its result."
			return render(c, http.StatusUnprocessableEntity, views.ImportPage(v))
		}
		v.Mode, v.Results, v.Done, v.Counted = res.Mode, res.Failed, true, &res.Counts
	}
	return render(c, http.StatusOK, views.ImportPage(v))
}

// importResult is what the no-JS redirect carries: the counts and the
// failed records (at most maxCarriedFailures, the rest counted).
type importResult struct {
	Mode   string               `json:"m"`
	Counts views.ImportCounts   `json:"c"`
	Failed []views.ImportResult `json:"f"`
}

const maxCarriedFailures = 50

// importDone answers a finished import: htmx swaps the result in; without
// JavaScript the browser is redirected (303) to GET
// /expected-machines/import?result=… so that a refresh does not import
// the file again.
func (h *Console) importDone(c echo.Context, v views.ImportView, status int) error {
	if IsHTMX(c) {
		return render(c, status, views.ImportPage(v))
	}
	res := importResult{Mode: v.Mode, Counts: v.Tally()}
	for _, r := range v.Results {
		if r.Outcome == "failed" && len(res.Failed) < maxCarriedFailures {
			res.Failed = append(res.Failed, r)
		}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	val, err := h.seal(c, "import", raw)
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/expected-machines/import?result="+url.QueryEscape(val))
}

// Import: POST /expected-machines/import (operator, multipart file). The
// NICo file is read record by record (allocator.ParseExpectedMachinesFileRecords).
// Mode "replace" is the REST replace-all (atomic: all or nothing); when it
// is refused, every bad record is listed with every one of its problems.
// Mode "merge" (the default) creates or replaces each record by its BMC
// MAC on its own (the REST POST or PUT): a record that does not decode or
// is refused fails alone, with all of its problems. Any other mode is 422.
func (h *Console) Import(c echo.Context) error {
	v := views.ImportView{Page: h.page(c, "Import expected machines", "expected"), Mode: c.FormValue("mode")}
	switch v.Mode {
	case "":
		v.Mode = "merge"
	case "merge", "replace":
	default:
		v.Err = fmt.Sprintf("mode: unknown import mode %q: want merge or replace", v.Mode)
		v.Mode = "merge"
		return render(c, http.StatusUnprocessableEntity, views.ImportPage(v))
	}
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
		v.Err = fmt.Sprintf("too_large: the file is larger than %d bytes; nothing was changed.", MaxBodyBytes)
		return render(c, http.StatusRequestEntityTooLarge, views.ImportPage(v))
	}
	specs, bad, err := allocator.ParseExpectedMachinesFileRecords(data)
	if err != nil {
		if !isFormError(err) {
			return err
		}
		e, _ := allocator.AsError(err)
		v.Err = errText(e)
		return render(c, formStatus(err), views.ImportPage(v))
	}
	if v.Mode == "replace" {
		return h.importReplace(c, v, specs, bad)
	}
	for i, s := range specs {
		r := views.ImportResult{Index: i, MAC: s.BmcMacAddress}
		if bad[i] != nil {
			e, ok := allocator.AsError(bad[i])
			if !ok {
				return bad[i]
			}
			r.Outcome, r.Problems = "failed", []string{errText(e)}
			v.Results = append(v.Results, r)
			continue
		}
		var err error
		id := ""
		if _, gerr := h.A.GetExpectedMachine(Ctx(c), s.BmcMacAddress); gerr == nil {
			id = s.BmcMacAddress
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
			r.Outcome, r.Problems = "failed", h.recordProblems(c, i, id, s, e)
		}
		v.Results = append(v.Results, r)
	}
	v.Done = true
	return h.importDone(c, v, http.StatusOK)
}

// recordProblems lists every problem of record i (allocator.
// ExpectedMachineProblems, named expected_machines[i].field), or the
// error the write returned when validation finds none (a 412, a race).
func (h *Console) recordProblems(c echo.Context, i int, id string, s allocator.ExpectedMachineSpec, e *allocator.Error) []string {
	prefix := fmt.Sprintf("expected_machines[%d]", i)
	var out []string
	if e.Code != allocator.CodeStaleVersion {
		if ps, err := emProblems(Ctx(c), h.A, id, s); err == nil {
			for _, p := range ps {
				out = append(out, errText(allocator.WithFieldPrefix(p, prefix).(*allocator.Error)))
			}
		}
	}
	if len(out) == 0 {
		out = []string{errText(allocator.WithFieldPrefix(e, prefix).(*allocator.Error))}
	}
	return out
}

// importReplace is the atomic replace-all. When it is refused nothing
// changes, and the page lists every bad record: records that do not
// decode, records with field problems (422, each listed), and the record
// the replace-all named (a conflict between records of the file or with
// an ingested DPU).
func (h *Console) importReplace(c echo.Context, v views.ImportView, specs []allocator.ExpectedMachineSpec, bad []error) error {
	failed := map[int][]string{}
	for i, err := range bad {
		if err != nil {
			e, ok := allocator.AsError(err)
			if !ok {
				return err
			}
			failed[i] = []string{errText(e)}
		}
	}
	// Field problems of each record (422) first; conflicts are judged
	// against the whole new list, so only the one replace-all names counts.
	for i, s := range specs {
		if bad[i] != nil {
			continue
		}
		ps, err := h.A.ExpectedMachineProblems(Ctx(c), "", s)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.Code == allocator.CodeInvalid {
				failed[i] = append(failed[i], errText(allocator.WithFieldPrefix(p, fmt.Sprintf("expected_machines[%d]", i)).(*allocator.Error)))
			}
		}
	}
	var cause *allocator.Error
	if len(failed) == 0 {
		items, err := h.A.ReplaceAllExpectedMachines(Ctx(c), specs)
		if err == nil {
			for i, em := range items {
				v.Results = append(v.Results, views.ImportResult{Index: i, MAC: em.BmcMacAddress, Outcome: "updated", Problems: []string{"part of the new list"}})
			}
			v.Done = true
			return h.importDone(c, v, http.StatusOK)
		}
		if !isFormError(err) {
			return err
		}
		cause, _ = allocator.AsError(err)
		if i, ok := recordIndex(cause.Field); ok && i < len(specs) {
			failed[i] = []string{errText(cause)}
		}
	}
	for i, s := range specs {
		if ps, ok := failed[i]; ok {
			v.Results = append(v.Results, views.ImportResult{Index: i, MAC: s.BmcMacAddress, Outcome: "failed", Problems: ps})
		}
	}
	switch {
	case len(failed) > 0:
		v.Err = fmt.Sprintf("Nothing was changed: %d of %d records are refused (listed below).", len(failed), len(specs))
	default:
		v.Err = "Nothing was changed: " + errText(cause)
	}
	status := http.StatusUnprocessableEntity
	if cause != nil {
		status = formStatus(cause)
	}
	return render(c, status, views.ImportPage(v))
}

// recordIndex reads i from "expected_machines[i]...".
func recordIndex(field string) (int, bool) {
	var i int
	if _, err := fmt.Sscanf(field, "expected_machines[%d]", &i); err != nil {
		return 0, false
	}
	return i, true
}

func errText(e *allocator.Error) string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}
