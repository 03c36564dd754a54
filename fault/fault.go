// Package fault is ipledger's one error type: a code of the REST contract
// (docs/api.md) with its HTTP status, a message for people and the JSON
// path of the offending field. Every rule returns it; the REST API, the
// gRPC service, the CLI and the console's 422 fragments render it. It
// imports nothing of ipledger.
package fault

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is an error code of the REST contract (docs/api.md).
type Code string

// The error codes of docs/api.md, each with one HTTP status.
const (
	CodeBadRequest    Code = "bad_request"
	CodeUnauthorized  Code = "unauthorized"
	CodeForbidden     Code = "forbidden"
	CodeNotFound      Code = "not_found"
	CodeConflict      Code = "conflict"
	CodeNotAvailable  Code = "not_available"
	CodePoolExhausted Code = "pool_exhausted"
	CodeNotOwner      Code = "not_owner"
	CodeStaleVersion  Code = "stale_version"
	CodeTooLarge      Code = "too_large"
	CodeInvalid       Code = "invalid"
	CodeUnavailable   Code = "unavailable"
	CodeInternal      Code = "internal"
)

// Status is the HTTP status of a code.
func (c Code) Status() int {
	switch c {
	case CodeBadRequest:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict, CodeNotAvailable, CodePoolExhausted, CodeNotOwner:
		return http.StatusConflict
	case CodeStaleVersion:
		return http.StatusPreconditionFailed
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeInvalid:
		return http.StatusUnprocessableEntity
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// Error is the one error type of every rule: a code, a message for people,
// and the JSON path of the offending field when there is one. REST answers
// and console 422 fragments both render it.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Errf builds an *Error.
func Errf(code Code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// AsError extracts an *Error from err's chain.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// WithFieldPrefix returns a copy of err (if it is an *Error) whose field is
// prefixed, e.g. "expected_machines[3]." + "expected_dpus[0].loopback_ip".
func WithFieldPrefix(err error, prefix string) error {
	e, ok := AsError(err)
	if !ok {
		return err
	}
	c := *e
	if c.Field != "" {
		c.Field = prefix + "." + c.Field
	} else {
		c.Field = prefix
	}
	return &c
}
