package web

import (
	"fmt"
	"strings"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/fault"
)

// The error examples of the OpenAPI document: one per route and status,
// each with the code the server answers for that status and a message
// it writes (TestOpenAPIErrorExamplesAreTheServers makes the real
// requests behind 401, 403, 404, 422 and 503 and compares). Swagger UI
// shows them under each operation, so a 401 reads like a 401 and a 422
// names the route's own field.

// errorExamples are the examples a route needs beyond the defaults of
// errorExample: the 409 and 422 of its own body, keyed by RouteKey.
var errorExamples = map[string]map[int]fault.Error{
	"POST /pools": {
		409: {Code: fault.CodeConflict, Field: "name", Message: `pool "lo-ip" already exists`},
		422: {Code: fault.CodeInvalid, Field: "type", Message: `unknown pool type "ip4": want ipv4, ipv6, ipv6prefix or integer`},
	},
	"POST /pools:load": {
		422: {Code: fault.CodeInvalid, Field: "pools.lo-ip.type", Message: `unknown pool type "ip4": want ipv4, ipv6, ipv6prefix or integer`},
	},
	"POST /pools/:name/ranges": {
		409: {Code: fault.CodeConflict, Field: "first", Message: `range 10.180.63.0..10.180.63.255 overlaps range 2 (10.180.63.0..10.180.63.127) of pool "lo-ip"`},
		422: {Code: fault.CodeInvalid, Field: "first", Message: `"10.180.63" is not an IPv4 address`},
	},
	"PATCH /pools/:name/ranges/:id": {
		409: {Code: fault.CodeConflict, Field: "auto_assign", Message: "range 10.180.62.200..10.180.62.254 cannot become auto_assign while it holds explicitly placed values: 10.180.62.245"},
		422: {Code: fault.CodeInvalid, Field: "last", Message: `"10.180.62.300" is not an IPv4 address`},
	},
	"DELETE /pools/:name/ranges/:id": {
		409: {Code: fault.CodeConflict, Field: "id", Message: "range 10.180.62.200..10.180.62.254 still holds values: 10.180.62.245"},
	},
	"POST /pools/:name/allocations": {
		409: {Code: fault.CodeNotAvailable, Field: "value", Message: "10.180.62.245 is allocated to machine/m2"},
		422: {Code: fault.CodeInvalid, Field: "owner_type", Message: `owner_type "Machine" must match ^[a-z][a-z0-9_-]{0,31}$`},
	},
	"POST /pools/:name/allocations:batch": {
		409: {Code: fault.CodePoolExhausted, Field: "allocations[1].value", Message: `pool "lo-ip" has no free value in its auto_assign ranges for allocations[1] (2 automatic allocations asked, 1 free)`},
		422: {Code: fault.CodeInvalid, Field: "allocations[1].owner_id", Message: "owner machine/m1 is already listed at allocations[0]; an owner holds one value per pool"},
	},
	"GET /pools/:name/allocations/:value": {
		422: {Code: fault.CodeInvalid, Field: "value", Message: `"10.180.62" is not an IPv4 address`},
	},
	"DELETE /pools/:name/allocations/:value": {
		409: {Code: fault.CodeNotOwner, Field: "owner_id", Message: "10.180.62.245 is held by machine/m1, not machine/m2"},
		422: {Code: fault.CodeInvalid, Field: "owner_type", Message: `owner_type "Machine" must match ^[a-z][a-z0-9_-]{0,31}$`},
	},
	"POST /pools/:name/allocations/:value": {
		409: {Code: fault.CodeConflict, Field: "value", Message: "10.180.62.245 in lo-ip is allocated, not quarantined"},
		422: {Code: fault.CodeInvalid, Field: "value", Message: `"10.180.62" is not an IPv4 address`},
	},
	"GET /addresses/:value": {
		422: {Code: fault.CodeInvalid, Field: "value", Message: `"10.180.62" is not an IP address`},
	},
	"POST /webhooks": {
		409: {Code: fault.CodeConflict, Field: "name", Message: `webhook "vpc" already exists`},
		422: {Code: fault.CodeInvalid, Field: "name", Message: "name is required"},
	},
	"PATCH /webhooks/:id": {
		409: {Code: fault.CodeConflict, Field: "name", Message: `webhook "vpc" already exists`},
		422: {Code: fault.CodeInvalid, Field: "pools", Message: "pools must be a JSON array of pool names, or null for every pool"},
	},
	"POST /site-explorer/reports": {
		409: {Code: fault.CodeConflict, Field: "bmc_mac_address", Message: "host rack9-u01 (m-7), BMC 0a:00:00:00:09:01, is decommissioned; delete it before ingesting it again"},
		422: {Code: fault.CodeInvalid, Field: "bmc_mac_address", Message: `bmc_mac_address "0a:00:00:00:09" is not a MAC address: want six hex octets separated by ':' or '-' (one separator throughout), e.g. 1a:1b:1c:1d:1e:1f`},
	},
	"POST /machines:discover": {
		409: {Code: fault.CodeConflict, Field: "serial_number", Message: "DPU MT2309X00011 (m-8) is decommissioned; delete it before ingesting it again"},
		422: {Code: fault.CodeInvalid, Field: "serial_number", Message: `serial_number "" must be 1 to 64 letters, digits, '_', '.' or '-'`},
	},
	"POST /machines/:id": {
		409: {Code: fault.CodeConflict, Message: "host rack7-u12 is decommissioned, not ready"},
	},
	"DELETE /machines/:id": {
		409: {Code: fault.CodeConflict, Message: "host rack7-u12 is ready: decommission it first, or force delete it (admin)"},
		422: {Code: fault.CodeInvalid, Field: "force", Message: `force "yes" must be true or false`},
	},
	"GET /machines/:id/delete-impact": {
		422: {Code: fault.CodeInvalid, Field: "force", Message: `force "yes" must be true or false`},
	},
	"POST /expected-machines": {
		409: {Code: fault.CodeNotAvailable, Field: "expected_dpus[0].loopback_ip", Message: "10.180.62.200 is declared for DPU MT0001 of ExpectedMachine r07-u12"},
		422: {Code: fault.CodeInvalid, Field: "expected_dpus[0].loopback_ip", Message: `"fd00::1" is not an IPv4 address; an IPv6 reservation goes in loopback_ip_v6`},
	},
	"PUT /expected-machines": {
		409: {Code: fault.CodeConflict, Field: "expected_machines[0].bmc_mac_address", Message: "1a:1b:1c:1d:1e:1f is the BMC of host m-7, which is ready; decommission it first"},
		422: {Code: fault.CodeInvalid, Field: "expected_machines[1].bmc_mac_address", Message: "1a:1b:1c:1d:1e:1f is already listed at expected_machines[0]"},
	},
	"POST /expected-machines:import": {
		409: {Code: fault.CodeConflict, Field: "expected_machines[0].bmc_mac_address", Message: "1a:1b:1c:1d:1e:1f is the BMC of host m-7, which is ready; decommission it first"},
		422: {Code: fault.CodeInvalid, Field: "mode", Message: `unknown import mode "append": want merge or replace`},
	},
	"DELETE /expected-machines": {
		422: {Code: fault.CodeInvalid, Field: "force", Message: `DELETE /api/v1/expected-machines deletes every record and takes no query parameter (got "force"); delete one record with DELETE /api/v1/expected-machines/{id}`},
	},
	"PUT /expected-machines/:id": {
		409: {Code: fault.CodeConflict, Field: "chassis_serial_number", Message: "SN-0001 is declared by ExpectedMachine rack7-u13"},
		422: {Code: fault.CodeInvalid, Field: "expected_dpus[0].loopback_ip", Message: `"fd00::1" is not an IPv4 address; an IPv6 reservation goes in loopback_ip_v6`},
	},
	"PATCH /expected-machines/:id": {
		409: {Code: fault.CodeConflict, Field: "chassis_serial_number", Message: "SN-0001 is declared by ExpectedMachine rack7-u13"},
		422: {Code: fault.CodeInvalid, Field: "sku_id", Message: "sku_id must be a string or null"},
	},
	"GET /owners/:owner_type/:owner_id/cni-ipam": {
		409: {Code: fault.CodeConflict, Message: "the owner's addresses do not form a valid galactic-ipam config: two ipv4 addresses (pools lo-ip and pod-ip)"},
	},
	"POST /owners/:owner_type/:owner_id/allocations": {
		409: {Code: fault.CodeNotAvailable, Field: "pools[1].value", Message: `pool "endpoint-v6": fd00:10:ff01:1:0:5::/96 is allocated to endpoint/pod-2`},
		422: {Code: fault.CodeInvalid, Field: "pools[1]", Message: `pool "endpoint-v6" does not exist`},
	},
	"DELETE /owners/:owner_type/:owner_id/allocations": {
		409: {Code: fault.CodeConflict, Message: "owner machine/fm100dstbywpbepeb5yxsve6tpxjlrj44bsnqfrjupsa34aay2socpe6liq: 10.180.62.230 is the lo-ip loopback of DPU MT2309X00011 (machine_id fm100dstbywpbepeb5yxsve6tpxjlrj44bsnqfrjupsa34aay2socpe6liq) in its network config: it is released only by decommissioning and deleting the host, or by a force delete; nothing was released"},
		422: {Code: fault.CodeInvalid, Field: "pool", Message: "unknown query parameter \"pool\"; this route takes none"},
	},
	"GET /events:stream": {
		422: {Code: fault.CodeInvalid, Field: "after", Message: `after "x" must be a revision (an integer ≥ 0)`},
	},
}

