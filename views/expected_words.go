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
	return dpuPath.ReplaceAllStringFunc(msg, func(m string) string {
		i, _ := strconv.Atoi(dpuPath.FindStringSubmatch(m)[1]) // digits: dpuPath says so
		return f.DPULabel(i)
	})
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
