package web

import (
	"reflect"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/cni"
	"github.com/ipledger/ipledger/handlers"
	"github.com/ipledger/ipledger/webhook"
)

// Body types of the OpenAPI document for answers and requests that the
// handlers build inline (maps, unexported structs).
type (
	poolPage struct {
		Items      []allocator.Pool `json:"items"`
		NextCursor string           `json:"next_cursor,omitempty"`
	}
	allocationRequest struct {
		OwnerType string `json:"owner_type"`
		OwnerID   string `json:"owner_id"`
		Value     string `json:"value,omitempty"`
	}
	batchAllocationRequest struct {
		Allocations []allocationRequest `json:"allocations"`
	}
	allocationItems struct {
		Items []allocator.Allocation `json:"items"`
	}
	ownerAllocationsRequest struct {
		Pools []any `json:"pools"`
	}
	unquarantined struct {
		Pool  string `json:"pool"`
		Value string `json:"value"`
		State string `json:"state"`
	}
	expectedMachineItems struct {
		Items []allocator.ExpectedMachine `json:"items"`
	}
	expectedMachinesFile struct {
		ExpectedMachines []allocator.ExpectedMachineSpec `json:"expected_machines"`
	}
)

var (
	pagingQuery = []string{"limit: page size (default 100, at most 1000)", "cursor: next_cursor of the previous page"}
	emExample   = `{"bmc_mac_address": "1a:1b:1c:1d:1e:1f", "bmc_username": "root", "bmc_password": "write-only",
		"chassis_serial_number": "SN-0001", "fallback_dpu_serial_numbers": ["MT0001"],
		"metadata": {"name": "rack7-u12", "description": "", "labels": [{"key": "env", "value": "prod"}]},
		"sku_id": null,
		"expected_dpus": [{"serial_number": "MT0001", "loopback_ip": "10.180.62.200", "loopback_ip_v6": "fd00:180:62::c8"}]}`
	emAnswer = `{"id": "0f9d2a61-6a3c-4a55-9d7e-3f1c2b8e4d10", "version": 3, "bmc_mac_address": "1a:1b:1c:1d:1e:1f",
		"bmc_username": "root", "bmc_password_set": true, "chassis_serial_number": "SN-0001", "fallback_dpu_serial_numbers": ["MT0001"],
		"metadata": {"name": "rack7-u12", "description": "", "labels": [{"key": "env", "value": "prod"}]}, "sku_id": null,
		"expected_dpus": [{"serial_number": "MT0001", "loopback_ip": "10.180.62.200", "loopback_ip_v6": null}]}`
	allocationAnswer = `{"pool": "lo-ip", "value": "10.180.62.245", "owner_type": "machine", "owner_id": "m1", "state": "allocated", "allocated_at": "2026-12-01T10:00:00Z"}`
)

func query(extra ...string) []string { return append(extra, pagingQuery...) }

