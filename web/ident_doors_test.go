package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/proto/gen/forge"
)

// mixedMAC is a MAC address written with both separators: the one rule of
// package ident refuses it everywhere (docs/decisions.md "One rule per
// identifier"); the same octets with one separator are accepted.
const mixedMAC = "02-00:00:00:00:01"

// TestMixedSeparatorMACAtEveryAPIDoor: REST (ExpectedMachine create and
// look-up, site-explorer report, discovery, machine look-up) and gRPC
// refuse or do not find a MAC with mixed separators, and store nothing; the
// same address with one separator goes through the same doors.
func TestMixedSeparatorMACAtEveryAPIDoor(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		env := newGRPCEnv(t, db)
		ctx := context.Background()
		events := env.auditCount()
		for _, c := range []struct{ path, body, field string }{
			{"/api/v1/expected-machines", `{"bmc_mac_address":"` + mixedMAC + `"}`, "bmc_mac_address"},
			{"/api/v1/site-explorer/reports", `{"bmc_mac_address":"` + mixedMAC + `","dpus":[{"serial_number":"MT-MIX-1"}]}`, "bmc_mac_address"},
			{"/api/v1/machines:discover", `{"serial_number":"MT-MIX-2","host_bmc_mac_address":"` + mixedMAC + `"}`, "host_bmc_mac_address"},
		} {
			r := env.do("POST", c.path, env.admin, c.body, nil)
			var e struct {
				Error struct{ Code, Field, Message string } `json:"error"`
			}
			_ = json.Unmarshal(r.Body.Bytes(), &e)
			if r.Code != http.StatusUnprocessableEntity || e.Error.Field != c.field || !strings.Contains(e.Error.Message, mixedMAC) {
				t.Errorf("POST %s: %d %s, want 422 naming %s and the value", c.path, r.Code, r.Body, c.field)
			}
		}
		for _, p := range []string{"/api/v1/expected-machines/", "/api/v1/machines/"} {
			if r := env.do("GET", p+url.PathEscape(mixedMAC), env.admin, "", nil); r.Code != http.StatusNotFound && r.Code != http.StatusUnprocessableEntity {
				t.Errorf("GET %s%s: %d %s, want 404 or 422", p, mixedMAC, r.Code, r.Body)
			}
		}
		_, err := env.client(env.operator).AddExpectedMachine(ctx, connect.NewRequest(&forge.ExpectedMachine{BmcMacAddress: mixedMAC}))
		wantCode(t, "gRPC AddExpectedMachine", err, connect.CodeInvalidArgument, "bmc_mac_address: \""+mixedMAC+"\" is not a MAC address")
		if n := env.auditCount(); n != events {
			t.Fatalf("refused requests wrote %d audit events", n-events)
		}
		var machines, ems int64
		db.Model(&models.Machine{}).Count(&machines)
		db.Model(&models.ExpectedMachine{}).Count(&ems)
		if machines != 0 || ems != 0 {
			t.Fatalf("refused requests stored %d machines and %d ExpectedMachines", machines, ems)
		}

		// One separator throughout: accepted by the same doors.
		one := strings.ReplaceAll(mixedMAC, ":", "-")
		if r := env.do("POST", "/api/v1/site-explorer/reports", env.admin, `{"bmc_mac_address":"`+one+`","dpus":[{"serial_number":"MT-MIX-1"}]}`, nil); r.Code != http.StatusOK {
			t.Fatalf("report with %s: %d %s", one, r.Code, r.Body)
		}
		if r := env.do("GET", "/api/v1/machines/"+url.PathEscape(one), env.admin, "", nil); r.Code != http.StatusOK {
			t.Fatalf("GET machine %s: %d %s", one, r.Code, r.Body)
		}
		if _, err := env.client(env.operator).AddExpectedMachine(ctx, connect.NewRequest(&forge.ExpectedMachine{BmcMacAddress: strings.ToUpper(one)})); err != nil {
			t.Fatalf("gRPC AddExpectedMachine %s: %v", one, err)
		}
		if r := env.do("GET", "/api/v1/expected-machines/"+url.PathEscape("02:00:00:00:00:01"), env.admin, "", nil); r.Code != http.StatusOK {
			t.Fatalf("GET ExpectedMachine: %d %s", r.Code, r.Body)
		}
	})
}
