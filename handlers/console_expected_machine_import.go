package handlers

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
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

// Import: POST /expected-machines/import (operator, multipart file) —
// allocator.ImportExpectedMachinesFile: mode "merge" (the default) updates
// the records whose BMC MAC is stored and creates the others, "replace" is
// the replace-all; either is atomic (all records or none). When the import
// is refused, every bad record is listed with every one of its problems.
func (h *Console) Import(c echo.Context) error {
	v := views.ImportView{Page: h.page(c, "Import expected machines", "expected"), Mode: c.FormValue("mode")}
	mode, err := allocator.ParseImportMode(v.Mode)
	if err != nil {
		e, _ := fault.AsError(err)
		v.Err, v.Mode = errText(e), "merge"
		return render(c, http.StatusUnprocessableEntity, views.ImportPage(v))
	}
	v.Mode = string(mode)
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
	res, err := h.A.ImportExpectedMachinesFile(Ctx(c), data, mode)
	if err != nil && !isFormError(err) {
		return err
	}
	if err == nil {
		for _, r := range res.Records {
			out := views.ImportResult{Index: r.Index, MAC: r.BmcMacAddress, Outcome: r.Outcome}
			if r.Outcome == allocator.ImportReplaced {
				out.Outcome, out.Problems = "updated", []string{"part of the new list"}
			} else if r.Outcome == allocator.ImportUnchanged {
				out.Outcome, out.Problems = "updated", []string{"no change"}
			}
			v.Results = append(v.Results, out)
		}
		v.Done = true
		return h.importDone(c, v, http.StatusOK)
	}
	// Refused: nothing was written. A file that is not a list of records
	// has no result.
	e, _ := fault.AsError(err)
	v.Err = errText(e)
	if res == nil {
		return render(c, formStatus(err), views.ImportPage(v))
	}
	for _, r := range res.Records {
		if r.Outcome != allocator.ImportFailed {
			continue
		}
		out := views.ImportResult{Index: r.Index, MAC: r.BmcMacAddress, Outcome: "failed"}
		for _, p := range r.Problems {
			out.Problems = append(out.Problems, errText(p))
		}
		v.Results = append(v.Results, out)
	}
	v.Err = "Nothing was changed: " + v.Err
	if n := res.Failed(); n > 0 {
		v.Err = fmt.Sprintf("Nothing was changed: %d of %d records are refused (listed below).", n, len(res.Records))
	}
	return render(c, formStatus(err), views.ImportPage(v))
}

func errText(e *fault.Error) string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}
