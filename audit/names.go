package audit

import (
	"bytes"
	"encoding/json"
)

// The names an event keeps (docs/console.md "Audit log names"): the
// writer stores, beside the event, the name each machine and
// ExpectedMachine it mentions had then (models.AuditEvent.NamesJSON); the
// console shows those, and names only what an event does not keep (events
// written before schema version 33) as it is named now.

// ownerTypeMachine is the owner_type of a value a machine holds
// (allocator.OwnerTypeMachine; this package sits below the allocator).
const ownerTypeMachine = "machine"

// MachineRefs lists the machines an event's documents name: owner_id
// (former_owner_id) beside owner_type (former_owner_type) machine — the
// owners of allocation events — and host_machine_id, a DPU's host in a
// machine's document. Each id once, in the order found.
func MachineRefs(docs ...[]byte) []string {
	var ids []string
	seen := map[string]bool{}
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, raw := range docs {
		// Most documents name no machine: skip them without decoding.
		if !bytes.Contains(raw, []byte(`"`+ownerTypeMachine+`"`)) && !bytes.Contains(raw, []byte(`"host_machine_id":"`)) {
			continue
		}
		var doc map[string]any
		if json.Unmarshal(raw, &doc) != nil {
			continue
		}
		for _, k := range []string{"owner", "former_owner"} {
			if doc[k+"_type"] == ownerTypeMachine {
				if id, ok := doc[k+"_id"].(string); ok {
					add(id)
				}
			}
		}
		if id, ok := doc["host_machine_id"].(string); ok {
			add(id)
		}
	}
	return ids
}

// EncodeNames is the stored form of an event's names: a JSON object, nil
// when there is none.
func EncodeNames(names map[string]string) (*string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(names)
	if err != nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

// DecodeNames reads an event's stored names; none (nil) when it has none,
// or when the column holds something else than an object of strings (a
// repair by hand), so that the event is named as an older one is.
func DecodeNames(s *string) map[string]string {
	if s == nil {
		return nil
	}
	var out map[string]string
	if json.Unmarshal([]byte(*s), &out) != nil {
		return nil
	}
	return out
}