// apiDocs documents every route of APIRoutes, keyed by RouteKey.
var apiDocs = map[string]apiDoc{
	"GET /pools": {Summary: "List pools with their ranges and stats", Query: query(),
		OK: 200, OKBody: poolPage{}, Errors: []int{422}},
	"POST /pools": {Summary: "Create a pool", Body: allocator.PoolSpec{}, OK: 201, OKBody: allocator.Pool{}, Location: true,
		Example: `{"name": "lo-ip", "type": "ipv4", "ranges": [{"first": "10.180.62.1", "last": "10.180.62.199"}, {"first": "10.180.62.200", "last": "10.180.62.254", "auto_assign": false}]}`,
		Errors:  []int{400, 409, 413, 422}},
	"POST /pools:load": {Summary: "Load a NICo site configuration (TOML): additive, drift reported, never applied",
		BodyType: "application/toml", Example: "[pools.lo-ip]\ntype = \"ipv4\"\nprefix = \"10.180.62.0/26\"\n",
		OK: 200, OKBody: allocator.LoadResult{}, Errors: []int{400, 413, 422}},
	"GET /pools:check": {Summary: "Ranges of address pools that overlap another pool's (stored before the rule existed); empty on a clean site",
		OK: 200, OKBody: handlers.PoolCheck{}, Errors: []int{422}},
	"GET /pools/:name": {Summary: "Read a pool: ranges and stats per range kind", OK: 200, OKBody: allocator.Pool{}, Errors: []int{404}},
	"POST /pools/:name/ranges": {Summary: "Add a range (grow the pool)", Body: allocator.RangeSpec{},
		Example: `{"first": "10.180.63.0", "last": "10.180.63.255", "auto_assign": true}`,
		OK:      201, OKBody: allocator.Range{}, ETag: true, Location: true, Errors: []int{400, 404, 409, 413, 422}},
	"GET /pools/:name/ranges/:id": {Summary: "Read a range with its counts", OK: 200, OKBody: allocator.Range{}, ETag: true, Errors: []int{404}},
	"PATCH /pools/:name/ranges/:id": {Summary: "Flip auto_assign, shrink or move a range (refused when it would strand a value)",
		Body: allocator.RangeUpdate{}, Example: `{"auto_assign": false}`,
		OK: 200, OKBody: allocator.Range{}, ETag: true, IfMatch: true, Errors: []int{400, 404, 409, 412, 413, 422}},
	"DELETE /pools/:name/ranges/:id": {Summary: "Remove a range (refused while it holds a value)", OK: 204, IfMatch: true,
		Errors: []int{404, 409, 412}},
	"GET /pools/:name/allocations": {Summary: "List allocations and quarantines, keyset-paginated",
		Query: query("owner_type: only this owner type", "owner_id: only this owner id", "state: allocated or quarantined"),
		OK:    200, OKBody: allocator.AllocationPage{}, Errors: []int{404, 422}},
	"POST /pools/:name/allocations": {Summary: "Allocate a value: idempotent per owner; a requested value must be in an auto_assign=false range",
		Body: allocationRequest{}, Example: `{"owner_type": "machine", "owner_id": "m1", "value": "10.180.62.245"}`,
		OK: 201, Also: []int{200}, OKBody: allocator.Allocation{}, OKExample: allocationAnswer, Location: true, Errors: []int{400, 404, 409, 413, 422}},
	"POST /pools/:name/allocations:batch": {Summary: "Allocate for up to 10,000 owners in one transaction, all or nothing, each as a single allocation would (idempotent per owner); the answer lists them in request order",
		Body: batchAllocationRequest{}, Example: `{"allocations": [{"owner_type": "machine", "owner_id": "m1"}, {"owner_type": "machine", "owner_id": "m2", "value": "10.180.62.245"}]}`,
		OK: 200, OKBody: allocationItems{}, Errors: []int{400, 404, 409, 413, 422}},
	"GET /pools/:name/allocations/:value": {Summary: "Read one allocation or quarantine", OK: 200, OKBody: allocator.Allocation{}, Errors: []int{404, 422}},
	"DELETE /pools/:name/allocations/:value": {Summary: "Release a value (only its owner; a free value is a no-op)",
		Query: []string{"owner_type: the current owner's type", "owner_id: the current owner's id"},
		OK:    204, Errors: []int{404, 409, 422}},
	"POST /pools/:name/allocations/:value": {Path: "/pools/{name}/allocations/{value}:unquarantine", ID: "unquarantineAllocation",
		Summary: "Return a quarantined value to free", OK: 200, OKBody: unquarantined{}, Errors: []int{404, 409, 422}},
	"GET /addresses/:value": {Summary: "Everything that holds an address: pool membership, allocation, quarantine, reservation",
		OK: 200, OKBody: allocator.AddressInfo{}, Errors: []int{422}},
	"GET /events": {Summary: "The audit log, newest first (secrets redacted)",
		Query: query("actor: exact actor (token:NAME)", "action: exact action", "object_type: e.g. pool, expected_machine",
			"object_id: exact object id", "since: RFC 3339 time", "until: RFC 3339 time"),
		OK: 200, OKBody: audit.EventPage{}, Errors: []int{422}},
	"GET /events:stream": {Summary: "The change feed as Server-Sent Events (id: revision, event: action, data: event JSON); Last-Event-ID wins over after",
		Query: []string{"after: revision to start after (default: the current head)", "object_type: e.g. allocation", "action: exact action, prefix such as allocation.*, or *", "pool: pool name"},
		OK:    200, Errors: []int{422}},
	"GET /webhooks": {Summary: "List webhooks (admin; secrets never shown)", OK: 200, OKBody: struct {
		Items []webhook.Webhook `json:"items"`
	}{}},
	"POST /webhooks": {Summary: "Create a webhook (docs/feed.md)", Body: handlers.WebhookBody{},
		Example: `{"name": "vpc", "url": "https://vpc-ctl.example/ipledger", "secret": "a-long-random-secret", "actions": ["allocation.*"], "pools": ["lo-ip"]}`,
		OK:      201, OKBody: webhook.Webhook{}, Errors: []int{400, 409, 413, 422}, ETag: true, Location: true},
	"GET /webhooks/:id": {Summary: "Read a webhook", OK: 200, OKBody: webhook.Webhook{}, Errors: []int{404}, ETag: true},
	"PATCH /webhooks/:id": {Summary: "Change the members given (pools: null is every pool)", Body: handlers.WebhookBody{},
		Example: `{"enabled": false}`, OK: 200, OKBody: webhook.Webhook{}, Errors: []int{400, 404, 409, 412, 413, 422}, ETag: true, IfMatch: true},
	"DELETE /webhooks/:id": {Summary: "Delete a webhook and its queue", OK: 204, Errors: []int{404, 412}, IfMatch: true},
	"GET /webhooks/:id/deliveries": {Summary: "The delivery log, newest first",
		Query: query("state: pending, delivered or failed"), OK: 200, OKBody: webhook.DeliveryPage{}, Errors: []int{404, 422}},
	"POST /webhooks/:id/deliveries/:delivery": {Path: "/webhooks/{id}/deliveries/{delivery}:redeliver", ID: "redeliverWebhookDelivery",
		Summary: "Queue a delivery again (same delivery id)", OK: 200, OKBody: webhook.Delivery{}, Errors: []int{404}},
	"POST /site-explorer/reports": {Summary: "A site-explorer report: ingest the host and its DPUs, assign loopbacks",
		Body: allocator.ReportSpec{}, Example: `{"bmc_mac_address": "0a:00:00:00:09:01", "chassis_serial_number": "CHS-1", "dpus": [{"serial_number": "MT2309X00011", "bmc_mac_address": "1a:00:00:00:09:11"}]}`,
		OK: 200, OKBody: allocator.IngestResult{}, Errors: []int{400, 409, 413, 422}},
	"POST /machines:discover": {Summary: "Direct DPU discovery by serial number",
		Body: allocator.DiscoverSpec{}, Example: `{"serial_number": "MT2309X00011"}`,
		OK: 200, OKBody: allocator.IngestResult{}, Errors: []int{400, 409, 413, 422}},
	"GET /machines": {Summary: "Managed hosts with their DPUs and network configs",
		Query: query("state: ready or decommissioned"), OK: 200, OKBody: allocator.MachinePage{}, Errors: []int{422}},
	"GET /machines/:id": {Summary: "Read a host or a DPU", OK: 200, OKBody: allocator.Machine{}, Errors: []int{404}},
	"POST /machines/:id": {Path: "/machines/{id}:decommission", ID: "decommissionMachine", Summary: "Decommission a ready host",
		OK: 200, OKBody: allocator.Machine{}, Errors: []int{404, 409}},
	"GET /machines/:id/delete-impact": {Summary: "What a delete would release, return to its reservation or quarantine",
		Query: []string{"force: true for a force delete"}, OK: 200, OKBody: allocator.DeleteImpact{}, Errors: []int{404, 422}},
	"DELETE /machines/:id": {Summary: "Delete a decommissioned host (force=true: admin, values go to quarantine)",
		Query: []string{"force: true to delete a host that is not decommissioned (admin)"}, OK: 204, Errors: []int{404, 409, 422}},
	"GET /dpu-bindings": {Summary: "Per DPU: active and reserved loopbacks and their status per family",
		Query: query("status: reserved, automatic, pending, conflict, missing or none"), OK: 200, OKBody: allocator.BindingPage{}, Errors: []int{422}},
	"GET /expected-machines": {Summary: "List ExpectedMachines ordered by BMC MAC",
		Query: query("bmc_mac_address: exact, any spelling", "serial_number: chassis, expected or fallback DPU serial",
			"label: key or key=value", "q: substring of MAC, chassis serial, name or DPU serial"),
		OK: 200, OKBody: allocator.ExpectedMachinePage{}, Errors: []int{422}},
	"POST /expected-machines": {Summary: "Create an ExpectedMachine with its DPU loopback reservations",
		Body: allocator.ExpectedMachineSpec{}, Example: emExample,
		OK: 201, OKBody: allocator.ExpectedMachine{}, OKExample: emAnswer, ETag: true, Location: true, Errors: []int{400, 409, 413, 422}},
	"PUT /expected-machines": {Summary: "Replace every ExpectedMachine atomically (the NICo file format)",
		Body: expectedMachinesFile{}, Example: `{"expected_machines": [` + emExample + `]}`,
		OK: 200, OKBody: expectedMachineItems{}, Errors: []int{400, 409, 413, 422}},
	"POST /expected-machines:import": {Summary: "Import a NICo expected-machines file atomically: merge (the default: update by BMC MAC, create the rest) or replace",
		Query: []string{"mode: merge (default) or replace"},
		Body:  expectedMachinesFile{}, Example: `{"expected_machines": [` + emExample + `]}`,
		OK: 200, OKBody: allocator.ImportResult{}, Errors: []int{400, 409, 413, 422}},
	"DELETE /expected-machines": {Summary: "Delete every ExpectedMachine and its reservations", OK: 204, Errors: []int{422}},
	"GET /expected-machines/:id": {Summary: "Read an ExpectedMachine by UUID or BMC MAC", OK: 200, OKBody: allocator.ExpectedMachine{}, OKExample: emAnswer,
		ETag: true, Errors: []int{404}},
	"PUT /expected-machines/:id": {Summary: "Replace an ExpectedMachine: absent expected_dpus and bmc_password keep the stored ones",
		Body: allocator.ExpectedMachineSpec{}, Example: emExample,
		OK: 200, OKBody: allocator.ExpectedMachine{}, ETag: true, IfMatch: true, Errors: []int{400, 404, 409, 412, 413, 422}},
	"PATCH /expected-machines/:id": {Summary: "JSON merge patch of an ExpectedMachine (null clears)",
		Body: allocator.ExpectedMachineSpec{}, BodyType: "", Example: `{"sku_id": "sku-7"}`,
		OK: 200, OKBody: allocator.ExpectedMachine{}, ETag: true, IfMatch: true, Errors: []int{400, 404, 409, 412, 413, 422}},
	"DELETE /expected-machines/:id": {Summary: "Delete an ExpectedMachine; active DPUs keep their values", OK: 204, IfMatch: true,
		Errors: []int{404, 412}},
	"GET /owners/:owner_type/:owner_id/cni-ipam": {Summary: "The galactic-ipam ipam object of every address an owner holds",
		OK: 200, OKBody: cni.IPAMConfig{}, Errors: []int{404, 409}},
	"POST /owners/:owner_type/:owner_id/allocations": {Summary: "One value of each listed pool for this owner, in one transaction, all or nothing, each as a single allocation would (idempotent: values the owner holds are returned); the answer lists them in request order, an error's field is pools[i] or pools[i].value",
		Body: ownerAllocationsRequest{}, Example: `{"pools": ["pod-v4", {"pool": "endpoint-v6", "value": "fd00:10:ff01::1:0:0/96"}]}`,
		OK: 200, OKBody: allocationItems{}, Errors: []int{400, 409, 413, 422}},
	"DELETE /owners/:owner_type/:owner_id/allocations": {Summary: "Release every value this owner holds, in one transaction (nothing held is a no-op); a DPU's live loopback is 409 and nothing is released",
		OK: 204, Errors: []int{409, 422}},
}

