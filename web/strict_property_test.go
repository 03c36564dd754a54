package web

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/strictjson/strictjsontest"
)

// validBodies are one valid JSON body per REST route that reads one, keyed
// by the route table's method and path. The property test below walks the
// route table: a new POST, PUT or PATCH route without a body here (or a
// reason in noJSONBody) fails it.
var validBodies = map[string]string{
	"POST /pools":                                    `{"name":"p-new","type":"ipv4","ranges":[{"first":"10.9.0.1","last":"10.9.0.9","auto_assign":false}],"gateway":"10.9.0.254"}`,
	"POST /pools/:name/ranges":                       `{"first":"10.180.63.1","last":"10.180.63.9","auto_assign":false}`,
	"PATCH /pools/:name/ranges/:id":                  `{"last":"10.180.62.70","auto_assign":true}`,
	"POST /pools/:name/allocations":                  `{"owner_type":"machine","owner_id":"m-prop","value":"10.180.62.200"}`,
	"POST /pools/:name/allocations\\:batch":          `{"allocations":[{"owner_type":"machine","owner_id":"m-prop-b1"},{"owner_type":"machine","owner_id":"m-prop-b2","value":"10.180.62.205"}]}`,
	"POST /site-explorer/reports":                    `{"bmc_mac_address":"0a:00:00:00:0b:01","chassis_serial_number":"CHS-B1","dpus":[{"serial_number":"MT-PROP-1"},{"serial_number":"MT-PROP-2"}]}`,
	`POST /machines\:discover`:                       `{"serial_number":"MT-PROP-3","host_bmc_mac_address":"0a:00:00:00:0b:01"}`,
	"POST /expected-machines":                        `{"bmc_mac_address":"0a:00:00:00:0c:01","bmc_username":"root","bmc_password":"pw","chassis_serial_number":"CHS-C1","fallback_dpu_serial_numbers":["MT-F1"],"metadata":{"name":"r1-u1","description":"d","labels":[{"key":"env","value":"prod"},{"key":"row","value":"7"}]},"sku_id":null,"expected_dpus":[{"serial_number":"MT-C1","loopback_ip":"10.180.62.201","loopback_ip_v6":"fd00:1::9"}]}`,
	"PUT /expected-machines":                         `{"expected_machines":[{"bmc_mac_address":"0a:00:00:00:0a:01","bmc_username":"root","chassis_serial_number":"CHS-A1","metadata":{"name":"a1","labels":[{"key":"env","value":"prod"}]},"expected_dpus":[{"serial_number":"MT-A1","loopback_ip":"10.180.62.202"}]},{"bmc_mac_address":"0a:00:00:00:0a:02","bmc_username":"root","chassis_serial_number":"CHS-A2","expected_dpus":[]}]}`,
	"PUT /expected-machines/:id":                     `{"bmc_mac_address":"0a:00:00:00:0a:01","bmc_username":"admin","chassis_serial_number":"CHS-A1","metadata":{"name":"a1-renamed","description":"","labels":[{"key":"k","value":"v"}]},"expected_dpus":[{"serial_number":"MT-A1","loopback_ip":"10.180.62.203"}]}`,
	"POST /expected-machines\\:import":               `{"expected_machines":[{"bmc_mac_address":"0a:00:00:00:0d:01","bmc_username":"root","chassis_serial_number":"CHS-D1","metadata":{"name":"d1","labels":[{"key":"env","value":"prod"}]},"expected_dpus":[{"serial_number":"MT-D1","loopback_ip":"10.180.62.204"}]}]}`,
	"PATCH /expected-machines/:id":                   `{"metadata":{"name":"patched","labels":[{"key":"a","value":"b"}]},"expected_dpus":[{"serial_number":"MT-A1","loopback_ip_v6":"fd00:1::7"}]}`,
	"POST /webhooks":                                 `{"name":"w-prop","url":"http://127.0.0.1:9/hook","secret":"prop-secret-0123456789","actions":["allocation.*","pool.create"],"pools":["lo-ip"],"enabled":true}`,
	"PATCH /webhooks/:id":                            `{"actions":["*"],"pools":null,"enabled":false}`,
	"POST /owners/:owner_type/:owner_id/allocations": `{"pools":["lo-ip",{"pool":"lo-ip-v6","value":"fd00:1::20"}]}`,
}

// noJSONBody are the writing routes that read no JSON body, and why.
var noJSONBody = map[string]string{
	`POST /pools\:load`:                       "takes a TOML pool file (a key repeated in TOML is a syntax error of its own)",
	"POST /pools/:name/allocations/:value":    "the :unquarantine action reads no body",
	"POST /machines/:id":                      "the :decommission action reads no body",
	"POST /webhooks/:id/deliveries/:delivery": "the :redeliver action reads no body",
}

