package web

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/handlers"
)

// The OpenAPI 3.1 document of the REST API, served at
// GET /api/v1/openapi.json (public, like /healthz). It is built from the
// route table (APIRoutes: methods, paths, roles) and from apiDocs (one
// entry per route: summary, parameters, body and answer types, error
// codes, examples); the JSON schemas are derived from the Go types the
// handlers decode and encode, so a field added to a response is in the
// document without anyone writing it twice. The web tests fail when a
// route is in the table and not in apiDocs or the other way round, and
// they validate every API answer they receive against this document.
// docs/api-routes.md is generated from it (go run ./scripts/apiroutes).

// apiDoc documents one route of APIRoutes.
type apiDoc struct {
	// Path is the OpenAPI path under /api/v1 when it is not the route's
	// own (an action suffix the handler parses: {id}:decommission).
	Path    string
	Summary string
	// ID overrides the operationId (the handler's name) where that name
	// says less than the action (MachineAction is decommissionMachine).
	ID string
	// Query lists the query parameters: "name: description".
	Query []string
	// Body is a value of the request body's type (JSON); BodyType
	// overrides the media type; Example is a request body example.
	Body     any
	BodyType string
	Example  string
	// OK is the success status and a value of its body's type (nil: none).
	OK     int
	OKBody any
	// OKExample is an example of the success body (JSON).
	OKExample string
	// Also are other success statuses with the same body (201 vs 200).
	Also []int
	// Errors are the statuses the route answers besides 401, 403 and 503,
	// which every route can.
	Errors []int
	// ETag marks routes that return an ETag; IfMatch those that honour
	// If-Match.
	ETag, IfMatch bool
	// Location marks routes that answer with a Location header.
	Location bool
}

var errorText = map[int]string{
	400: "bad_request: the body is not parseable (not JSON, wrong media type)",
	401: "unauthorized: no token (the example), or an unknown or revoked one (message `unknown token`)",
	403: "forbidden: the token's role is below the route's",
	404: "not_found: no such object",
	409: "conflict, not_available, pool_exhausted or not_owner: the request collides with stored state",
	412: "stale_version: If-Match names a version that is no longer current",
	413: "the body is over the size limit",
	422: "invalid: a field or query parameter is malformed; `field` names it",
	503: "unavailable: the database cannot be reached (also while PostgreSQL fails over), cannot store the change (its storage is full) or the request's 30 s deadline passed; retry after the Retry-After header's seconds, with backoff",
}

var (
	routeParamRE = regexp.MustCompile(`/:([a-z_]+)`)
	pathParamRE  = regexp.MustCompile(`\{([a-z_]+)\}`)
)

// openAPIPath is a route's path in OpenAPI form: /pools/:name → /pools/{name}.
func openAPIPath(p string) string {
	return strings.ReplaceAll(routeParamRE.ReplaceAllString(p, "/{$1}"), `\:`, ":")
}

// RouteKey names a route of the table the way the document's
// x-ipledger-route does: "POST /machines/:id".
func RouteKey(method, path string) string { return method + " " + strings.ReplaceAll(path, `\:`, ":") }

var (
	openAPIOnce sync.Once
	openAPIDoc  []byte
	openAPIErr  error
)

// OpenAPI returns the document as JSON (built once).
func OpenAPI() ([]byte, error) {
	openAPIOnce.Do(func() {
		routes := (&Server{api: &handlers.API{}}).APIRoutes()
		var doc map[string]any
		if doc, openAPIErr = buildOpenAPI(routes); openAPIErr == nil {
			openAPIDoc, openAPIErr = json.MarshalIndent(doc, "", "  ")
		}
	})
	return openAPIDoc, openAPIErr
}

func (s *Server) serveOpenAPI(c echo.Context) error {
	b, err := OpenAPI()
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, "application/json", b)
}

// buildOpenAPI never fails on a route without an apiDocs entry (it is
// listed in x-ipledger-undocumented, and the coverage test fails on it).
func buildOpenAPI(routes []Route) (map[string]any, error) {
	g := &schemaGen{defs: map[string]any{}}
	paths := map[string]map[string]any{}
	seen := map[string]bool{}
	for _, r := range routes {
		key := RouteKey(r.Method, r.Path)
		d, ok := apiDocs[key]
		if !ok {
			// Served anyway, marked: the route-coverage test fails on it,
			// the document stays available.
			d = apiDoc{Summary: "(not yet documented)", OK: http.StatusOK, OKBody: nil}
		}
		seen[key] = true
		path := d.Path
		if path == "" {
			path = openAPIPath(r.Path)
		}
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(r.Method)] = g.operation(r, d, path)
	}
	g.defs["Error"] = errorSchema()
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "ipledger REST API",
			"version": "v1",
			"description": "The address authority of a bare-metal site: resource pools, allocations, " +
				"ExpectedMachines with DPU loopback reservations, ingestion and lifecycle. " +
				"Every route takes `Authorization: Bearer <token>`; roles nest admin ⊃ operator ⊃ viewer. " +
				"Errors are always `{\"error\": {\"code\", \"message\", \"field\"}}`.",
		},
		"servers":                 []any{map[string]any{"url": "/api/v1"}},
		"x-ipledger-undocumented": g.undocumented,
		"security":                []any{map[string]any{"bearer": []any{}}},
		"paths":                   paths,
		"components": map[string]any{
			"schemas": g.defs,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer",
					"description": "An API token, printed by `ipledger token create --name NAME --role viewer` " +
						"(operator or admin to write; the audit actor is token:NAME), or a JWT of the site's issuer. " +
						"On the console's API page, click Authorize and paste it: the page never fills in a token of its own, " +
						"and once authorized every curl it shows carries `Authorization: Bearer …`."},
			},
		},
	}, nil
}

