// Package handlers holds ipledger's echo handlers: the JSON API and the
// console's pages and fragments. Handlers are thin: they parse the request,
// call one allocator operation and render; every rule lives in allocator.
package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/apijson"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/strictjson"
	"github.com/ipledger/ipledger/webhook"
)

// API serves /api/v1.
type API struct {
	A *allocator.Allocator
	// Feed is the change feed; Hooks the webhooks and their deliveries.
	Feed  *feed.Feed
	Hooks *webhook.Service
	// AuditLog is the audit log.
	AuditLog *audit.Log
	// StreamKeepAlive is the idle interval of the event stream's comment
	// lines (DefaultStreamKeepAlive when 0).
	StreamKeepAlive time.Duration
}

// Caller is who a request acts as: an API token, a console session, or an
// identity a sign-in way (web.Identity) vouched for.
type Caller struct {
	Name    string
	Role    auth.Role
	Session bool
	// Ambient marks a caller the browser authenticates on its own — a
	// trusted proxy's user header, a client certificate — whose
	// state-changing requests must not come from another site.
	Ambient bool
	// LogoutURL is where Sign out sends an ambient caller the trusted
	// proxy signed in (the proxy's sign-out); SignOutNote, when set, says
	// why the console offers no Sign out (the proxy has no sign-out URL
	// configured, or a client certificate signs the caller in).
	LogoutURL   string
	SignOutNote string
}

const sessionRefKey = "ipledger.session_ref"

// SetSessionRef records the sessions-page reference of the request's own
// console session.
func SetSessionRef(c echo.Context, ref string) { c.Set(sessionRefKey, ref) }

// SessionRefOf returns it ("" without a session).
func SessionRefOf(c echo.Context) string {
	s, _ := c.Get(sessionRefKey).(string)
	return s
}

const callerKey = "ipledger.caller"

// SetCaller stores the authenticated caller on the request context.
func SetCaller(c echo.Context, id *Caller) { c.Set(callerKey, id) }

// CallerOf returns the request's caller, or nil when anonymous.
func CallerOf(c echo.Context) *Caller {
	id, _ := c.Get(callerKey).(*Caller)
	return id
}

// MaxBodyBytes bounds every request body the API reads (10 MiB: a NICo
// expected-machines file of several thousand records fits).
const MaxBodyBytes = 10 << 20

// ReadBody reads the request body up to MaxBodyBytes; a larger body is
// 413 too_large with the API's error shape (a declared Content-Length over
// the limit is refused before anything is read).
func ReadBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > MaxBodyBytes {
		return nil, TooLarge(MaxBodyBytes)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, TooLarge(mbe.Limit)
		}
		return nil, fault.Errf(fault.CodeBadRequest, "", "cannot read request body: %v", err)
	}
	if len(b) > MaxBodyBytes {
		return nil, TooLarge(MaxBodyBytes)
	}
	return b, nil
}

// TooLarge is the 413 too_large error of a body over limit bytes.
func TooLarge(limit int64) error {
	return fault.Errf(fault.CodeTooLarge, "", "the request body is larger than %d bytes; nothing was changed", limit)
}

// DecodeJSON reads a JSON body into v with the strict rules every door
// shares (apijson.Decode: no repeated or case-variant member names,
// exact-case matching, a leading BOM ignored): unparseable JSON is 400
// bad_request, a member of the wrong JSON type is 422 invalid naming it.
// Members the body type does not have are ignored (reports and discovery
// carry what a site explorer sends).
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
// becomes auto_assign — so a member the body type does not have is 422
// invalid naming its path, and nothing is changed.
func DecodeJSONStrict(c echo.Context, v any) error {
	b, err := ReadBody(c)
	if err != nil {
		return err
	}
	return decode(b, v, true)
}

// UnmarshalJSON decodes a JSON body like DecodeJSON.
func UnmarshalJSON(b []byte, v any) error { return decode(b, v, false) }

