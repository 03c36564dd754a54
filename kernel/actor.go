package kernel

import "context"

// Actor identifies who makes a change, for audit events.
type Actor struct {
	Name      string
	RequestID string
}

type actorKey struct{}

// WithActor attaches the acting identity and request id to ctx.
func WithActor(ctx context.Context, name, requestID string) context.Context {
	return context.WithValue(ctx, actorKey{}, Actor{Name: name, RequestID: requestID})
}

// ActorFrom returns the actor of ctx ("system" when none).
func ActorFrom(ctx context.Context) Actor {
	if a, ok := ctx.Value(actorKey{}).(Actor); ok && a.Name != "" {
		return a
	}
	return Actor{Name: "system"}
}
