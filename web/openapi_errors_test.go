package web

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/paths"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/handlers"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// docErrorExamples reads the error examples of the served document:
// route key → status → error.
func docErrorExamples(t *testing.T) map[string]map[int]fault.Error {
	t.Helper()
	b, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Route     string `json:"x-ipledger-route"`
			Responses map[string]struct {
				Content map[string]struct {
					Example *struct {
						Error fault.Error `json:"error"`
					} `json:"example"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int]fault.Error{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			out[op.Route] = map[int]fault.Error{}
			for st, resp := range op.Responses {
				var status int
				if _, err := fmt.Sscan(st, &status); err != nil || status < 400 {
					continue
				}
				ex := resp.Content["application/json"].Example
				if ex == nil {
					t.Errorf("%s %s: answer %d has no example", method, path, status)
					continue
				}
				out[op.Route][status] = ex.Error
			}
		}
	}
	return out
}

// Every error example of the document carries a code the server answers
// with that status, fits the Error schema, and is the route's own: the
// 401, 403, 422 and 503 of one operation are four different answers.
func TestOpenAPIErrorExamplesFitTheirStatus(t *testing.T) {
	v, err := openAPIValidator()
	if err != nil {
		t.Fatal(err)
	}
	examples := docErrorExamples(t)
	n := 0
	for _, r := range (&Server{api: &handlers.API{}}).APIRoutes() {
		key := RouteKey(r.Method, r.Path)
		seen := map[string]int{}
		for st, e := range examples[key] {
			n++
			if e.Code.Status() != st {
				t.Errorf("%s: the %d example has code %s, which the server answers with %d", key, st, e.Code, e.Code.Status())
			}
			if e.Message == "" {
				t.Errorf("%s: the %d example has no message", key, st)
			}
			if prev, dup := seen[e.Message]; dup {
				t.Errorf("%s: the %d and %d examples are the same answer: %q", key, prev, st, e.Message)
			}
			seen[e.Message] = st
			body, _ := json.Marshal(map[string]any{"error": e})
			path := r.Path
			if d := apiDocs[key]; d.Path != "" {
				path = d.Path
			}
			req := httptest.NewRequest(r.Method, "/api/v1"+pathParamRE.ReplaceAllString(openAPIPath(path), "x"), nil)
			resp := &http.Response{StatusCode: st, Header: http.Header{"Content-Type": {"application/json"}}, Request: req,
				Body: io.NopCloser(strings.NewReader(string(body)))}
			pathItem, errs, found := paths.FindPath(req, openAPICheck.model, config.NewValidationOptions(config.DisablePathTree()))
			if len(errs) == 0 {
				_, errs = v.GetResponseBodyValidator().ValidateResponseBodyWithPathItem(req, resp, pathItem, found)
			}
			for _, e := range errs {
				t.Errorf("%s: the %d example does not fit: %s: %s", key, st, e.Message, e.Reason)
			}
		}
		for _, st := range []int{401, 403, 503} {
			if _, ok := examples[key][st]; !ok {
				t.Errorf("%s: no %d example", key, st)
			}
		}
	}
	if n < 100 {
		t.Fatalf("only %d error examples checked", n)
	}
}

// The examples are what the server answers: a request without a token
// gets the 401 example word for word, a token one role too low the 403
// one, a list with limit=0 the 422 one, an unknown object a 404 with the
// example's code, and a PostgreSQL failover (a server turned read-only
// or shut down) the 503 example word for word.
func TestOpenAPIErrorExamplesAreTheServers(t *testing.T) {
	t.Parallel()
	env := newSecEnv(t, dbtest.Open(t, models.SQLite))
	examples := docErrorExamples(t)
	below := map[auth.Role]string{auth.RoleOperator: env.tok.viewer, auth.RoleAdmin: env.tok.operator}
	params := map[string]string{"name": "no-such-pool", "id": "no-such-id", "value": "10.9.9.9", "owner_type": "endpoint", "owner_id": "nobody", "delivery": "1"}
	type check struct {
		req    secReq
		status int
		exact  bool // message too, not only the code
	}
	var checked []string
	var lists []string
	for _, r := range env.srv.APIRoutes() {
		key := RouteKey(r.Method, r.Path)
		p := concrete("/api/v1", r.Path, params)
		if d := apiDocs[key]; d.Path != "" {
			p = concrete("/api/v1", strings.ReplaceAll(strings.ReplaceAll(d.Path, "{", ":"), "}", ""), params)
		}
		checks := []check{{secReq{method: r.Method, path: p}, 401, true}}
		if tok, ok := below[r.Role]; ok {
			checks = append(checks, check{secReq{method: r.Method, path: p, token: tok}, 403, true})
		}
		if _, documented := examples[key][404]; documented && r.Method == http.MethodGet && strings.Contains(r.Path, "/:") {
			checks = append(checks, check{secReq{method: r.Method, path: p, token: env.tok.admin}, 404, false})
		}
		if d := apiDocs[key]; r.Method == http.MethodGet && len(d.Query) > 0 && strings.HasPrefix(d.Query[len(d.Query)-1], "cursor:") && !strings.Contains(r.Path, "/:") {
			checks = append(checks, check{secReq{method: r.Method, path: p + "?limit=0", token: env.tok.admin}, 422, true})
			lists = append(lists, key)
		}
		for _, c := range checks {
			want, ok := examples[key][c.status]
			if !ok {
				t.Errorf("%s: the server answers %d (%s), the document has no example for it", key, c.status, c.req.path)
				continue
			}
			got := answerError(t, env.do(c.req), c.status)
			if got == nil {
				t.Errorf("%s %s: want %d", key, c.req.path, c.status)
				continue
			}
			if got.Code != want.Code || (c.exact && (got.Message != want.Message || got.Field != want.Field)) {
				t.Errorf("%s: the server answers %d %+v, the document's example is %+v", key, c.status, *got, want)
			}
			checked = append(checked, fmt.Sprintf("%s %d", key, c.status))
		}
	}
	if len(lists) < 5 || len(checked) < 80 {
		t.Fatalf("checked only %d answers (%d lists)", len(checked), len(lists))
	}

	// A failover (the server turned read-only, or shut down under the
	// pool's connections) maps to the 503 example word for word.
	want := examples["GET /pools"][503]
	for _, pe := range []*pgconn.PgError{{Code: "25006", Message: "cannot execute INSERT in a read-only transaction"}, {Code: "57P01", Message: "terminating connection due to administrator command"}} {
		e, ok := fault.AsError(txn.MapDBError(pe))
		if !ok || e.Code != want.Code || e.Message != want.Message {
			t.Errorf("PostgreSQL %s maps to %+v, the 503 example is %+v", pe.Code, e, want)
		}
	}
}

// answerError decodes an error answer of the wanted status (nil if the
// status or the shape is another).
func answerError(t *testing.T, rec *httptest.ResponseRecorder, status int) *fault.Error {
	t.Helper()
	if rec.Code != status {
		t.Logf("status %d, want %d: %s", rec.Code, status, rec.Body)
		return nil
	}
	var body struct {
		Error *fault.Error `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error == nil {
		t.Logf("not an error body: %s", rec.Body)
		return nil
	}
	return body.Error
}