func decode(b []byte, v any, rejectUnknown bool) error {
	if strings.TrimSpace(string(strictjson.TrimBOM(b))) == "null" {
		return fault.Errf(fault.CodeBadRequest, "", "request body must be a JSON object or array, not null")
	}
	return apijson.Decode(b, v, apijson.Options{RejectUnknown: rejectUnknown})
}

// ErrorBody is the error shape of docs/api.md.
type ErrorBody struct {
	Error *fault.Error `json:"error"`
}

// ToAPIError turns any error into the contract's error and status: a
// *fault.Error keeps its code; echo's routing errors map to not_found /
// bad_request; anything else is a 500 whose details stay in the log.
func ToAPIError(err error) (*fault.Error, int) {
	if e, ok := fault.AsError(err); ok {
		return e, e.Code.Status()
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := fmt.Sprint(he.Message)
		switch he.Code {
		case http.StatusNotFound:
			return &fault.Error{Code: fault.CodeNotFound, Message: "no such resource"}, http.StatusNotFound
		case http.StatusMethodNotAllowed:
			return &fault.Error{Code: fault.CodeNotFound, Message: "method not allowed on this resource"}, http.StatusMethodNotAllowed
		case http.StatusUnauthorized:
			return &fault.Error{Code: fault.CodeUnauthorized, Message: msg}, he.Code
		case http.StatusForbidden:
			return &fault.Error{Code: fault.CodeForbidden, Message: msg}, he.Code
		case http.StatusRequestEntityTooLarge:
			return &fault.Error{Code: fault.CodeTooLarge, Message: msg}, he.Code
		case http.StatusServiceUnavailable:
			return &fault.Error{Code: fault.CodeUnavailable, Message: msg}, he.Code
		}
		if he.Code >= 400 && he.Code < 500 {
			return &fault.Error{Code: fault.CodeBadRequest, Message: msg}, he.Code
		}
	}
	return &fault.Error{Code: fault.CodeInternal, Message: "internal error; see the server log for the request id"}, http.StatusInternalServerError
}

// WriteError renders err as the JSON error shape.
func WriteError(c echo.Context, err error) error {
	e, status := ToAPIError(err)
	if status >= 500 && e.Code == fault.CodeInternal {
		slog.Error("internal error", "request_id", c.Response().Header().Get(echo.HeaderXRequestID),
			"method", c.Request().Method, "path", c.Request().URL.Path, "error", err)
	}
	return c.JSON(status, ErrorBody{Error: e})
}

// Param returns a path parameter, percent-decoded exactly once. echo
// routes on the request's RawPath when it has one (the path held an
// escape such as %2F that its default encoding would not produce), and
// then the parameters are still escaped; otherwise it routes on the
// decoded Path and they are decoded already, so decoding them again
// turned the owner "a%41" (sent as a%2541) into the owner "aA".
func Param(c echo.Context, name string) string {
	v := c.Param(name)
	if c.Request().URL.RawPath == "" || !strings.Contains(v, "%") {
		return v
	}
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// Limit reads ?limit= (default 100, above 1000 treated as 1000, however
// many digits it has); a non-number is 422 invalid.
func Limit(c echo.Context) (int, error) {
	if _, given := c.QueryParams()["limit"]; !given {
		return 100, nil
	}
	// Digits only: strconv.Atoi alone would take "+5"; an empty ?limit=
	// is a mistake of the caller's, not the default.
	s := c.QueryParam("limit")
	n, err := strconv.Atoi(s)
	if errors.Is(err, strconv.ErrRange) && s != "" && strings.Trim(s, "0123456789") == "" {
		n, err = 1000, nil // too many digits for an int: above 1000 all the same
	}
	if err != nil || n < 1 || strings.Trim(s, "0123456789") != "" {
		return 0, fault.Errf(fault.CodeInvalid, "limit", "limit %q must be a positive integer", s)
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
			if len(allowed) == 0 {
				return fault.Errf(fault.CodeInvalid, k, "unknown query parameter %q; this route takes none", k)
			}
			return fault.Errf(fault.CodeInvalid, k, "unknown query parameter %q; this route takes %s", k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// Ctx is the request's context carrying the actor for audit events.
func Ctx(c echo.Context) context.Context { return c.Request().Context() }