// schemaOverrides give a schema to types whose JSON is hand-made
// (their own MarshalJSON).
var schemaOverrides map[reflect.Type]func(g *schemaGen) any

// fieldSchemas narrow the schema of single members whose Go type says
// less than the API promises (a string that is one of a few words).
var fieldSchemas = map[reflect.Type]map[string]any{
	reflect.TypeOf(ownerAllocationsRequest{}): {
		"pools": map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"oneOf": []any{
			map[string]any{"type": "string", "description": "a pool's name: the owner's value of it, or the lowest free value of its auto_assign ranges"},
			map[string]any{"type": "object", "required": []any{"pool"}, "additionalProperties": false, "properties": map[string]any{
				"pool":  map[string]any{"type": "string"},
				"value": map[string]any{"type": "string", "description": "this exact value, from an auto_assign=false range"},
			}},
		}}},
	},
	reflect.TypeOf(audit.Event{}): {
		"actor_role": map[string]any{"type": "string", "enum": []any{"viewer", "operator", "admin"},
			"description": "The role the actor acted with at the time; absent for system actors and for events written before roles were stored."},
	},
}

func init() {
	schemaOverrides = map[reflect.Type]func(g *schemaGen) any{reflect.TypeOf(allocator.Machine{}): machineSchema}
}

func machineSchema(g *schemaGen) any {
	{
		str := map[string]any{"type": "string"}
		nstr := map[string]any{"type": []any{"string", "null"}}
		nc := g.of(reflect.TypeOf(allocator.NetworkConfig{}))
		self := map[string]any{"$ref": "#/components/schemas/Machine"}
		return map[string]any{
			"description": "A host (kind host, with its DPUs) or a DPU (kind dpu). A DPU inside a host has no state or host_machine_id; a DPU has bmc_mac_address (its own BMC's) only when a report gave one.",
			"type":        "object",
			"required":    []any{"machine_id", "kind"},
			"properties": map[string]any{
				"machine_id": str, "kind": map[string]any{"type": "string", "enum": []any{"host", "dpu"}}, "state": str,
				"bmc_mac_address": nstr, "chassis_serial_number": str, "expected_machine_id": nstr,
				"dpus": map[string]any{"type": "array", "items": self}, "serial_number": str,
				"host_machine_id": nstr, "network_config": nc,
			},
		}
	}
}
