package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/paths"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// Every API answer any test of this package receives through
// Server.Handler (httptest recorders and real listeners alike) is checked
// against the OpenAPI document; a mismatch fails the package run, naming
// the request, the status and what did not fit.
func init() { handlerWrap = validateAgainstOpenAPI }

var openAPICheck struct {
	once  sync.Once
	mu    sync.Mutex
	v     validator.Validator
	model *v3.Document
	err   error
	seen  int
	bad   []string
}

func openAPIValidator() (validator.Validator, error) {
	openAPICheck.once.Do(func() {
		b, err := OpenAPI()
		if err != nil {
			openAPICheck.err = err
			return
		}
		doc, err := libopenapi.NewDocument(b)
		if err != nil {
			openAPICheck.err = err
			return
		}
		v, errs := validator.NewValidator(doc)
		if len(errs) > 0 {
			openAPICheck.err = fmt.Errorf("%v", errs)
			return
		}
		m, err := doc.BuildV3Model()
		if err != nil {
			openAPICheck.err = err
			return
		}
		openAPICheck.v, openAPICheck.model = v, &m.Model
	})
	return openAPICheck.v, openAPICheck.err
}

// teeWriter passes the answer through and keeps a copy of it.
type teeWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (w *teeWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *teeWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.buf.Write(p)
	return w.ResponseWriter.Write(p)
}

func (w *teeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func validateAgainstOpenAPI(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/v1/") || r.URL.Path == "/api/v1/openapi.json" {
			next.ServeHTTP(w, r)
			return
		}
		tw := &teeWriter{ResponseWriter: w}
		next.ServeHTTP(tw, r)
		if strings.HasPrefix(tw.Header().Get("Content-Type"), "text/event-stream") {
			return
		}
		v, err := openAPIValidator()
		openAPICheck.mu.Lock()
		defer openAPICheck.mu.Unlock()
		openAPICheck.seen++
		name := fmt.Sprintf("%s %s → %d", r.Method, r.URL.RequestURI(), tw.status)
		if err != nil {
			openAPICheck.bad = append(openAPICheck.bad, name+": the document does not load: "+err.Error())
			return
		}
		resp := &http.Response{StatusCode: tw.status, Header: tw.Header().Clone(), Request: r,
			Body: io.NopCloser(bytes.NewReader(tw.buf.Bytes()))}
		// The validator's own router (a radix tree) matches
		// /machines/abc:decommission to /machines/{id}, which has no POST,
		// and never tries /machines/{id}:decommission; its regex matcher
		// (no path tree) finds the right operation.
		pathItem, errs, found := paths.FindPath(r, openAPICheck.model, config.NewValidationOptions(config.DisablePathTree()))
		ok := len(errs) == 0
		if ok {
			ok, errs = v.GetResponseBodyValidator().ValidateResponseBodyWithPathItem(r, resp, pathItem, found)
		}
		if !ok {
			var msgs []string
			for _, e := range errs {
				// An unknown path or method has no operation to check
				// against; its error body is checked by the tests of
				// unknown paths themselves.
				if tw.status >= 400 && (e.IsPathMissingError() || e.IsOperationMissingError()) {
					continue
				}
				m := e.Message + ": " + e.Reason
				for _, se := range e.SchemaValidationErrors {
					m += fmt.Sprintf(" [%s: %s]", se.FieldPath, se.Reason)
				}
				msgs = append(msgs, m)
			}
			if len(msgs) > 0 {
				body := tw.buf.String()
				if len(body) > 300 {
					body = body[:300] + "…"
				}
				openAPICheck.bad = append(openAPICheck.bad, fmt.Sprintf("%s: %s\n    body: %s", name, strings.Join(msgs, "; "), body))
			}
		}
	})
}

func TestMain(m *testing.M) {
	code := m.Run()
	openAPICheck.mu.Lock()
	defer openAPICheck.mu.Unlock()
	if len(openAPICheck.bad) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d of %d API answers do not match the OpenAPI document (web/openapi_routes.go):\n", len(openAPICheck.bad), openAPICheck.seen)
		for i, b := range openAPICheck.bad {
			if i == 30 {
				fmt.Fprintf(os.Stderr, "  … and %d more\n", len(openAPICheck.bad)-30)
				break
			}
			fmt.Fprintln(os.Stderr, "  "+b)
		}
		code = 1
	}
	os.Exit(code)
}

