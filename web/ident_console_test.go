package web_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
)

// consoleMixedMAC: see mixedMAC in ident_doors_test.go.
const consoleMixedMAC = "02-00:00:00:00:01"

// TestMixedSeparatorMACAtEveryConsoleDoor: the console's ExpectedMachine
// form refuses a MAC with mixed separators beside its field, the search
// does not take it for the host's MAC, and it does not confirm a force
// delete; the same address with one separator does all three.
func TestMixedSeparatorMACAtEveryConsoleDoor(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedSite(t, site.a)
		ctx := context.Background()
		op := site.login(auth.RoleOperator)
		admin := site.login(auth.RoleAdmin)
		form := url.Values{"mac": {consoleMixedMAC}, "username": {"root"}, "password": {""}, "chassis": {"SN-MIX"}, "name": {""},
			"labels": {""}, "fallback": {""}}
		expect(t, op.htmx(http.MethodPost, "/expected-machines/validate", form), http.StatusUnprocessableEntity, `id="err-bmc_mac_address"`, consoleMixedMAC)
		form.Set("mac", "02-00-00-00-00-01")
		expect(t, op.htmx(http.MethodPost, "/expected-machines/validate", form), http.StatusOK)

		// A host without an ExpectedMachine: its name is its BMC MAC.
		if _, err := site.a.Report(ctx, allocator.ReportSpec{BmcMacAddress: "02:00:00:00:00:01", DPUs: []allocator.ReportDPU{{SerialNumber: "MT-MIX-1"}}}); err != nil {
			t.Fatal(err)
		}
		host := allocator.HostMachineID("02:00:00:00:00:01")
		res := op.get("/search?q=" + url.QueryEscape(consoleMixedMAC))
		readBody(t, res)
		if res.StatusCode == http.StatusSeeOther && res.Header.Get("Location") == "/machines/"+host {
			t.Errorf("search %q found the host by MAC", consoleMixedMAC)
		}
		res = op.get("/search?q=" + url.QueryEscape("02-00-00-00-00-01"))
		readBody(t, res)
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/machines/"+host {
			t.Errorf("search with one separator: %d to %q, want 303 to the host", res.StatusCode, res.Header.Get("Location"))
		}
		expect(t, admin.htmx(http.MethodPost, "/machines/"+host+"/force-delete", url.Values{"confirm_name": {consoleMixedMAC}}),
			http.StatusUnprocessableEntity, `data-field="confirm_name"`)
		if _, err := site.a.GetMachine(ctx, host); err != nil {
			t.Fatalf("a refused confirmation deleted the host: %v", err)
		}
		expect(t, admin.htmx(http.MethodPost, "/machines/"+host+"/force-delete", url.Values{"confirm_name": {"02-00-00-00-00-01"}}), http.StatusOK)
		if _, err := site.a.GetMachine(ctx, host); err == nil {
			t.Fatal("the MAC with one separator did not confirm the force delete")
		}
	})
}
