package views

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/console"
)

// The console's links and names. Every id, pool, value and owner on a page
// is a link to its own page; machines are named by allocator's rule
// (allocator/names.go) with the machine_id shortened beside them.

// ExpectedMachineURL is an ExpectedMachine's read-only page.
func ExpectedMachineURL(id string) string { return "/expected-machines/" + url.PathEscape(id) }

// ValueURL is a pool's allocations table filtered to one value (or prefix).
func ValueURL(pool, value string) string { return Query(PoolURL(pool), "value", value) }

// SearchURL is the search page for q.
func SearchURL(q string) string { return Query("/search", "q", q) }

// OwnerURL is the page of an allocation's owner: a machine's page for
// owner_type machine, else the search for the owner id.
func OwnerURL(ownerType, ownerID string) string {
	if ownerType == allocator.OwnerTypeMachine {
		return MachineURL(ownerID)
	}
	return SearchURL(ownerID)
}

// Names maps machine ids to display names (console.MachineNames, by the
// rule of allocator/names.go); a missing id is shown as its short id.
type Names map[string]string

// ForEvent is how the row of audit event e names things: by the names e
// kept when it was written (audit.Event.Names), the page's names (as
// things are named now) for what it did not keep (docs/console.md
// "Audit log names").
func (n Names) ForEvent(e audit.Event) Names {
	if len(e.Names) == 0 {
		return n
	}
	out := make(Names, len(n)+len(e.Names))
	for id, s := range n {
		out[id] = s
	}
	for id, s := range e.Names {
		out[id] = s
	}
	return out
}

// Of names a machine id.
func (n Names) Of(id string) string {
	if s, ok := n[id]; ok && s != "" {
		return s
	}
	return ShortID(id)
}

// DiffText is a value of an audit diff line as the page shows it: the
// machine an owner_id, former_owner_id or host_machine_id names, by its
// name when it is known (the id stays in the line's title and the full
// documents), else the value clipped.
func (n Names) DiffText(path, value string) string {
	if path == "owner_id" || path == "former_owner_id" || path == "host_machine_id" {
		if s, ok := n[value]; ok && s != "" {
			return s
		}
	}
	return Clip(value)
}

// EventMachineRefs lists the machines an event's documents name: the
// owners of allocation events (owner_id, former_owner_id beside an
// owner_type machine) and a DPU's host (audit.MachineRefs).
func EventMachineRefs(e audit.Event) []string { return audit.MachineRefs(e.Before, e.After) }

// OwnerText is an owner as pages show it: a machine by name, another
// owner as type/id.
func (n Names) OwnerText(ownerType, ownerID string) string {
	if ownerType == allocator.OwnerTypeMachine {
		if s, ok := n[ownerID]; ok {
			return s
		}
		// A machine that is gone (force-deleted): its short id.
		return "machine " + ShortID(ownerID)
	}
	return ownerType + "/" + ownerID
}

// HitURL is the page of a search hit.
func HitURL(h console.SearchHit) string {
	switch h.Kind {
	case console.HitHost, console.HitDPU:
		return MachineURL(h.ID)
	case console.HitExpectedMachine:
		return ExpectedMachineURL(h.ID)
	case console.HitAllocation:
		return ValueURL(h.Pool, h.Value)
	case console.HitPool:
		if h.Value != "" {
			return ValueURL(h.Pool, h.Value)
		}
		return PoolURL(h.Pool)
	}
	return "/"
}

// ObjectURL is the page of an audit event's object ("" when it has none).
func ObjectURL(objectType, objectID string) string {
	switch objectType {
	case "machine":
		return MachineURL(objectID)
	case "expected_machine":
		if objectID == "*" {
			return "/expected-machines"
		}
		return ExpectedMachineURL(objectID)
	case "pool":
		return PoolURL(objectID)
	case "allocation":
		if pool, value, ok := strings.Cut(objectID, "/"); ok {
			return ValueURL(pool, value)
		}
	}
	return ""
}