// The document is public, valid OpenAPI 3.1, and covers the route table
// exactly: every route is an operation carrying its route and role, and
// every operation is a route.
func TestOpenAPICoversTheRouteTable(t *testing.T) {
	t.Parallel()
	env := newSecEnv(t, dbtest.Open(t, models.SQLite))
	rec := httptest.NewRecorder()
	env.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/openapi.json", nil))
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/v1/openapi.json without a token: %d %s", rec.Code, rec.Header())
	}
	var doc struct {
		OpenAPI      string                                `json:"openapi"`
		Undocumented []string                              `json:"x-ipledger-undocumented"`
		Paths        map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("document: %v, openapi %q", err, doc.OpenAPI)
	}
	stale := map[string]bool{}
	for k := range apiDocs {
		stale[k] = true
	}
	documented := map[string]string{}
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			var op struct {
				Route     string                     `json:"x-ipledger-route"`
				Role      string                     `json:"x-ipledger-role"`
				Responses map[string]json.RawMessage `json:"responses"`
				ID        string                     `json:"operationId"`
			}
			if err := json.Unmarshal(raw, &op); err != nil || op.Route == "" || op.ID == "" {
				t.Errorf("%s %s: no x-ipledger-route or operationId (%v)", method, path, err)
				continue
			}
			if !strings.HasPrefix(op.Route, strings.ToUpper(method)+" ") {
				t.Errorf("%s %s documents route %s", method, path, op.Route)
			}
			for _, st := range []string{"401", "403", "default"} {
				if op.Responses[st] == nil {
					t.Errorf("%s %s does not document %s", method, path, st)
				}
			}
			documented[op.Route] = op.Role
		}
	}
	for _, r := range env.srv.APIRoutes() {
		key := RouteKey(r.Method, r.Path)
		role, ok := documented[key]
		switch {
		case !ok:
			t.Errorf("route %s is in the route table but not in the OpenAPI document", key)
		case role != string(r.Role):
			t.Errorf("route %s needs %s; the document says %s", key, r.Role, role)
		}
		delete(documented, key)
	}
	for k := range documented {
		t.Errorf("the OpenAPI document has %s, which is not in the route table", k)
	}
	for _, r := range env.srv.APIRoutes() {
		delete(stale, RouteKey(r.Method, r.Path))
	}
	for k := range stale {
		t.Errorf("apiDocs (web/openapi_routes.go) documents %s, which is not in the route table", k)
	}
	for _, k := range doc.Undocumented {
		t.Errorf("route %s has no entry in apiDocs (web/openapi_routes.go)", k)
	}
	v, err := openAPIValidator()
	if err != nil {
		t.Fatal(err)
	}
	if ok, errs := v.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("document: %s: %s", e.Message, e.Reason)
		}
	}
}

// The check itself catches an answer that does not fit: a pool whose
// stats are missing.
func TestOpenAPICheckCatchesAMismatch(t *testing.T) {
	h := validateAgainstOpenAPI(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"name": "lo-ip", "type": "ipv4", "version": 1, "ranges": []}`))
	}))
	openAPICheck.mu.Lock()
	before := len(openAPICheck.bad)
	openAPICheck.mu.Unlock()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/pools/lo-ip", nil))
	openAPICheck.mu.Lock()
	defer openAPICheck.mu.Unlock()
	if len(openAPICheck.bad) != before+1 || !strings.Contains(openAPICheck.bad[before], "stats") {
		t.Fatalf("a pool without stats passed the check: %v", openAPICheck.bad[before:])
	}
	openAPICheck.bad = openAPICheck.bad[:before] // this one was made on purpose
}

// Every array schema says what its items are, and every object schema
// lists its properties, so client generators produce typed code (an
// untyped list becomes []interface{} / unknown[]).
func TestOpenAPISchemasAreTyped(t *testing.T) {
	b, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			types := fmt.Sprint(x["type"])
			if strings.Contains(types, "array") && x["items"] == nil {
				t.Errorf("%s: an array schema without items", path)
			}
			if strings.Contains(types, "object") && x["properties"] == nil && x["additionalProperties"] == nil {
				t.Errorf("%s: an object schema without properties", path)
			}
			for k, c := range x {
				walk(path+"/"+k, c)
			}
		case []any:
			for i, c := range x {
				walk(fmt.Sprintf("%s/%d", path, i), c)
			}
		}
	}
	walk("#", doc)
}

// The answer examples of the document fit their own schemas.
func TestOpenAPIExamplesFitTheirSchemas(t *testing.T) {
	v, err := openAPIValidator()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for key, d := range apiDocs {
		if d.OKExample == "" {
			continue
		}
		method, path, _ := strings.Cut(key, " ")
		if d.Path != "" {
			path = d.Path
		}
		path = pathParamRE.ReplaceAllString(openAPIPath(path), "x")
		r := httptest.NewRequest(method, "/api/v1"+path, nil)
		resp := &http.Response{StatusCode: d.OK, Header: http.Header{"Content-Type": {"application/json"}}, Request: r,
			Body: io.NopCloser(strings.NewReader(d.OKExample))}
		pathItem, errs, found := paths.FindPath(r, openAPICheck.model, config.NewValidationOptions(config.DisablePathTree()))
		if len(errs) == 0 {
			_, errs = v.GetResponseBodyValidator().ValidateResponseBodyWithPathItem(r, resp, pathItem, found)
		}
		for _, e := range errs {
			t.Errorf("%s: the answer example does not fit: %s: %s", key, e.Message, e.Reason)
		}
		n++
	}
	if n < 3 {
		t.Fatalf("only %d answer examples checked", n)
	}
}

// The document's component names are what clients generate code from:
// the contract's object ExpectedDpu keeps its name whatever the Go type
// is called (docs/decisions.md "Go names spell DPU; the contract keeps
// ExpectedDpu").
func TestOpenAPIComponentsKeepTheContractsNames(t *testing.T) {
	t.Parallel()
	b, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ExpectedDpu", "ExpectedDpuInput", "ExpectedMachine", "ReportDPUInput"} {
		if _, ok := doc.Components.Schemas[name]; !ok {
			t.Errorf("component %s is missing", name)
		}
	}
	for name := range doc.Components.Schemas {
		if strings.HasPrefix(name, "ExpectedDPU") {
			t.Errorf("component %s: the contract spells it ExpectedDpu", name)
		}
	}
}
