package handlers

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/views"
)

// NULField is a form field holding a NUL character: its name and its row
// among the fields of that name.
type NULField struct {
	Name string
	Row  int
}

// FormNUL lists every form field holding a NUL character or bytes that are
// not UTF-8 (which no name, address or serial may carry: PostgreSQL cannot
// store either), by name and row.
func FormNUL(c echo.Context) []NULField {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if !strings.HasPrefix(ct, echo.MIMEApplicationForm) && !strings.HasPrefix(ct, echo.MIMEMultipartForm) {
		return nil
	}
	vals, err := c.FormParams()
	if err != nil {
		return nil
	}
	var out []NULField
	for k, vs := range vals {
		for i, v := range vs {
			if strings.ContainsRune(k, 0) || strings.ContainsRune(v, 0) || !utf8.ValidString(k) || !utf8.ValidString(v) {
				out = append(out, NULField{strings.ToValidUTF8(k, "\uFFFD"), i})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Row < out[j].Row
	})
	return out
}

// emFormFields maps the ExpectedMachine form's inputs to the fields the
// allocator names in its errors.
var emFormFields = map[string]string{
	"mac": "bmc_mac_address", "username": "bmc_username", "password": "bmc_password",
	"chassis": "chassis_serial_number", "name": "metadata.name", "description": "metadata.description",
	"labels": "metadata.labels", "fallback": "fallback_dpu_serial_numbers", "sku_id": "sku_id",
}

var emRowFields = map[string]string{"dpu_serial": "serial_number", "dpu_ip": "loopback_ip", "dpu_ip6": "loopback_ip_v6", "dpu_key": "serial_number"}

// RefuseNUL answers a console form post that carries NUL characters in
// the fields bad: nothing is written. The ExpectedMachine form (save and
// as-you-type validation) comes back as the form with the message under
// each such field, 422; any other form gets a 422 error naming the first
// field (a page, or the toast for htmx).
func (h *Console) RefuseNUL(c echo.Context, bad []NULField) error {
	name := bad[0].Name
	msg := "contains a NUL character or text that is not UTF-8, which is not allowed"
	path := c.Path()
	isSave := c.Request().Method == http.MethodPost && (path == "/expected-machines" || path == "/expected-machines/:id")
	isValidate := path == "/expected-machines/validate"
	if !isSave && !isValidate {
		return fault.Errf(fault.CodeInvalid, strings.ReplaceAll(name, "\x00", "\uFFFD"), "form field %q %s", strings.ReplaceAll(name, "\x00", "\uFFFD"), msg)
	}
	f, _, err := emForm(c)
	if err != nil {
		return err
	}
	f = f.Displayable()
	if id := Param(c, "id"); id != "" {
		f.ID = id
	}
	var problems []*fault.Error
	for _, b := range bad {
		field := "form"
		if top, ok := emFormFields[b.Name]; ok {
			field = top
		} else if part, ok := emRowFields[b.Name]; ok {
			field = fmt.Sprintf("expected_dpus[%d].%s", f.SpecIndex(b.Row), part)
		}
		problems = append(problems, fault.Errf(fault.CodeInvalid, field, "%s", msg))
	}
	msgs := f.Messages(problems)
	if isValidate {
		return render(c, http.StatusUnprocessableEntity, views.EMValidation(f, msgs))
	}
	title := "New ExpectedMachine"
	if f.ID != "" {
		title = "ExpectedMachine " + f.MAC
	}
	v := views.EMFormView{Page: h.page(c, title, "expected"), Form: f, Msgs: msgs}
	if v.Examples, err = h.loopbackExamples(c); err != nil {
		return err
	}
	if IsHTMX(c) {
		return render(c, http.StatusUnprocessableEntity, views.EMFormFragment(v))
	}
	return render(c, http.StatusUnprocessableEntity, views.EMFormPage(v))
}
