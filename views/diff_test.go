package views

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/audit"

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
	if l := got["webhook_secret"]; l.Added || l.Old != "" || l.New != "(redacted)" {
		t.Errorf("secret not redacted, or not shown as set where there was none: %+v", l)
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

// A field without a value reads the same whether it is absent, null or
// empty: unchanged when neither side has one, and "" (shown as "—") on
// the side without one when it was set or cleared. The word "null" is
// never a value of a diff.
func TestDiffFieldsWithoutValue(t *testing.T) {
	before := json.RawMessage(`{"loopback_ip":null,"loopback_ip_v6":null,"sku_id":null,"gateway":"10.0.0.1",
		"metadata":{"name":"","labels":[]},"expected_dpus":[{"serial_number":"MT1","loopback_ip":null}],"version":1}`)
	after := json.RawMessage(`{"loopback_ip":"10.0.0.5","loopback_ip_v6":null,"gateway":null,"description":null,
		"metadata":{"labels":null},"expected_dpus":[{"serial_number":"MT1","loopback_ip_v6":null}],"version":2}`)
	got := map[string]DiffLine{}
	for _, l := range Diff(before, after) {
		got[l.Path] = l
		if l.Old == "null" || l.New == "null" {
			t.Errorf("%s reads null: %+v", l.Path, l)
		}
	}
	want := map[string]DiffLine{
		"loopback_ip": {Path: "loopback_ip", New: "10.0.0.5"},
		"gateway":     {Path: "gateway", Old: "10.0.0.1"},
		"version":     {Path: "version", Old: "1", New: "2"},
	}
	if len(got) != len(want) {
		t.Errorf("diff lists %v, want only %v (null, absent and empty are one)", got, want)
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %+v, want %+v", p, got[p], w)
		}
	}

	// A creation lists its fields with values only; a deletion too.
	created := Diff(nil, json.RawMessage(`{"pool":"lo-ip","value":"10.0.0.9","owner_type":null,"former_owner_id":null,"quarantined_at":null}`))
	if len(created) != 2 || !created[0].Added || created[0].Path != "pool" || created[1].Path != "value" {
		t.Errorf("creation %+v: want pool and value, added", created)
	}
	deleted := Diff(json.RawMessage(`{"name":"ci","expires_at":null}`), json.RawMessage(`null`))
	if len(deleted) != 1 || !deleted[0].Removed || deleted[0].Path != "name" || deleted[0].Old != "ci" {
		t.Errorf("deletion %+v: want name, removed", deleted)
	}
	if d := Diff(json.RawMessage(`{"a":null,"b":[]}`), json.RawMessage(`{"b":null,"c":{}}`)); len(d) != 0 {
		t.Errorf("nothing with a value changed, yet the diff lists %+v", d)
	}
}

// The audit log shows a side without a value as "—", never "null".
func TestEventChangeShowsNoValueAsDash(t *testing.T) {
	e := audit.Event{Before: json.RawMessage(`{"loopback_ip":null,"gateway":"10.0.0.1","sku_id":null}`),
		After: json.RawMessage(`{"loopback_ip":"10.0.0.5","gateway":null,"sku_id":null}`)}
	var b strings.Builder
	if err := eventChange(e, Names{}).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	lines := regexp.MustCompile(`(?s)<li>(.*?)</li>`).FindAllStringSubmatch(strings.Split(b.String(), "<details>")[0], -1)
	text := func(s string) string {
		return strings.Join(strings.Fields(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(s, " ")), " ")
	}
	var shown []string
	for _, l := range lines {
		shown = append(shown, text(l[1]))
	}
	if want := []string{"gateway 10.0.0.1 → —", "loopback_ip — → 10.0.0.5"}; strings.Join(shown, "|") != strings.Join(want, "|") {
		t.Errorf("the change reads %q, want %q", shown, want)
	}
}