// BindingAdvice is what an operator should do about a binding status.
func BindingAdvice(status string) string {
	switch status {
	case allocator.BindingReserved:
		return "Settled: the DPU carries its reserved loopback. Nothing to do."
	case allocator.BindingAutomatic:
		return "Settled: an automatic loopback, nothing reserved. Reserve one on the ExpectedMachine only if this DPU needs a fixed address (it applies at the next ingestion)."
	case allocator.BindingPending:
		return "The reservation changed while the DPU was active: it keeps its current loopback. " + allocator.PendingRemedy + " — or set the reservation back."
	case allocator.BindingConflict:
		return "The reserved value could not be assigned (held by another owner, quarantined, or the DPU is declared by another ExpectedMachine). Fix the ExpectedMachines or free the value, then “Assign missing loopbacks now” (or wait for the next report)."
	case allocator.BindingMissing:
		return "No loopback yet (the pool was exhausted when the DPU was ingested). Add a range to the pool: the DPU is completed automatically (or use “Assign missing loopbacks now”)."
	case allocator.BindingNone:
		return "The family's pool does not exist and nothing is reserved: nothing to do unless the site uses it."
	}
	return ""
}

// HitKindLabel is a search group's heading.
func HitKindLabel(kind string) string {
	switch kind {
	case console.HitHost:
		return "Hosts"
	case console.HitDPU:
		return "DPUs"
	case console.HitExpectedMachine:
		return "Expected machines"
	case console.HitAllocation:
		return "Pool values"
	case console.HitPool:
		return "Pools"
	}
	return kind
}

// EventMachineName names the machine of an audit event: by the names
// of the machines that exist, else from the machine as the event
// recorded it (a deleted DPU by its serial, a deleted host by its chassis
// serial or BMC MAC).
func EventMachineName(e audit.Event, names Names) string {
	if n, ok := names[e.ObjectID]; ok && n != "" {
		return n
	}
	var doc struct {
		Chassis string  `json:"chassis_serial_number"`
		MAC     *string `json:"bmc_mac_address"`
		Serial  *string `json:"serial_number"`
	}
	for _, raw := range []json.RawMessage{e.Before, e.After} {
		if json.Unmarshal(raw, &doc) == nil && (Str(doc.Serial) != "" || doc.Chassis != "" || Str(doc.MAC) != "") {
			if Str(doc.Serial) != "" {
				return allocator.DPUName(Str(doc.Serial), ShortID(e.ObjectID))
			}
			return allocator.HostName("", doc.Chassis, Str(doc.MAC), ShortID(e.ObjectID))
		}
	}
	return ShortID(e.ObjectID)
}

// EventEMName names the ExpectedMachine of an audit event, from the
// document it recorded when the record is gone.
func EventEMName(e audit.Event, names Names) string {
	if n, ok := names[e.ObjectID]; ok && n != "" {
		return n
	}
	var doc struct {
		MAC      string `json:"bmc_mac_address"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	for _, raw := range []json.RawMessage{e.Before, e.After} {
		if json.Unmarshal(raw, &doc) == nil && doc.MAC != "" {
			return allocator.ExpectedMachineName(doc.Metadata.Name, doc.MAC)
		}
	}
	return e.ObjectID
}

// WebhookKey is the key of a webhook that exists in Names (webhook ids
// are numbers, machine and ExpectedMachine ids never are).
func WebhookKey(id string) string { return "webhook/" + id }

// EventWebhookName names the webhook of an audit event: by its name now,
// else by the name its documents recorded (a deleted webhook), else
// "#id".
func EventWebhookName(e audit.Event, names Names) string {
	if n := names[WebhookKey(e.ObjectID)]; n != "" {
		return n
	}
	for _, raw := range []json.RawMessage{e.Before, e.After} {
		var doc struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &doc) == nil && doc.Name != "" {
			return doc.Name
		}
	}
	return "#" + e.ObjectID
}

// KindWord is how a sentence calls a machine of this kind: "DPU" for a
// DPU (a host-less DPU is force-deleted on its own), else "host".
func KindWord(kind string) string {
	if kind == allocator.KindDPU {
		return "DPU"
	}
	return "host"
}
