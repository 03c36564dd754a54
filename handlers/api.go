// Package handlers holds ipledger's echo handlers: the JSON API and the
// console's pages and fragments. Handlers are thin: they parse the request,
// call one allocator operation and render; every rule lives in allocator.
package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
)

// API serves /api/v1.
type API struct {
	A *allocator.Allocator
}

// Identity is who a request acts as: an API token or a console session.
type Identity struct {
	Name    string
	Role    allocator.Role
	Session bool
}

const identityKey = "ipledger.identity"

// SetIdentity stores the authenticated identity on the request context.
func SetIdentity(c echo.Context, id *Identity) { c.Set(identityKey, id) }

// IdentityOf returns the request's identity, or nil when anonymous.
func IdentityOf(c echo.Context) *Identity {
	id, _ := c.Get(identityKey).(*Identity)
	return id
}

// MaxBodyBytes bounds every request body the API reads (10 MiB: a NICo
// expected-machines file of several thousand records fits).
const MaxBodyBytes = 10 << 20

// ReadBody reads the request body up to MaxBodyBytes.
func ReadBody(c echo.Context) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(c.Request().Body, MaxBodyBytes+1))
	if err != nil {
		return nil, allocator.Errf(allocator.CodeBadRequest, "", "cannot read request body: %v", err)
	}
	if len(b) > MaxBodyBytes {
		return nil, allocator.Errf(allocator.CodeBadRequest, "", "request body larger than %d bytes", MaxBodyBytes)
	}
	return b, nil
}

// DecodeJSON reads a JSON body into v: unparseable JSON is 400
// bad_request, a field of the wrong JSON type is 422 invalid naming it.
func DecodeJSON(c echo.Context, v any) error {
	b, err := ReadBody(c)
	if err != nil {
		return err
	}
	return UnmarshalJSON(b, v)
}

// DecodeJSONStrict is DecodeJSON for bodies where a misspelt field would
// silently change what is done — an allocation whose "vaule" is ignored
// becomes an automatic one, a range whose "auto_asign": false is ignored
// becomes auto_assign — so a field the body type does not have is 422
// invalid naming it, and nothing is changed.
func DecodeJSONStrict(c echo.Context, v any) error {
	b, err := ReadBody(c)
	if err != nil {
		return err
	}
	if err := UnmarshalJSON(b, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if m := unknownFieldRE.FindStringSubmatch(err.Error()); m != nil {
			return allocator.Errf(allocator.CodeInvalid, m[1], "unknown field %q (misspelt?); nothing was changed", m[1])
		}
		return allocator.Errf(allocator.CodeBadRequest, "", "request body is not valid JSON: %v", err)
	}
	return nil
}

var unknownFieldRE = regexp.MustCompile(`unknown field "([^"]*)"`)

// UnmarshalJSON maps json errors to the API's error codes.
func UnmarshalJSON(b []byte, v any) error {
	trimmed := strings.TrimSpace(string(b))
	if len(trimmed) == 0 {
		return allocator.Errf(allocator.CodeBadRequest, "", "request body is empty; a JSON object is expected")
	}
	if trimmed == "null" {
		return allocator.Errf(allocator.CodeBadRequest, "", "request body must be a JSON object or array, not null")
	}
	// JSON text is UTF-8 (RFC 8259 §8.1). The decoder would turn invalid
	// bytes into U+FFFD silently, so two different raw owner ids could
	// become one owner.
	if !utf8.Valid(b) {
		return allocator.Errf(allocator.CodeBadRequest, "", "request body is not valid UTF-8")
	}
	err := json.Unmarshal(b, v)
	if err == nil {
		if hasNULEscape(b) {
			if p, ok := findNUL(b); ok {
				return allocator.Errf(allocator.CodeInvalid, p, "%s contains a NUL character", p)
			}
		}
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return allocator.Errf(allocator.CodeBadRequest, "", "request body must be a JSON %s, not %s", jsonKind(te.Type), te.Value)
		}
		field := locateField(b, te.Field, strings.Fields(te.Value + " ")[0])
		return allocator.Errf(allocator.CodeInvalid, field, "%s must be a JSON %s, not %s", field, jsonKind(te.Type), te.Value)
	}
	return allocator.Errf(allocator.CodeBadRequest, "", "request body is not valid JSON: %v", err)
}

// ErrorBody is the error shape of docs/api.md.
type ErrorBody struct {
	Error *allocator.Error `json:"error"`
}

// ToAPIError turns any error into the contract's error and status: an
// *allocator.Error keeps its code; echo's routing errors map to not_found /
// bad_request; anything else is a 500 whose details stay in the log.
func ToAPIError(err error) (*allocator.Error, int) {
	if e, ok := allocator.AsError(err); ok {
		return e, e.Code.Status()
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := fmt.Sprint(he.Message)
		switch he.Code {
		case http.StatusNotFound:
			return &allocator.Error{Code: allocator.CodeNotFound, Message: "no such resource"}, http.StatusNotFound
		case http.StatusMethodNotAllowed:
			return &allocator.Error{Code: allocator.CodeNotFound, Message: "method not allowed on this resource"}, http.StatusMethodNotAllowed
		case http.StatusUnauthorized:
			return &allocator.Error{Code: allocator.CodeUnauthorized, Message: msg}, he.Code
		case http.StatusForbidden:
			return &allocator.Error{Code: allocator.CodeForbidden, Message: msg}, he.Code
		case http.StatusRequestEntityTooLarge:
			return &allocator.Error{Code: allocator.CodeBadRequest, Message: msg}, he.Code
		case http.StatusServiceUnavailable:
			return &allocator.Error{Code: allocator.CodeUnavailable, Message: msg}, he.Code
		}
		if he.Code >= 400 && he.Code < 500 {
			return &allocator.Error{Code: allocator.CodeBadRequest, Message: msg}, he.Code
		}
	}
	return &allocator.Error{Code: allocator.CodeInternal, Message: "internal error; see the server log for the request id"}, http.StatusInternalServerError
}

// WriteError renders err as the JSON error shape.
func WriteError(c echo.Context, err error) error {
	e, status := ToAPIError(err)
	if status >= 500 && e.Code == allocator.CodeInternal {
		slog.Error("internal error", "request_id", c.Response().Header().Get(echo.HeaderXRequestID),
			"method", c.Request().Method, "path", c.Request().URL.Path, "error", err)
	}
	return c.JSON(status, ErrorBody{Error: e})
}

// Param returns a path parameter, percent-decoded.
func Param(c echo.Context, name string) string {
	v := c.Param(name)
	if strings.Contains(v, "%") {
		if u, err := url.PathUnescape(v); err == nil {
			return u
		}
	}
	return v
}

// Limit reads ?limit= (default 100, above 1000 treated as 1000); a
// non-number is 422 invalid.
func Limit(c echo.Context) (int, error) {
	s := c.QueryParam("limit")
	if s == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, allocator.Errf(allocator.CodeInvalid, "limit", "limit %q must be a positive integer", s)
	}
	if n > 1000 {
		n = 1000
	}
	return n, nil
}

// OnlyQuery refuses query parameters other than allowed with 422 invalid
// naming the first unknown one (docs/api.md: an unknown filter is 422):
// a misspelt filter must not silently list everything.
func OnlyQuery(c echo.Context, allowed ...string) error {
	q := c.QueryParams()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return allocator.Errf(allocator.CodeInvalid, k, "unknown query parameter %q; this list takes %s", k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// Ctx is the request's context carrying the actor for audit events.
func Ctx(c echo.Context) context.Context { return c.Request().Context() }
