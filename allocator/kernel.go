package allocator

import (
	"context"
	"time"

	"github.com/ipledger/ipledger/kernel"
	"github.com/ipledger/ipledger/models"
)

// The allocator's names for the kernel's error type, codes and actor,
// kept while the packages that use them move to the kernel's names.
type (
	Code  = kernel.Code
	Error = kernel.Error
	Actor = kernel.Actor
	// IfMatch is kernel.IfMatch.
	IfMatch = kernel.IfMatch
	// Event is kernel.Event.
	Event = kernel.Event
)

const (
	CodeBadRequest    = kernel.CodeBadRequest
	CodeUnauthorized  = kernel.CodeUnauthorized
	CodeForbidden     = kernel.CodeForbidden
	CodeNotFound      = kernel.CodeNotFound
	CodeConflict      = kernel.CodeConflict
	CodeNotAvailable  = kernel.CodeNotAvailable
	CodePoolExhausted = kernel.CodePoolExhausted
	CodeNotOwner      = kernel.CodeNotOwner
	CodeStaleVersion  = kernel.CodeStaleVersion
	CodeTooLarge      = kernel.CodeTooLarge
	CodeInvalid       = kernel.CodeInvalid
	CodeUnavailable   = kernel.CodeUnavailable
	CodeInternal      = kernel.CodeInternal
)

// Errf is kernel.Errf.
func Errf(code Code, field, format string, args ...any) *Error {
	return kernel.Errf(code, field, format, args...)
}

// AsError is kernel.AsError.
func AsError(err error) (*Error, bool) { return kernel.AsError(err) }

// WithFieldPrefix is kernel.WithFieldPrefix.
func WithFieldPrefix(err error, prefix string) error { return kernel.WithFieldPrefix(err, prefix) }

// WithActor is kernel.WithActor.
func WithActor(ctx context.Context, name, requestID string) context.Context {
	return kernel.WithActor(ctx, name, requestID)
}

// WithActorRole is kernel.WithActorRole.
func WithActorRole(ctx context.Context, name, role, requestID string) context.Context {
	return kernel.WithActorRole(ctx, name, role, requestID)
}

// ActorFrom is kernel.ActorFrom.
func ActorFrom(ctx context.Context) Actor { return kernel.ActorFrom(ctx) }

func mapCtxError(ctx context.Context, err error) error { return kernel.MapCtxError(ctx, err) }

func mapDBError(err error) error { return kernel.MapDBError(err) }

func auditEvent(ctx context.Context, at time.Time, action, objectType, objectID string, before, after any) (models.AuditEvent, error) {
	return kernel.AuditEvent(ctx, at, action, objectType, objectID, before, after)
}
