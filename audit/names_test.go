package audit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/models"
)

// An event's kept names reach the console (Event.Names) and never the
// event's JSON, which the API, the change feed and webhooks send
// (docs/decisions.md "Audit events keep the names they had").
func TestEventNamesStayOutOfTheEventJSON(t *testing.T) {
	names, err := EncodeNames(map[string]string{"fm100ht1": "rack7-u01"})
	if err != nil {
		t.Fatal(err)
	}
	after := `{"owner_type":"machine","owner_id":"fm100ht1"}`
	e := EventOut(&models.AuditEvent{ID: 7, Action: "allocation.create", ObjectType: "allocation", ObjectID: "lo-ip/10.0.0.1",
		AfterJSON: &after, NamesJSON: names})
	if e.Names["fm100ht1"] != "rack7-u01" {
		t.Fatalf("names %v", e.Names)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "rack7-u01") || strings.Contains(string(b), "names") {
		t.Fatalf("the event's JSON shows its kept names: %s", b)
	}
	for _, s := range []string{`[1]`, `{"a":1}`, `nope`} {
		if got := DecodeNames(&s); got != nil {
			t.Errorf("DecodeNames(%s) = %v, want none", s, got)
		}
	}
	if got, _ := EncodeNames(map[string]string{}); got != nil {
		t.Errorf("no names stored as %q", *got)
	}
}

// MachineRefs finds the machines a document names as an owner, a former
// owner or a host, each once, and nothing in a document that names none.
func TestMachineRefs(t *testing.T) {
	got := MachineRefs(
		[]byte(`{"owner_type":"machine","owner_id":"m1","former_owner_type":"vm","former_owner_id":"v1"}`),
		[]byte(`{"former_owner_type":"machine","former_owner_id":"m2","host_machine_id":"m1"}`),
		[]byte(`{"host_machine_id":null,"name":"x"}`),
		nil,
	)
	if strings.Join(got, ",") != "m1,m2" {
		t.Fatalf("refs %v, want m1,m2", got)
	}
}
