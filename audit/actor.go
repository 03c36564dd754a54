package audit

import "context"

// Actor identifies who makes a change, for audit events.
type Actor struct {
	Name string
	// Role is the role the actor acted with (viewer, operator, admin):
	// the token's, the session's or the one single sign-on gave. Empty for
	// system actors, whose events store no role.
	Role      string
	RequestID string
}

type actorKey struct{}

// WithActor attaches an acting identity without a role (a system actor:
// startup, reconcile, the CLI) and request id to ctx.
func WithActor(ctx context.Context, name, requestID string) context.Context {
	return WithActorRole(ctx, name, "", requestID)
}

// WithActorRole attaches the acting identity, the role it acts with and
// the request id to ctx.
func WithActorRole(ctx context.Context, name, role, requestID string) context.Context {
	return context.WithValue(ctx, actorKey{}, Actor{Name: name, Role: role, RequestID: requestID})
}

// ActorFrom returns the actor of ctx ("system" when none).
func ActorFrom(ctx context.Context) Actor {
	if a, ok := ctx.Value(actorKey{}).(Actor); ok && a.Name != "" {
		return a
	}
	return Actor{Name: "system"}
}

// RolePtr is the stored form of a role: nil when empty.
func (a Actor) RolePtr() *string {
	if a.Role == "" {
		return nil
	}
	r := a.Role
	return &r
}