func (g *schemaGen) operation(r Route, d apiDoc, path string) map[string]any {
	if _, ok := apiDocs[RouteKey(r.Method, r.Path)]; !ok {
		defer func() { g.undocumented = append(g.undocumented, RouteKey(r.Method, r.Path)) }()
	}
	op := map[string]any{
		"operationId":      cmp.Or(d.ID, operationID(r.Handler)),
		"summary":          d.Summary,
		"description":      fmt.Sprintf("%s\n\nRole: **%s**.", d.Summary, r.Role),
		"x-ipledger-role":  string(r.Role),
		"x-ipledger-route": RouteKey(r.Method, r.Path),
		"tags":             []any{tagOf(path)},
	}
	var params []any
	for _, m := range pathParamRE.FindAllStringSubmatch(path, -1) {
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
	}
	for _, q := range d.Query {
		name, desc, _ := strings.Cut(q, ": ")
		params = append(params, map[string]any{"name": name, "in": "query", "description": desc, "schema": map[string]any{"type": "string"}})
	}
	if d.IfMatch {
		params = append(params, map[string]any{"name": "If-Match", "in": "header",
			"description": "The record's version as an entity tag (\"3\"); a mismatch is 412 stale_version. `*` or absent: no precondition.",
			"schema":      map[string]any{"type": "string"}})
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if d.Body != nil || d.BodyType != "" {
		mt := d.BodyType
		var schema any = map[string]any{"type": "string"}
		if mt == "" {
			mt = "application/json"
			schema = g.in(reflect.TypeOf(d.Body))
		}
		content := map[string]any{"schema": schema}
		if d.Example != "" {
			var ex any = d.Example
			if mt == "application/json" {
				if err := json.Unmarshal([]byte(d.Example), &ex); err != nil {
					panic(fmt.Sprintf("example of %s: %v", RouteKey(r.Method, r.Path), err))
				}
			}
			content["example"] = ex
		}
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{mt: content}}
	}
	responses := map[string]any{}
	for _, st := range append([]int{d.OK}, d.Also...) {
		resp := map[string]any{"description": http.StatusText(st)}
		if d.OKBody != nil {
			media := map[string]any{"schema": g.of(reflect.TypeOf(d.OKBody))}
			if d.OKExample != "" {
				var ex any
				if err := json.Unmarshal([]byte(d.OKExample), &ex); err != nil {
					panic(fmt.Sprintf("answer example of %s: %v", RouteKey(r.Method, r.Path), err))
				}
				media["example"] = ex
			}
			resp["content"] = map[string]any{"application/json": media}
		}
		hdrs := map[string]any{}
		if d.ETag {
			hdrs["ETag"] = map[string]any{"description": "the record's version, quoted", "schema": map[string]any{"type": "string"}}
		}
		if d.Location && st == http.StatusCreated {
			hdrs["Location"] = map[string]any{"description": "where to read the created object", "schema": map[string]any{"type": "string"}}
		}
		if len(hdrs) > 0 {
			resp["headers"] = hdrs
		}
		responses[fmt.Sprint(st)] = resp
	}
	errRef := map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}
	codes := append([]int{401, 403, 503}, d.Errors...)
	sort.Ints(codes)
	for _, st := range codes {
		ex := errorExample(r, d, st)
		resp := map[string]any{"description": errorText[st], "content": map[string]any{"application/json": map[string]any{
			"schema":  map[string]any{"$ref": "#/components/schemas/Error"},
			"example": map[string]any{"error": errorExampleJSON(ex)},
		}}}
		if st == http.StatusServiceUnavailable {
			resp["headers"] = map[string]any{"Retry-After": map[string]any{"description": "seconds to wait before retrying",
				"schema": map[string]any{"type": "string", "example": RetryAfterSeconds}}}
		}
		responses[fmt.Sprint(st)] = resp
	}
	responses["default"] = map[string]any{"description": "any other error, in the same shape", "content": errRef}
	op["responses"] = responses
	return op
}