// Property (every JSON door of the REST API): take a valid body, repeat a
// random member of a random object at any depth under the same name or
// under its name in another case; the answer is 422 invalid naming the
// added member's path, and nothing is written (audit events and every
// table's rows are unchanged). The valid body is then accepted, so the
// refusal came from the repeated member alone.
func TestStrictBodiesProperty(t *testing.T) {
	t.Parallel()
	for _, d := range dbtest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			env := newSecEnv(t, dbtest.Open(t, d))
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			r := rand.New(rand.NewPCG(seed, 1))
			ids := propSite(t, env)
			for _, rt := range env.srv.APIRoutes() {
				if !isMutating(rt.Method) || rt.Method == http.MethodDelete {
					continue
				}
				key := rt.Method + " " + rt.Path
				if _, ok := noJSONBody[key]; ok {
					continue
				}
				body, ok := validBodies[key]
				if !ok || body == "" {
					t.Errorf("route %s has no valid body in validBodies (or reason in noJSONBody)", key)
					continue
				}
				path := concrete("/api/v1", rt.Path, map[string]string{"name": "lo-ip", "id": ids[key], "value": "10.180.62.5"})
				for i := 0; i < 25; i++ {
					mut, field, err := strictjsontest.MutateJSON(r, []byte(body))
					if err != nil {
						t.Fatal(err)
					}
					before := tableCounts(t, env.db)
					rec := env.do(secReq{method: rt.Method, path: path, body: string(mut), token: env.tok.admin})
					var eb struct{ Error fault.Error }
					_ = json.Unmarshal(rec.Body.Bytes(), &eb)
					if rec.Code != http.StatusUnprocessableEntity || eb.Error.Code != fault.CodeInvalid || eb.Error.Field != field {
						t.Fatalf("%s %s with %s: %d %s, want 422 invalid naming %q", rt.Method, path, mut, rec.Code, rec.Body, field)
					}
					if after := tableCounts(t, env.db); after != before {
						t.Fatalf("%s %s with %s changed stored state: %s → %s", rt.Method, path, mut, before, after)
					}
				}
				rec := env.do(secReq{method: rt.Method, path: path, body: body, token: env.tok.admin})
				if rec.Code >= 300 {
					t.Fatalf("the valid body of %s was refused: %d %s", key, rec.Code, rec.Body)
				}
			}
		})
	}
}

// propSite is the state the valid bodies need: lo-ip and lo-ip-v6 with
// explicit ranges, an ExpectedMachine to replace and patch. It returns the
// {id} of the routes that need one.
func propSite(t *testing.T, env *secEnv) map[string]string {
	t.Helper()
	for _, b := range []string{
		`{"name":"lo-ip","type":"ipv4","ranges":[{"first":"10.180.62.1","last":"10.180.62.60"},{"first":"10.180.62.200","last":"10.180.62.250","auto_assign":false}]}`,
		`{"name":"lo-ip-v6","type":"ipv6","ranges":[{"first":"fd00::1","last":"fd00::ff"},{"first":"fd00:1::1","last":"fd00:1::ff","auto_assign":false}]}`,
	} {
		if rec := env.do(secReq{method: "POST", path: "/api/v1/pools", body: b, token: env.tok.admin}); rec.Code != http.StatusCreated {
			t.Fatalf("pool: %d %s", rec.Code, rec.Body)
		}
	}
	em := `{"bmc_mac_address":"0a:00:00:00:0a:01","bmc_username":"root","chassis_serial_number":"CHS-A1","expected_dpus":[{"serial_number":"MT-A1"}]}`
	if rec := env.do(secReq{method: "POST", path: "/api/v1/expected-machines", body: em, token: env.tok.admin}); rec.Code != http.StatusCreated {
		t.Fatalf("expected machine: %d %s", rec.Code, rec.Body)
	}
	hook := `{"name":"w-patch","url":"http://127.0.0.1:9/","secret":"prop-secret-0123456789","actions":["*"]}`
	var w struct{ ID string }
	if rec := env.do(secReq{method: "POST", path: "/api/v1/webhooks", body: hook, token: env.tok.admin}); rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &w) != nil {
		t.Fatalf("webhook: %d %s", rec.Code, rec.Body)
	}
	webhookID := w.ID
	var p allocator.Pool
	rec := env.do(secReq{method: "GET", path: "/api/v1/pools/lo-ip", token: env.tok.admin})
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || len(p.Ranges) == 0 {
		t.Fatalf("pool: %v %s", err, rec.Body)
	}
	return map[string]string{
		"PATCH /pools/:name/ranges/:id": p.Ranges[0].ID,
		"PUT /expected-machines/:id":    "0a:00:00:00:0a:01",
		"PATCH /expected-machines/:id":  "0a-00-00-00-0a-01",
		"PATCH /webhooks/:id":           webhookID,
	}
}

// tableCounts is the number of rows of every table a write could touch,
// as one comparable string.
func tableCounts(t *testing.T, db *gorm.DB) string {
	t.Helper()
	var parts []string
	for _, table := range []string{"pools", "pool_ranges", "allocations", "audit_events", "expected_machines", "expected_dpus",
		"machines", "network_configs", "api_tokens", "webhooks", "webhook_deliveries"} {
		var n int64
		if err := db.Table(table).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		parts = append(parts, table+"="+itoa(n))
	}
	var v int64
	if err := db.Model(&models.ExpectedMachine{}).Select("COALESCE(SUM(version), 0)").Scan(&v).Error; err != nil {
		t.Fatal(err)
	}
	var rv int64
	if err := db.Model(&models.PoolRange{}).Select("COALESCE(SUM(version), 0)").Scan(&rv).Error; err != nil {
		t.Fatal(err)
	}
	return strings.Join(append(parts, "em_versions="+itoa(v), "range_versions="+itoa(rv)), " ")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
