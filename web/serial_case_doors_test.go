package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/proto/gen/forge"
)

// TestSerialInAnotherCaseAtEveryAPIDoor: with MT5002X00001 declared, a
// declaration of mt5002x00001 is refused at every door that writes
// ExpectedMachines — REST POST, PUT and PATCH (409 conflict naming the
// field, the stored spelling and the declaring record), the merge import
// and replace-all (the file's own two spellings are one serial twice:
// 422), gRPC AddExpectedMachine and UpdateExpectedMachine
// (AlreadyExists) — and nothing is written.
func TestSerialInAnotherCaseAtEveryAPIDoor(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		env := newGRPCEnv(t, db)
		ctx := context.Background()
		if r := env.do("POST", "/api/v1/expected-machines", env.admin,
			`{"bmc_mac_address":"0a:00:00:00:50:01","metadata":{"name":"rack5-u01"},"expected_dpus":[{"serial_number":"MT5002X00001"}]}`, nil); r.Code != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Code, r.Body)
		}
		var b struct{ ID string }
		r := env.do("POST", "/api/v1/expected-machines", env.admin, `{"bmc_mac_address":"0a:00:00:00:50:02"}`, nil)
		if r.Code != http.StatusCreated || json.Unmarshal(r.Body.Bytes(), &b) != nil {
			t.Fatalf("create the second: %d %s", r.Code, r.Body)
		}
		events := env.auditCount()
		twin := `[{"serial_number":"mt5002x00001"}]`
		for _, c := range []struct {
			method, path, body string
			status             int
			field              string
		}{
			{"POST", "/api/v1/expected-machines", `{"bmc_mac_address":"0a:00:00:00:50:03","expected_dpus":` + twin + `}`, 409, "expected_dpus[0].serial_number"},
			{"PUT", "/api/v1/expected-machines/" + b.ID, `{"bmc_mac_address":"0a:00:00:00:50:02","expected_dpus":` + twin + `}`, 409, "expected_dpus[0].serial_number"},
			{"PATCH", "/api/v1/expected-machines/" + b.ID, `{"expected_dpus":` + twin + `}`, 409, "expected_dpus[0].serial_number"},
			{"POST", "/api/v1/expected-machines:import", `{"expected_machines":[{"bmc_mac_address":"0a:00:00:00:50:02","expected_dpus":` + twin + `}]}`,
				409, "expected_machines[0].expected_dpus[0].serial_number"},
			{"PUT", "/api/v1/expected-machines", `{"expected_machines":[{"bmc_mac_address":"0a:00:00:00:50:01","expected_dpus":[{"serial_number":"MT5002X00001"}]},
				{"bmc_mac_address":"0a:00:00:00:50:02","expected_dpus":` + twin + `}]}`, 422, "expected_machines[1].expected_dpus[0].serial_number"},
		} {
			r := env.do(c.method, c.path, env.admin, c.body, nil)
			var e struct {
				Error struct{ Code, Field, Message string } `json:"error"`
			}
			_ = json.Unmarshal(r.Body.Bytes(), &e)
			if r.Code != c.status || e.Error.Field != c.field || !strings.Contains(e.Error.Message, "mt5002x00001") {
				t.Errorf("%s %s: %d %s, want %d naming %s and the serial", c.method, c.path, r.Code, r.Body, c.status, c.field)
			}
			if c.status == 409 && (!strings.Contains(e.Error.Message, "MT5002X00001") || !strings.Contains(e.Error.Message, "rack5-u01")) {
				t.Errorf("%s %s: %q does not name the stored spelling and its ExpectedMachine", c.method, c.path, e.Error.Message)
			}
		}
		cl := env.client(env.operator)
		dpus := &forge.ExpectedDpuList{Items: []*forge.ExpectedDpu{{SerialNumber: "mt5002x00001"}}}
		_, err := cl.AddExpectedMachine(ctx, connect.NewRequest(&forge.ExpectedMachine{BmcMacAddress: "0a:00:00:00:50:04", ExpectedDpus: dpus}))
		wantCode(t, "gRPC AddExpectedMachine", err, connect.CodeAlreadyExists, "expected_dpus.items[0].serial_number: serial_number mt5002x00001 is already declared as MT5002X00001")
		_, err = cl.UpdateExpectedMachine(ctx, connect.NewRequest(&forge.ExpectedMachine{BmcMacAddress: "0a:00:00:00:50:02", ExpectedDpus: dpus}))
		wantCode(t, "gRPC UpdateExpectedMachine", err, connect.CodeAlreadyExists, "expected_dpus.items[0].serial_number: serial_number mt5002x00001 is already declared as MT5002X00001")
		if n := env.auditCount(); n != events {
			t.Fatalf("refused requests wrote %d audit events", n-events)
		}
		var n int64
		db.Raw(`SELECT COUNT(*) FROM expected_dpus`).Scan(&n)
		if n != 1 {
			t.Fatalf("%d expected DPUs stored after the refusals, want 1", n)
		}
		// The same record may change the case of its own serial.
		if r := env.do("PATCH", "/api/v1/expected-machines/0a:00:00:00:50:01", env.admin, `{"expected_dpus":`+twin+`}`, nil); r.Code != http.StatusOK {
			t.Fatalf("respelling a record's own serial: %d %s", r.Code, r.Body)
		}
	})
}