// Messages the server writes for the statuses every route shares.
const (
	msgNoToken     = "authentication required: send Authorization: Bearer <token>"
	msgUnavailable = "the database is unavailable; retry shortly"
)

// errorExample is the example error body of a route for a status.
func errorExample(r Route, d apiDoc, st int) fault.Error {
	if e, ok := errorExamples[RouteKey(r.Method, r.Path)][st]; ok {
		return e
	}
	switch st {
	case 400:
		return fault.Error{Code: fault.CodeBadRequest, Message: "request body is not valid JSON: invalid character 'x' at start of value (at byte 1)"}
	case 401:
		return fault.Error{Code: fault.CodeUnauthorized, Message: msgNoToken}
	case 403:
		if r.Role == auth.RoleViewer {
			// No token has less than viewer; a person whose groups map
			// to no role is the one who is refused here.
			return fault.Error{Code: fault.CodeForbidden, Message: (&auth.NoRoleError{Name: "jdoe", Claim: "groups", Groups: []string{"staff"}}).Error()}
		}
		return fault.Error{Code: fault.CodeForbidden, Message: forbiddenMessage(r.Role)}
	case 404:
		return fault.Error{Code: fault.CodeNotFound, Message: notFoundMessage(r.Path)}
	case 409:
		return fault.Error{Code: fault.CodeConflict, Message: "the request collides with stored state"}
	case 412:
		return fault.Error{Code: fault.CodeStaleVersion, Message: "the record is at version 4, not \"3\": it changed since it was read; read it again and retry"}
	case 413:
		return fault.Error{Code: fault.CodeTooLarge, Message: "the request body is larger than 10485760 bytes; nothing was changed"}
	case 422:
		if len(d.Query) > 0 && strings.HasPrefix(d.Query[len(d.Query)-1], "cursor:") {
			return fault.Error{Code: fault.CodeInvalid, Field: "limit", Message: `limit "0" must be a positive integer`}
		}
		return fault.Error{Code: fault.CodeInvalid, Message: "a field or query parameter is malformed"}
	case 503:
		return fault.Error{Code: fault.CodeUnavailable, Message: msgUnavailable}
	}
	panic(fmt.Sprintf("no error example for status %d", st))
}