// operationID is the handler's method name (ListPools), which client
// generators turn into function names.
func operationID(h echo.HandlerFunc) string {
	name := runtime.FuncForPC(reflect.ValueOf(h).Pointer()).Name()
	name = strings.TrimSuffix(name[strings.LastIndex(name, ".")+1:], "-fm")
	return strings.ToLower(name[:1]) + name[1:]
}

func tagOf(path string) string {
	seg := strings.Split(strings.TrimPrefix(path, "/"), "/")[0]
	seg, _, _ = strings.Cut(seg, ":")
	return seg
}

// errorSchema is the one error shape of every route.
func errorSchema() map[string]any {
	codes := []any{}
	for _, c := range []fault.Code{fault.CodeBadRequest, fault.CodeUnauthorized, fault.CodeForbidden,
		fault.CodeNotFound, fault.CodeConflict, fault.CodeNotAvailable, fault.CodePoolExhausted,
		fault.CodeNotOwner, fault.CodeStaleVersion, fault.CodeInvalid, fault.CodeUnavailable, fault.CodeInternal} {
		codes = append(codes, string(c))
	}
	return map[string]any{
		"type":     "object",
		"required": []any{"error"},
		"properties": map[string]any{"error": map[string]any{
			"type":     "object",
			"required": []any{"code", "message"},
			"properties": map[string]any{
				"code":    map[string]any{"type": "string", "examples": codes},
				"message": map[string]any{"type": "string", "description": "for people: what is wrong and what to do"},
				"field":   map[string]any{"type": "string", "description": "JSON path of the offending field, e.g. expected_dpus[1].loopback_ip"},
			},
		}},
	}
}

// errorExampleJSON is an error example as the document holds it.
func errorExampleJSON(e fault.Error) map[string]any {
	m := map[string]any{"code": string(e.Code), "message": e.Message}
	if e.Field != "" {
		m["field"] = e.Field
	}
	return m
}

// componentNames keeps the component names clients generate code from
// when a Go type's name differs from the contract's: the Go code spells
// DPU in capitals, the contract's object is ExpectedDpu
// (docs/decisions.md "Go names spell DPU; the contract keeps ExpectedDpu").
var componentNames = map[reflect.Type]string{
	reflect.TypeFor[allocator.ExpectedDPU](): "ExpectedDpu",
}

// schemaGen derives JSON Schemas (2020-12, as OpenAPI 3.1 uses) from Go
// types the way encoding/json renders them: named structs become
// components, pointers may be null, omitempty fields are optional.
type schemaGen struct {
	defs map[string]any
	// input marks a request body: no member is required (the allocator
	// names what is missing), and a struct shared with answers gets its
	// own component (ExpectedDpuInput).
	input bool
	// undocumented lists routes without an apiDocs entry.
	undocumented []string
}

// in is the schema of a request body type.
func (g *schemaGen) in(t reflect.Type) any {
	g.input = true
	defer func() { g.input = false }()
	return g.of(t)
}

var (
	timeType      = reflect.TypeOf(time.Time{})
	rawType       = reflect.TypeOf(json.RawMessage(nil))
	marshalerType = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
)

func (g *schemaGen) of(t reflect.Type) any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawType:
		return map[string]any{"description": "any JSON value"}
	}
	if s, ok := schemaOverrides[t]; ok {
		name := t.Name()
		if _, done := g.defs[name]; !done {
			g.defs[name] = s(g)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	switch t.Kind() {
	case reflect.Pointer:
		inner := g.of(t.Elem())
		if m, ok := inner.(map[string]any); ok {
			if typ, ok := m["type"].(string); ok {
				out := map[string]any{}
				for k, v := range m {
					out[k] = v
				}
				out["type"] = []any{typ, "null"}
				return out
			}
		}
		return map[string]any{"anyOf": []any{inner, map[string]any{"type": "null"}}}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.of(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.of(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
			panic(fmt.Sprintf("type %s has its own MarshalJSON: give it a schemaOverrides entry", t))
		}
		if t.Name() == "" {
			return g.object(t)
		}
		name := strings.ToUpper(t.Name()[:1]) + t.Name()[1:]
		if n, ok := componentNames[t]; ok {
			name = n
		}
		if g.input && !strings.HasSuffix(name, "Spec") && !strings.HasSuffix(name, "Update") &&
			!strings.HasSuffix(name, "Request") && !strings.HasSuffix(name, "File") {
			name += "Input"
		}
		if _, done := g.defs[name]; !done {
			g.defs[name] = map[string]any{} // recursion guard
			g.defs[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	panic(fmt.Sprintf("no schema for Go type %s", t))
}

func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	required := []any{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if name == "" {
				name = f.Name
			}
			props[name] = g.of(f.Type)
			if fs, ok := fieldSchemas[t][name]; ok {
				props[name] = fs
			}
			if !g.input && !strings.Contains(opts, "omitempty") {
				required = append(required, name)
			}
		}
	}
	walk(t)
	return map[string]any{"type": "object", "properties": props, "required": required}
}
