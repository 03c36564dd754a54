package web_test

import (
	"bytes"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/strictjson/strictjsontest"
)

// Property (the console's import door): a valid NICo file with one member
// repeated — under its own name or in another case — in a random object at
// any depth is refused as a whole with 422 naming the added member's path,
// in both modes, and nothing is written. The valid file is then imported.
func TestConsoleImportStrictProperty(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		site := newConsoleSite(t, db)
		seedSite(t, site.a)
		b := site.login(auth.RoleOperator)
		file := `{"expected_machines":[
		  {"bmc_mac_address":"3a:00:00:00:00:01","bmc_username":"root","bmc_password":"pw","chassis_serial_number":"SN-31",
		   "metadata":{"name":"r3-u1","description":"","labels":[{"key":"env","value":"prod"}]},
		   "expected_dpus":[{"serial_number":"MT3001","loopback_ip":"10.180.62.200"}]},
		  {"bmc_mac_address":"3a:00:00:00:00:02","chassis_serial_number":"SN-32","fallback_dpu_serial_numbers":["MT3009"]}]}`
		upload := func(mode, content string) *http.Response {
			var buf bytes.Buffer
			w := multipart.NewWriter(&buf)
			_ = w.WriteField("csrf_token", b.csrf)
			_ = w.WriteField("mode", mode)
			fw, _ := w.CreateFormFile("file", "expected-machines.json")
			_, _ = fw.Write([]byte(content))
			w.Close()
			req, _ := http.NewRequest(http.MethodPost, site.srv.URL+"/expected-machines/import", &buf)
			req.Header.Set("Content-Type", w.FormDataContentType())
			req.Header.Set("HX-Request", "true")
			return b.do(req)
		}
		seed := rand.Uint64()
		t.Logf("seed %d", seed)
		r := rand.New(rand.NewPCG(seed, 2))
		for i := 0; i < 30; i++ {
			mut, field, err := strictjsontest.MutateJSON(r, []byte(file))
			if err != nil {
				t.Fatal(err)
			}
			mode := []string{"merge", "replace"}[i%2]
			before := rowCounts(t, db)
			expect(t, upload(mode, string(mut)), http.StatusUnprocessableEntity, field)
			if after := rowCounts(t, db); after != before {
				t.Fatalf("%s import of %s changed stored state: %s → %s", mode, mut, before, after)
			}
		}
		expect(t, upload("merge", file), http.StatusOK, "2 created")
	})
}

func rowCounts(t *testing.T, db *gorm.DB) string {
	t.Helper()
	var parts []string
	for _, table := range []string{"expected_machines", "expected_dpus", "audit_events", "allocations"} {
		var n int64
		if err := db.Table(table).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		parts = append(parts, table+"="+strconv.FormatInt(n, 10))
	}
	return strings.Join(parts, " ")
}
