package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
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
