package views

import (
	"encoding/json"
	"testing"

	"github.com/ipledger/ipledger/console"
)

func TestDiffListsChangedFieldsAndRedactsSecrets(t *testing.T) {
	before := json.RawMessage(`{"metadata":{"name":"r1","labels":[]},"expected_dpus":[{"serial_number":"MT1","loopback_ip":"10.0.0.1"}],
		"bmc_password":"hunter2","bmc_password_set":true,"version":1,"same":"x"}`)
	after := json.RawMessage(`{"metadata":{"name":"r2","labels":[]},"expected_dpus":[{"serial_number":"MT1","loopback_ip":"10.0.0.2"}],
		"bmc_password":"s3cret","bmc_password_set":true,"version":2,"same":"x","webhook_secret":"abc"}`)
	got := map[string]DiffLine{}
	for _, l := range Diff(before, after) {
		got[l.Path] = l
	}
	if len(got) != 5 {
		t.Fatalf("diff %+v: want 5 changed fields", got)
	}
	if l := got["metadata.name"]; l.Old != "r1" || l.New != "r2" {
		t.Errorf("metadata.name %+v", l)
	}
	if l := got["expected_dpus[0].loopback_ip"]; l.Old != "10.0.0.1" || l.New != "10.0.0.2" {
		t.Errorf("loopback %+v", l)
	}
	if l := got["version"]; l.Old != "1" || l.New != "2" {
		t.Errorf("version %+v", l)
	}
	if l := got["bmc_password"]; l.Old != "(redacted)" || l.New != "(redacted)" {
		t.Errorf("password not redacted: %+v", l)
	}
	if l := got["webhook_secret"]; !l.Added || l.New != "(redacted)" {
		t.Errorf("secret not redacted: %+v", l)
	}
	if _, ok := got["bmc_password_set"]; ok {
		t.Error("an unchanged flag is listed")
	}
	// A creation shows its identifying fields first, at most four.
	created := Diff(nil, json.RawMessage(`{"allocated_at":"t","owner_id":"m1","owner_type":"machine","pool":"lo-ip","state":"allocated","value":"10.0.0.9"}`))
	shown, more := DiffShown(created)
	if len(shown) != 4 || more != 2 || shown[0].Path != "value" || shown[1].Path != "pool" {
		t.Errorf("creation shown %+v, %d more", shown, more)
	}
}

func TestObjectURLsAndOwnerNames(t *testing.T) {
	for _, c := range [][3]string{
		{"machine", "fm100htx", "/machines/fm100htx"},
		{"allocation", "lo-ip-v6/fd00::1", "/pools/lo-ip-v6?value=fd00%3A%3A1"},
		{"pool", "vlan-id", "/pools/vlan-id"},
		{"expected_machine", "abc", "/expected-machines/abc"},
		{"token", "ci", ""},
	} {
		if got := ObjectURL(c[0], c[1]); got != c[2] {
			t.Errorf("ObjectURL(%s, %s) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
	n := Names{"m1": "rack7-u12"}
	if n.OwnerText("machine", "m1") != "rack7-u12" || n.OwnerText("tenant", "t1") != "tenant/t1" {
		t.Error("owner names")
	}
	if got := n.OwnerText("machine", "fm100dsgoneaaaaaaaaaaaaaaaaaaaaaaaaaaa"); got != "machine fm100dsgonea…aaaaaa" {
		t.Errorf("a machine that is gone: %q", got)
	}
	if HitURL(console.SearchHit{Kind: console.HitAllocation, Pool: "lo-ip", Value: "10.0.0.1"}) != "/pools/lo-ip?value=10.0.0.1" {
		t.Error("allocation hit URL")
	}
}
