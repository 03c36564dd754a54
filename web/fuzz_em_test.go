package web

// FuzzExpectedMachineBodies sends arbitrary bodies to every door that
// writes an ExpectedMachine through the REST API — POST, PUT and PATCH of
// one record and the atomic replace-all with the NICo file format — on a
// server whose lo-ip / lo-ip-v6 pools have auto and reserved ranges. The
// property: no input panics or ends in a 5xx; every
// rejection is a 4xx with a code of the contract (a 422 names its field);
// every acceptance returns the record without its BMC password and can be
// read back. Run:
//
//	go test ./web -run '^$' -fuzz '^FuzzExpectedMachineBodies$' -fuzztime 10m -parallel 1

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

var contractCodes = map[string]int{
	"bad_request": 400, "unauthorized": 401, "forbidden": 403, "not_found": 404, "conflict": 409,
	"not_available": 409, "pool_exhausted": 409, "not_owner": 409, "stale_version": 412, "invalid": 422,
}

func FuzzExpectedMachineBodies(f *testing.F) {
	seeds := []string{
		`{"bmc_mac_address":"1a:1b:1c:1d:1e:1f","bmc_username":"root","bmc_password":"pw","chassis_serial_number":"SN-0001","fallback_dpu_serial_numbers":["MT0001"],"metadata":{"name":"rack7-u12","description":"","labels":[{"key":"env","value":"prod"}]},"sku_id":null,"expected_dpus":[{"serial_number":"MT0001","loopback_ip":"10.180.62.200","loopback_ip_v6":"fd00:180:62:1::c8"}]}`,
		`{"bmc_mac_address":"1A-1B-1C-1D-1E-2F","expected_dpus":[{"serial_number":"MT0002","loopback_ip":"10.180.62.201"},{"serial_number":"MT0003","loopback_ip":"10.180.62.201"}]}`,
		`{"expected_dpus":null}`,
		`{"expected_dpus":[]}`,
		`{"expected_dpus":[{"serial_number":" bad serial "}]}`,
		`{"expected_dpus":[{"serial_number":"MT9","loopback_ip_v6":"::ffff:10.0.0.1"}]}`,
		`{"expected_dpus":[{"serial_number":"MT9","loopback_ip":"fe80::1%eth0"}]}`,
		`{"expected_dpus":[{"serial_number":"MT9","loopback_ip":"10.180.62.5"}]}`,
		`{"metadata":{"labels":[{"key":1}]}}`,
		`{"expected_machines":[{"bmc_mac_address":"1a:1b:1c:1d:1e:1f"},{"bmc_mac_address":"1a:1b:1c:1d:1e:1f"}]}`,
		`{"expected_machines":[]}`,
		`[]`, `null`, `{`, ``, `{"bmc_password":123}`, `{"bmc_mac_address":"zz"}`,
	}
	for _, s := range seeds {
		for door := uint8(0); door < 5; door++ {
			f.Add(door, s)
		}
	}
	db := dbtest.Open(f, models.SQLite)
	a := allocator.New(db, allocator.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	au := auth.New(a.DB(), auth.Options{})
	const tok = "fuzz-em-admin-token"
	ctx := context.Background()
	if _, err := au.EnsureAdminToken(ctx, tok); err != nil {
		f.Fatal(err)
	}
	srv := New(Config{Allocator: a, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}).Handler()
	call := func(method, path, ct, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", ct)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	for _, p := range []string{
		`{"name":"lo-ip","type":"ipv4","ranges":[{"first":"10.180.62.1","last":"10.180.62.199"},{"first":"10.180.62.200","last":"10.180.62.254","auto_assign":false}]}`,
		`{"name":"lo-ip-v6","type":"ipv6","ranges":[{"first":"fd00:180:62::1","last":"fd00:180:62::ffff"},{"first":"fd00:180:62:1::","last":"fd00:180:62:1::ff","auto_assign":false}]}`,
	} {
		if rec := call("POST", "/api/v1/pools", "application/json", p); rec.Code != http.StatusCreated {
			f.Fatalf("create pool: %d %s", rec.Code, rec.Body)
		}
	}
	if rec := call("POST", "/api/v1/expected-machines", "application/json", `{"bmc_mac_address":"0a:00:00:00:00:01","bmc_password":"seed"}`); rec.Code != http.StatusCreated {
		f.Fatalf("create expected machine: %d %s", rec.Code, rec.Body)
	}
	f.Fuzz(func(t *testing.T, door uint8, body string) {
		var method, path, ct string
		switch door % 5 {
		case 0:
			method, path, ct = "POST", "/api/v1/expected-machines", "application/json"
		case 1:
			method, path, ct = "PUT", "/api/v1/expected-machines/0a:00:00:00:00:01", "application/json"
		case 2:
			method, path, ct = "PATCH", "/api/v1/expected-machines/0a:00:00:00:00:01", "application/merge-patch+json"
		case 3:
			method, path, ct = "PUT", "/api/v1/expected-machines", "application/json"
		case 4:
			method, path, ct = "PATCH", "/api/v1/expected-machines/0a:00:00:00:00:01", "application/json"
		}
		if door%5 == 1 || door%5 == 2 || door%5 == 4 {
			// A replace-all may have removed the record the single-record
			// doors edit: put it back.
			if call("GET", "/api/v1/expected-machines/0a:00:00:00:00:01", "", "").Code == http.StatusNotFound {
				call("POST", "/api/v1/expected-machines", "application/json", `{"bmc_mac_address":"0a:00:00:00:00:01","bmc_password":"seed"}`)
			}
		}
		rec := call(method, path, ct, body)
		out := rec.Body.String()
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, path, body, rec.Code, out)
		}
		if rec.Code >= 400 {
			var e struct {
				Error struct {
					Code, Message, Field string
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatalf("%s %q: %d answer is not the error shape: %s", method, body, rec.Code, out)
			}
			if st, ok := contractCodes[e.Error.Code]; !ok || st != rec.Code {
				t.Fatalf("%s %q: %d with code %q, not a code of the contract with that status", method, body, rec.Code, e.Error.Code)
			}
			if e.Error.Code == "invalid" && e.Error.Field == "" {
				t.Fatalf("%s %q: 422 without a field: %s", method, body, out)
			}
			if e.Error.Message == "" {
				t.Fatalf("%s %q: error without a message", method, body)
			}
			return
		}
		if strings.Contains(out, `"bmc_password":`) {
			t.Fatalf("%s %q: the answer carries bmc_password: %s", method, body, out)
		}
		if door%5 == 3 {
			return
		}
		var em struct {
			ID           string            `json:"id"`
			ExpectedDPUs []json.RawMessage `json:"expected_dpus"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &em); err != nil || em.ID == "" || em.ExpectedDPUs == nil {
			t.Fatalf("%s %q: %d answer is not an ExpectedMachine with expected_dpus: %s", method, body, rec.Code, out)
		}
		if back := call("GET", "/api/v1/expected-machines/"+em.ID, "", ""); back.Code != http.StatusOK {
			t.Fatalf("%s %q: accepted record %s cannot be read back: %d", method, body, em.ID, back.Code)
		}
		if door%5 == 0 {
			// Keep the table small: remove what POST created.
			if del := call("DELETE", "/api/v1/expected-machines/"+em.ID, "", ""); del.Code != http.StatusNoContent {
				t.Fatalf("delete %s: %d %s", em.ID, del.Code, del.Body)
			}
		}
	})
}
