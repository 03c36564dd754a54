package audit

import (
	"context"
	"testing"
	"time"
)

// An event made for a person or token carries the role it acted with; a
// system actor's carries none (stored as NULL).
func TestAuditEventActorRole(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev, err := NewRow(WithActorRole(context.Background(), "user:alice", "operator", "r1"), at, "pool.update", "pool", "p", nil, nil)
	if err != nil || ev.Actor != "user:alice" || ev.ActorRole == nil || *ev.ActorRole != "operator" || ev.RequestID != "r1" {
		t.Fatalf("person's event: %+v %v", ev, err)
	}
	for _, ctx := range []context.Context{context.Background(), WithActor(context.Background(), "system:startup", "")} {
		ev, err := NewRow(ctx, at, "pool.update", "pool", "p", nil, nil)
		if err != nil || ev.ActorRole != nil {
			t.Fatalf("system event %s has role %v (%v)", ev.Actor, ev.ActorRole, err)
		}
	}
}
