package views

import (
	"encoding/json"
	"testing"

	"github.com/ipledger/ipledger/audit"
)

// A row of the audit log names what its event kept as it was then, the
// rest as the page names it now; a moved DPU's hosts, like owners, are
// shown by name in its diff (docs/console.md "Audit log names").
func TestEventRowNamesWhatTheEventKept(t *testing.T) {
	page := Names{"host-a": "CH-1", "host-b": "rack1-u02", "em": "rack1-u01-new"}
	e := audit.Event{ObjectType: "machine", ObjectID: "dpu",
		Before: json.RawMessage(`{"host_machine_id":"host-a","serial_number":"MT1"}`),
		After:  json.RawMessage(`{"host_machine_id":"host-b","serial_number":"MT1"}`),
		Names:  map[string]string{"dpu": "MT1", "host-a": "rack1-u01"}}
	if got := EventMachineRefs(e); len(got) != 2 || got[0] != "host-a" || got[1] != "host-b" {
		t.Fatalf("refs %v, want both hosts", got)
	}
	row := page.ForEvent(e)
	for _, c := range []struct{ path, value, want string }{
		{"host_machine_id", "host-a", "rack1-u01"}, // kept by the event
		{"host_machine_id", "host-b", "rack1-u02"}, // not kept: as now
		{"owner_id", "host-a", "rack1-u01"},
		{"serial_number", "host-a", "host-a"},
	} {
		if got := row.DiffText(c.path, c.value); got != c.want {
			t.Errorf("DiffText(%s, %s) = %q, want %q", c.path, c.value, got, c.want)
		}
	}
	if got := EventMachineName(e, row); got != "MT1" {
		t.Errorf("the event's machine is named %q", got)
	}
	if page["host-a"] != "CH-1" {
		t.Error("a row's names changed the page's")
	}
	if old := (audit.Event{ObjectID: "em"}); page.ForEvent(old)["em"] != "rack1-u01-new" {
		t.Error("an event that kept no names is not named as things are now")
	}
}
