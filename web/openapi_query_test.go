package web

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// Every query parameter the OpenAPI document lists for an operation is one
// the server takes: a generated client that sends a documented parameter
// must never be told it is unknown.
func TestOpenAPIQueryParametersAreAccepted(t *testing.T) {
	t.Parallel()
	env := newSecEnv(t, dbtest.Open(t, models.SQLite))
	rec := httptest.NewRecorder()
	env.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/openapi.json", nil))
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
			RequestBody json.RawMessage `json:"requestBody"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	pathParam := regexp.MustCompile(`\{[^}]+\}`)
	var checked []string
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for _, p := range op.Parameters {
				if p.In != "query" {
					continue
				}
				target := "/api/v1" + pathParam.ReplaceAllString(path, "x") + "?" + url.Values{p.Name: {"x"}}.Encode()
				body := ""
				if op.RequestBody != nil {
					body = `{"expected_machines": []}`
				}
				r := env.do(secReq{method: strings.ToUpper(method), path: target, body: body, token: env.tok.admin})
				if strings.Contains(r.Body.String(), "unknown query parameter") {
					t.Errorf("%s %s documents query parameter %q, which the server refuses: %d %s", strings.ToUpper(method), path, p.Name, r.Code, r.Body)
				}
				checked = append(checked, strings.ToUpper(method)+" "+path+" "+p.Name)
			}
		}
	}
	sort.Strings(checked)
	if len(checked) < 10 {
		t.Fatalf("only %d documented query parameters were tried: %v", len(checked), checked)
	}
}
