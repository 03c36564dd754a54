package web

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
)

// machTest drives the machine routes over HTTP with one token per role.
type machTest struct {
	t                       *testing.T
	srv                     http.Handler
	admin, operator, viewer string
}

func newMachTest(t *testing.T, db *gorm.DB) *machTest {
	t.Helper()
	a := allocator.New(db, allocator.Options{})
	au := auth.New(a.DB(), auth.Options{})
	ctx := context.Background()
	m := &machTest{t: t, srv: New(Config{Allocator: a}).Handler(),
		admin: "mach-admin-token", operator: "mach-operator-token", viewer: "mach-viewer-token"}
	if _, err := au.EnsureAdminToken(ctx, m.admin); err != nil {
		t.Fatal(err)
	}
	if _, err := au.CreateToken(ctx, "op", auth.RoleOperator, m.operator); err != nil {
		t.Fatal(err)
	}
	if _, err := au.CreateToken(ctx, "view", auth.RoleViewer, m.viewer); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"name":"lo-ip","type":"ipv4","ranges":[{"first":"10.180.62.1","last":"10.180.62.99"},{"first":"10.180.62.200","last":"10.180.62.250","auto_assign":false}]}`,
		`{"name":"lo-ip-v6","type":"ipv6","ranges":[{"first":"fd00:180:62::1","last":"fd00:180:62::ff"},{"first":"fd00:180:62:1::1","last":"fd00:180:62:1::ff","auto_assign":false}]}`,
	} {
		m.want(201, "POST", "/api/v1/pools", m.admin, body)
	}
	return m
}

func (m *machTest) call(method, path, token, body string) (int, []byte) {
	m.t.Helper()
	return ownersCall(m.t, m.srv, method, path, token, body)
}

// want calls and fails unless the status matches; it returns the body
// decoded as a generic JSON object.
func (m *machTest) want(status int, method, path, token, body string) map[string]any {
	m.t.Helper()
	code, b := m.call(method, path, token, body)
	if code != status {
		m.t.Fatalf("%s %s: %d %s; want %d", method, path, code, b, status)
	}
	out := map[string]any{}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			m.t.Fatalf("%s %s: body %s: %v", method, path, b, err)
		}
	}
	return out
}

func (m *machTest) wantError(status int, code, field, method, path, token, body string) {
	m.t.Helper()
	out := m.want(status, method, path, token, body)
	e, _ := out["error"].(map[string]any)
	if e == nil || e["code"] != code || (field != "" && e["field"] != field) || e["message"] == "" {
		m.t.Fatalf("%s %s: error %v; want code %s field %q", method, path, out, code, field)
	}
}

func keys(v any) string {
	obj, _ := v.(map[string]any)
	var ks []string
	for k := range obj {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

func TestMachinesAPI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		m := newMachTest(t, db)
		m.want(201, "POST", "/api/v1/expected-machines", m.operator, `{"bmc_mac_address":"0a:00:00:00:01:01","chassis_serial_number":"CHS-1",
			"expected_dpus":[{"serial_number":"MT1","loopback_ip":"10.180.62.210","loopback_ip_v6":"fd00:180:62:1::11"},{"serial_number":"MT2"}]}`)
		m.want(201, "POST", "/api/v1/expected-machines", m.operator, `{"bmc_mac_address":"0a:00:00:00:01:02","expected_dpus":[{"serial_number":"MT9"}]}`)

		// Roles and refusals: nothing recorded.
		report := `{"bmc_mac_address":"0A-00-00-00-01-01","chassis_serial_number":"CHS-1","dpus":[{"serial_number":"MT2"},{"serial_number":"MT1"}]}`
		m.wantError(401, "unauthorized", "", "POST", "/api/v1/site-explorer/reports", "", report)
		m.wantError(403, "forbidden", "", "POST", "/api/v1/site-explorer/reports", m.viewer, report)
		m.wantError(400, "bad_request", "", "POST", "/api/v1/site-explorer/reports", m.operator, `{"bmc_mac_address":`)
		m.wantError(422, "invalid", "bmc_mac_address", "POST", "/api/v1/site-explorer/reports", m.operator, `{"bmc_mac_address":"x"}`)
		m.wantError(422, "invalid", "dpus[1].serial_number", "POST", "/api/v1/site-explorer/reports", m.operator,
			`{"bmc_mac_address":"0a:00:00:00:01:01","dpus":[{"serial_number":"A"},{"serial_number":"A"}]}`)
		if got := m.want(200, "GET", "/api/v1/machines", m.viewer, "")["items"].([]any); len(got) != 0 {
			t.Fatalf("refused reports recorded machines: %v", got)
		}

		// A report: hosts ready, DPUs matched by serial whatever the order.
		res := m.want(200, "POST", "/api/v1/site-explorer/reports", m.operator, report)
		if keys(res) != "incomplete,machines" || len(res["incomplete"].([]any)) != 0 {
			t.Fatalf("report answer %v", res)
		}
		host := res["machines"].([]any)[0].(map[string]any)
		if keys(host) != "bmc_mac_address,chassis_serial_number,dpus,expected_machine_id,kind,machine_id,state" ||
			host["kind"] != "host" || host["state"] != "ready" || host["bmc_mac_address"] != "0a:00:00:00:01:01" || host["expected_machine_id"] == nil {
			t.Fatalf("host %v", host)
		}
		dpus := host["dpus"].([]any)
		dpu := dpus[0].(map[string]any)
		nc := dpu["network_config"].(map[string]any)
		if keys(dpu) != "kind,machine_id,network_config,serial_number" || dpu["kind"] != "dpu" || dpu["serial_number"] != "MT1" ||
			keys(nc) != "loopback_ip,loopback_ip_v6,version" || nc["loopback_ip"] != "10.180.62.210" || nc["loopback_ip_v6"] != "fd00:180:62:1::11" {
			t.Fatalf("dpu %v", dpu)
		}
		if dpu["machine_id"] != allocator.DPUMachineID("MT1") {
			t.Fatalf("machine_id %v is not derived from the serial", dpu["machine_id"])
		}
		hostID := host["machine_id"].(string)

		// A second host whose DPU has no reservation: automatic values.
		res = m.want(200, "POST", "/api/v1/site-explorer/reports", m.operator, `{"bmc_mac_address":"0a:00:00:00:01:02","dpus":[{"serial_number":"MT9"}]}`)
		if len(res["incomplete"].([]any)) != 0 {
			t.Fatalf("incomplete %v", res["incomplete"])
		}

		// Direct discovery of a DPU without host: host-less entry.
		res = m.want(200, "POST", "/api/v1/machines:discover", m.operator, `{"serial_number":"MT7"}`)
		lone := res["machines"].([]any)[0].(map[string]any)
		if lone["kind"] != "dpu" || lone["host_machine_id"] != nil || lone["state"] != "ready" {
			t.Fatalf("host-less DPU %v", lone)
		}
		m.wantError(403, "forbidden", "", "POST", "/api/v1/machines:discover", m.viewer, `{"serial_number":"MT7"}`)

		// Reads.
		list := m.want(200, "GET", "/api/v1/machines?limit=2", m.viewer, "")
		if len(list["items"].([]any)) != 2 || list["next_cursor"] == "" {
			t.Fatalf("list page %v", list)
		}
		m.wantError(422, "invalid", "state", "GET", "/api/v1/machines?state=odd", m.viewer, "")
		for _, id := range []string{hostID, "0a:00:00:00:01:01", "MT1"} {
			m.want(200, "GET", "/api/v1/machines/"+id, m.viewer, "")
		}
		m.wantError(404, "not_found", "", "GET", "/api/v1/machines/nothing-here", m.viewer, "")

		b := m.want(200, "GET", "/api/v1/dpu-bindings", m.viewer, "")
		items := b["items"].([]any)
		if len(items) != 4 {
			t.Fatalf("bindings %v", items)
		}
		for _, it := range items {
			bd := it.(map[string]any)
			if keys(bd) != "expected_machine_id,host_machine_id,loopback_ip,loopback_ip_v6,machine_id,reserved_ip,reserved_ip_v6,serial_number,status_v4,status_v6" {
				t.Fatalf("binding keys %s", keys(bd))
			}
			switch bd["serial_number"] {
			case "MT1":
				if bd["status_v4"] != "reserved" || bd["status_v6"] != "reserved" {
					t.Fatalf("MT1 binding %v", bd)
				}
			case "MT7":
				if bd["status_v4"] != "automatic" || bd["reserved_ip"] != nil || bd["expected_machine_id"] != nil {
					t.Fatalf("MT7 binding %v", bd)
				}
			}
		}
		m.wantError(422, "invalid", "status", "GET", "/api/v1/dpu-bindings?status=weird", m.viewer, "")
		for _, v := range []string{"10.180.62.210", "fd00:180:62:1::11"} {
			addr := m.want(200, "GET", "/api/v1/addresses/"+v, m.viewer, "")
			found := false
			for _, e := range addr["entries"].([]any) {
				en := e.(map[string]any)
				if en["kind"] == "allocation" && en["owner_id"] == allocator.DPUMachineID("MT1") {
					found = true
				}
			}
			if !found {
				t.Fatalf("address %s: %v", v, addr)
			}
		}

		// Delete impact and delete.
		imp := m.want(200, "GET", "/api/v1/machines/"+hostID+"/delete-impact?force=true", m.viewer, "")
		if keys(imp) != "force,machine_id,values,warning" || imp["force"] != true || imp["warning"] == "" {
			t.Fatalf("impact %v", imp)
		}
		actions := map[string]string{}
		for _, v := range imp["values"].([]any) {
			iv := v.(map[string]any)
			if keys(iv) != "action,pool,reason,value" {
				t.Fatalf("impact value %v", iv)
			}
			actions[iv["value"].(string)] = iv["action"].(string)
		}
		if actions["10.180.62.210"] != "return_to_reservation" || actions["fd00:180:62:1::11"] != "return_to_reservation" ||
			actions["10.180.62.1"] != "quarantine" || len(actions) != 4 {
			t.Fatalf("impact actions %v", actions)
		}
		m.wantError(422, "invalid", "force", "GET", "/api/v1/machines/"+hostID+"/delete-impact?force=maybe", m.viewer, "")
		m.wantError(409, "conflict", "", "DELETE", "/api/v1/machines/"+hostID, m.operator, "")
		m.wantError(403, "forbidden", "", "DELETE", "/api/v1/machines/"+hostID+"?force=true", m.operator, "")
		m.wantError(403, "forbidden", "", "POST", "/api/v1/machines/"+hostID+":decommission", m.viewer, "")
		m.wantError(404, "not_found", "", "POST", "/api/v1/machines/"+hostID+":explode", m.operator, "")
		dec := m.want(200, "POST", "/api/v1/machines/"+hostID+":decommission", m.operator, "")
		if dec["state"] != "decommissioned" {
			t.Fatalf("decommission answer %v", dec)
		}
		m.wantError(409, "conflict", "", "POST", "/api/v1/machines/"+hostID+":decommission", m.operator, "")
		imp = m.want(200, "GET", "/api/v1/machines/"+hostID+"/delete-impact", m.viewer, "")
		if imp["force"] != false {
			t.Fatalf("force %v", imp["force"])
		}
		m.want(204, "DELETE", "/api/v1/machines/"+hostID, m.operator, "")
		m.wantError(404, "not_found", "", "GET", "/api/v1/machines/"+hostID, m.viewer, "")

		// Force delete by an admin quarantines what the hardware may carry.
		m.want(204, "DELETE", "/api/v1/machines/MT7?force=true", m.admin, "")
		q := m.want(200, "GET", "/api/v1/pools/lo-ip/allocations?state=quarantined", m.viewer, "")
		qi := q["items"].([]any)
		if len(qi) != 1 || qi[0].(map[string]any)["former_owner_id"] != allocator.DPUMachineID("MT7") {
			t.Fatalf("quarantined %v", qi)
		}
		// Re-ingesting the same hardware gives it back its own value.
		res = m.want(200, "POST", "/api/v1/machines:discover", m.operator, `{"serial_number":"MT7"}`)
		again := res["machines"].([]any)[0].(map[string]any)["network_config"].(map[string]any)
		if again["loopback_ip"] != qi[0].(map[string]any)["value"] {
			t.Fatalf("re-ingested MT7 got %v, held %v", again, qi[0])
		}
	})
}
