package views

import (
	"regexp"
	"strconv"
	"strings"
)

// The allocator names a DPU of the record in its messages by the request
// path REST clients send (expected_dpus[1], "of this machine" when the
// clash is within the record). The form has no such path: it shows DPU
// rows, so its messages name the DPU as the page does, by its serial and
// its row.
var dpuPath = regexp.MustCompile(`expected_dpus\[(\d+)\]( of this machine)?`)

// Words rewrites a message or field path of the allocator in the form's
// words: "expected_dpus[0] of this machine" becomes "DPU MT5001X00001 (row
// 1)", the serial being the one typed in that row. REST answers keep the
// paths (clients read them); only the console's messages change.
func (f EMForm) Words(msg string) string {
	msg = dpuPath.ReplaceAllStringFunc(msg, func(m string) string {
		i, _ := strconv.Atoi(dpuPath.FindStringSubmatch(m)[1]) // digits: dpuPath says so
		return f.DPULabel(i)
	})
	return fieldWords(msg)
}

// formLabels are the form's names of the request fields the allocator's
// messages start with or mention ("bmc_mac_address 0a:… is already used
// by …"), and of the range kind a reservation needs.
var formLabels = map[string]string{
	"bmc_mac_address":         "BMC MAC address",
	"chassis_serial_number":   "chassis serial number",
	"serial_number":           "serial number",
	"loopback_ip_v6":          "IPv6 loopback",
	"loopback_ip":             "IPv4 loopback",
	"auto_assign=false range": "explicit range",
	"auto_assign=false":       "explicit",
}

// fieldName finds a field name of formLabels standing as a word of its own
// (after a space or at the start, before a space or the end): a path such
// as "DPU in row 2.serial_number" is left alone.
var fieldName = regexp.MustCompile(`(^|\s)(bmc_mac_address|chassis_serial_number|serial_number|loopback_ip_v6|loopback_ip|auto_assign=false range|auto_assign=false)(\s|[,;:.]?$)`)

// fieldWords rewrites the field names of msg in the form's words, with a
// capital letter when the message starts with one.
func fieldWords(msg string) string {
	out := fieldName.ReplaceAllStringFunc(msg, func(m string) string {
		sub := fieldName.FindStringSubmatch(m)
		return sub[1] + formLabels[sub[2]] + sub[3]
	})
	if out != msg && out != "" && out[0] >= 'a' && out[0] <= 'z' {
		out = strings.ToUpper(out[:1]) + out[1:]
	}
	return out
}

// DPULabel names the DPU of spec index i (expected_dpus[i]) as the form
// shows it: "DPU MT5001X00001 (row 1)", "DPU in row 2" when its serial is
// empty, "DPU 3" for an index past the form's rows.
func (f EMForm) DPULabel(i int) string {
	rows := f.specRows()
	if i < 0 || i >= len(rows) {
		return "DPU " + strconv.Itoa(i+1)
	}
	row := strconv.Itoa(rows[i] + 1)
	if s := strings.TrimSpace(f.DPUs[rows[i]].Serial); s != "" {
		return "DPU " + s + " (row " + row + ")"
	}
	return "DPU in row " + row
}
