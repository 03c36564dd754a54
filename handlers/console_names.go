package handlers

import (
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/console"
	"github.com/ipledger/ipledger/views"
)

// eventNames resolves the display names of the machines a page mentions,
// as they are now: the objects of its audit events, the machines their
// documents name, and the extra ids given. An event that kept the names
// it had when written (audit.Event.Names) is shown with those
// (views.Names.ForEvent), so only what it did not keep is looked up
// (docs/console.md "Audit log names").
func (h *Console) eventNames(c echo.Context, events []audit.Event, extra []string) (views.Names, error) {
	ids := append([]string{}, extra...)
	var ems []string
	for _, e := range events {
		for _, id := range views.EventMachineRefs(e) {
			if _, kept := e.Names[id]; !kept {
				ids = append(ids, id)
			}
		}
		if _, kept := e.Names[e.ObjectID]; kept {
			continue
		}
		switch e.ObjectType {
		case "machine":
			ids = append(ids, e.ObjectID)
		case "expected_machine":
			ems = append(ems, e.ObjectID)
		}
	}
	names, err := h.Reads.MachineNames(Ctx(c), ids)
	if err != nil {
		return nil, err
	}
	// A deleted machine is named from any event on the page that recorded
	// its document (its create or delete), so its network_config events,
	// whose documents carry no serial, are not left as bare ids.
	for _, e := range events {
		if e.ObjectType != "machine" || names[e.ObjectID] != "" || e.Names[e.ObjectID] != "" {
			continue
		}
		if n := views.EventMachineName(e, nil); n != views.ShortID(e.ObjectID) {
			names[e.ObjectID] = n
		}
	}
	emNames, err := h.Reads.ExpectedMachineNames(Ctx(c), ems)
	if err != nil {
		return nil, err
	}
	for id, n := range emNames {
		names[id] = n
	}
	return views.Names(names), h.webhookNames(c, events, names)
}

// webhookNames adds the webhooks that exist, by id, when the events name
// one (a short table, read whole).
func (h *Console) webhookNames(c echo.Context, events []audit.Event, names map[string]string) error {
	if h.Hooks == nil || !slices.ContainsFunc(events, func(e audit.Event) bool { return e.ObjectType == "webhook" }) {
		return nil
	}
	hooks, err := h.Hooks.ListWebhooks(Ctx(c))
	if err != nil {
		return err
	}
	for _, w := range hooks {
		names[views.WebhookKey(w.ID)] = w.Name
	}
	return nil
}

// machineIDsOf lists a machine page's machines (itself, its host, its DPUs).
func machineIDsOf(d *console.MachineDetail) []string {
	ids := []string{d.Machine.MachineID}
	for _, x := range d.Machine.DPUs {
		ids = append(ids, x.MachineID)
	}
	if d.Host != nil {
		ids = append(ids, d.Host.MachineID)
	}
	return ids
}

// machineName is how the console names the machine id (its host name or
// DPU serial), the short id when nothing is known of it.
func (h *Console) machineName(c echo.Context, id string) string {
	names, err := h.Reads.MachineNames(Ctx(c), []string{id})
	if err == nil && names[id] != "" {
		return names[id]
	}
	return views.ShortID(id)
}
