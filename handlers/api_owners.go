package handlers

import (
	"fmt"
	"net/http"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/apijson"
	"github.com/ipledger/ipledger/cni"
	"github.com/ipledger/ipledger/fault"
)

// OwnerCNIIPAM: GET /api/v1/owners/{owner_type}/{owner_id}/cni-ipam renders
// the galactic-ipam `ipam` object from every address the owner holds
// (docs/cni.md): {"type":"galactic-ipam","addresses":[{"address","gateway"}]}.
// An owner that holds no address is 404: an empty config would only make the
// plugin fail later, on the host.
func (h *API) OwnerCNIIPAM(c echo.Context) error {
	owner := allocator.Owner{Type: Param(c, "owner_type"), ID: Param(c, "owner_id")}
	addrs, err := h.A.OwnerAddresses(Ctx(c), owner)
	if err != nil {
		return err
	}
	if len(addrs) == 0 {
		return fault.Errf(fault.CodeNotFound, "", "owner %s holds no address in any ipv4, ipv6 or ipv6prefix pool", owner)
	}
	in := make([]cni.Address, len(addrs))
	for i, a := range addrs {
		in[i] = cni.Address{Address: a.Address, Gateway: a.Gateway}
	}
	cfg, err := cni.RenderIPAM(in)
	if err != nil {
		return fault.Errf(fault.CodeConflict, "", "the owner's addresses do not form a valid galactic-ipam config: %v", err)
	}
	return c.JSON(http.StatusOK, cfg)
}

// ownerAllocationsBody is the body of POST
// /api/v1/owners/{owner_type}/{owner_id}/allocations: each entry of pools
// is a pool's name or {"pool", "value"?}, kept raw until its kind is known.
type ownerAllocationsBody struct {
	Pools *[]jsontext.Value `json:"pools"`
}

// ownerPoolEntry is the object form of an entry.
type ownerPoolEntry struct {
	Pool  *string `json:"pool"`
	Value string  `json:"value"`
}

// ownerPools reads the entries of pools: a string is a pool's name, an
// object {"pool", "value"?} asks for that value (unknown members are
// refused naming their path, as everywhere in a strict body); anything
// else is 422 invalid naming pools[i].
func (b ownerAllocationsBody) ownerPools() ([]allocator.OwnerPoolRequest, error) {
	if b.Pools == nil {
		return nil, fault.Errf(fault.CodeInvalid, "pools", `pools is required: a list of pool names or {"pool", "value"} objects`)
	}
	out := make([]allocator.OwnerPoolRequest, len(*b.Pools))
	for i, raw := range *b.Pools {
		field := fmt.Sprintf("pools[%d]", i)
		switch raw.Kind() {
		case '"':
			if err := jsonv2.Unmarshal(raw, &out[i].Pool); err != nil {
				return nil, apijson.MapError(err, apijson.Options{Prefix: field})
			}
		case '{':
			var e ownerPoolEntry
			if err := jsonv2.Unmarshal(raw, &e, jsonv2.RejectUnknownMembers(true)); err != nil {
				return nil, apijson.MapError(err, apijson.Options{Prefix: field})
			}
			if e.Pool == nil {
				return nil, fault.Errf(fault.CodeInvalid, field+".pool", `%s.pool is required: the pool's name`, field)
			}
			out[i] = allocator.OwnerPoolRequest{Pool: *e.Pool, Value: e.Value}
		default:
			return nil, fault.Errf(fault.CodeInvalid, field, `%s must be a pool's name or an object {"pool", "value"}, not %s`, field, apijson.KindName(raw.Kind(), raw))
		}
	}
	return out, nil
}

// AllocateForOwner: POST /api/v1/owners/{owner_type}/{owner_id}/allocations
// with {"pools": ["pod-v4", {"pool": "endpoint-v6", "value": "…"}]} → 200
// {"items": [allocation…]} in request order: one value of each pool for the
// owner, all or nothing, idempotent (docs/api.md "Owner allocations").
func (h *API) AllocateForOwner(c echo.Context) error {
	owner := allocator.Owner{Type: Param(c, "owner_type"), ID: Param(c, "owner_id")}
	if err := owner.Validate(); err != nil {
		return err
	}
	var b ownerAllocationsBody
	if err := DecodeJSONStrict(c, &b); err != nil {
		return err
	}
	reqs, err := b.ownerPools()
	if err != nil {
		return err
	}
	out, _, err := h.A.AllocateForOwner(Ctx(c), owner, reqs)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"items": out})
}

// ReleaseOwner: DELETE /api/v1/owners/{owner_type}/{owner_id}/allocations →
// 204: every value the owner holds is released in one transaction. Any
// query parameter is 422 invalid: a filter such as ?pool= would read as
// "release only that pool" and release everything.
func (h *API) ReleaseOwner(c echo.Context) error {
	if err := OnlyQuery(c); err != nil {
		return err
	}
	owner := allocator.Owner{Type: Param(c, "owner_type"), ID: Param(c, "owner_id")}
	if _, err := h.A.ReleaseOwner(Ctx(c), owner); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