// forbiddenMessage is the 403 of a token whose role is one below the
// route's.
func forbiddenMessage(need auth.Role) string {
	below := auth.RoleViewer
	if need == auth.RoleAdmin {
		below = auth.RoleOperator
	}
	return fmt.Sprintf("role %s may not do this; it needs %s", below, need)
}

// notFoundMessage is the 404 of the object the path names first.
func notFoundMessage(path string) string {
	switch {
	case strings.HasPrefix(path, "/pools/:name/ranges/"):
		return `pool "lo-ip" has no range "7"`
	case strings.HasPrefix(path, "/pools/"):
		return `pool "lo-ip" does not exist`
	case strings.HasPrefix(path, "/machines/"):
		return `machine "m-404" does not exist (give a machine_id, a host BMC MAC address or a DPU serial number)`
	case strings.HasPrefix(path, "/expected-machines/"):
		return `no ExpectedMachine with id or BMC MAC "rack7-u99"`
	case strings.HasPrefix(path, "/webhooks/:id/deliveries/"):
		return `webhook "1" has no delivery "9"`
	case strings.HasPrefix(path, "/webhooks/"):
		return `webhook "7" does not exist`
	case strings.HasPrefix(path, "/owners/"):
		return "owner endpoint/pod-1 holds no address in any ipv4, ipv6 or ipv6prefix pool"
	}
	return "no such resource"
}
