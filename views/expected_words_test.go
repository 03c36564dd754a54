package views

import (
	"testing"

	"github.com/ipledger/ipledger/fault"
)

// TestFormWordsNameDPURows: the form's messages name a DPU of the record
// by its serial and its row, never by the request path expected_dpus[i];
// empty rows (left out of the spec) do not shift the numbering.
func TestFormWordsNameDPURows(t *testing.T) {
	f := EMForm{DPUs: []DPURow{{Key: "a", Serial: "MT5001X00001"}, {Key: "b"}, {Key: "c", Serial: "MT5001X00001", IP: "10.50.0.200"}, {Key: "d", IP: "10.50.0.201"}}}
	for _, c := range []struct{ in, want string }{
		{"serial_number MT5001X00001 is already used by expected_dpus[0] of this machine",
			"Serial number MT5001X00001 is already used by DPU MT5001X00001 (row 1)"},
		{"bmc_mac_address 0a:50:00:00:00:00 is already used by ExpectedMachine rack-1",
			"BMC MAC address 0a:50:00:00:00:00 is already used by ExpectedMachine rack-1"},
		{"10.50.0.9 is in an auto-assign range (10.50.0.1..10.50.0.99) of pool \"lo-ip\"; a reservation must lie in an auto_assign=false range",
			"10.50.0.9 is in an auto-assign range (10.50.0.1..10.50.0.99) of pool \"lo-ip\"; a reservation must lie in an explicit range"},
		{"a host named serial_numbers stays", "a host named serial_numbers stays"},
		{"10.50.0.200 is already reserved by expected_dpus[1] of this machine",
			"10.50.0.200 is already reserved by DPU MT5001X00001 (row 3)"},
		{"expected_dpus[2].serial_number", "DPU in row 4.serial_number"},
		{"expected_dpus[7]", "DPU 8"},
		{"10.50.0.9 is not in pool \"lo-ip\"", "10.50.0.9 is not in pool \"lo-ip\""},
	} {
		if got := f.Words(c.in); got != c.want {
			t.Errorf("Words(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	msgs := f.Messages([]*fault.Error{fault.Errf(fault.CodeInvalid, "expected_dpus[1].loopback_ip", "10.50.0.200 is already reserved by expected_dpus[0] of this machine")})
	if got, want := msgs["err-dpu-c-loopback_ip"], "10.50.0.200 is already reserved by DPU MT5001X00001 (row 1)"; got != want {
		t.Errorf("the message beside row 3's loopback is %q, want %q", got, want)
	}
}

// TestWarningsYieldToErrors: a pending warning ("applies then") is not
// shown under a field whose value is refused, and is shown elsewhere.
func TestWarningsYieldToErrors(t *testing.T) {
	m := FieldMessages{"err-dpu-a-loopback_ip": "10.50.0.200 is allocated to DPU X"}.WithWarnings(FieldMessages{
		"warn-dpu-a-loopback_ip": "keeps it", "warn-dpu-a-loopback_ip_v6": "keeps it too"})
	if m["warn-dpu-a-loopback_ip"] != "" {
		t.Errorf("a refused value also gets the warning %q", m["warn-dpu-a-loopback_ip"])
	}
	if m["warn-dpu-a-loopback_ip_v6"] == "" {
		t.Error("the warning of a field without an error is dropped")
	}
}
