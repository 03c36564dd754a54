package audit

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/ipledger/ipledger/models"
)

// Event is one audit event as the API shows it: time, actor, action,
// object, request id, and the object before and after (secrets redacted
// when written).
type Event struct {
	ID    string    `json:"id"`
	At    time.Time `json:"at"`
	Actor string    `json:"actor"`
	// ActorRole is the role the actor acted with at the time: viewer,
	// operator or admin; "" (left out of the JSON) for a system actor and
	// for events written before roles were stored (docs/identity.md).
	ActorRole  string          `json:"actor_role,omitempty"`
	Action     string          `json:"action"`
	ObjectType string          `json:"object_type"`
	ObjectID   string          `json:"object_id"`
	RequestID  string          `json:"request_id,omitempty"`
	Before     json.RawMessage `json:"before"`
	After      json.RawMessage `json:"after"`
	// Revision is the event's place in commit order (docs/feed.md); null
	// for the moment between its commit and its numbering.
	Revision *int64 `json:"revision"`
	// Pool and Value name the pool value an allocation event is about
	// (Pool alone for a pool's own events).
	Pool  string `json:"pool,omitempty"`
	Value string `json:"value,omitempty"`
	// Names are the names the machines and the ExpectedMachine the event
	// mentions had when it was written, by id (names.go); nil for an
	// event written before they were kept. Pages show them; the API and
	// the change feed do not (docs/decisions.md "Audit events keep the
	// names they had").
	Names map[string]string `json:"-"`
}

func EventOut(r *models.AuditEvent) Event {
	e := Event{ID: strconv.FormatInt(r.ID, 10), At: r.At.UTC(), Actor: r.Actor, Action: r.Action,
		ObjectType: r.ObjectType, ObjectID: r.ObjectID, RequestID: r.RequestID, Before: json.RawMessage("null"), After: json.RawMessage("null")}
	if r.BeforeJSON != nil {
		e.Before = json.RawMessage(*r.BeforeJSON)
	}
	if r.AfterJSON != nil {
		e.After = json.RawMessage(*r.AfterJSON)
	}
	if r.ActorRole != nil {
		e.ActorRole = *r.ActorRole
	}
	e.Revision = r.Revision
	e.Pool, e.Value = EventPool(r.ObjectType, r.ObjectID)
	e.Names = DecodeNames(r.NamesJSON)
	return e
}

// EventPool tells which pool an event belongs to: an allocation event's
// object is POOL/VALUE, a pool event's object is the pool.
func EventPool(objectType, objectID string) (pool, value string) {
	switch objectType {
	case "allocation":
		if i := strings.IndexByte(objectID, '/'); i > 0 {
			return objectID[:i], objectID[i+1:]
		}
	case "pool":
		return objectID, ""
	}
	return "", ""
}
