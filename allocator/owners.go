package allocator

import (
	"context"
	"net/netip"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
)

// OwnerAddress is one address an owner holds, in CIDR form for the data
// plane: an ipv4 value as /32, an ipv6 value as /128, an ipv6prefix block
// with its own prefix length; Gateway is the pool's optional gateway.
type OwnerAddress struct {
	Pool    string `json:"pool"`
	Address string `json:"address"`
	Gateway string `json:"gateway,omitempty"`
}

// OwnerAddresses lists every address owner holds across the ipv4, ipv6 and
// ipv6prefix pools, ordered by pool name (integer pools are not
// addresses). It is what GET /api/v1/owners/{type}/{id}/cni-ipam renders.
func (a *Allocator) OwnerAddresses(ctx context.Context, owner Owner) ([]OwnerAddress, error) {
	if err := owner.Validate(); err != nil {
		return nil, err
	}
	type row struct {
		Name    string
		Type    string
		Gateway string
		Value   string
	}
	var rows []row
	err := a.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT p.name AS name, p.type AS type, p.gateway AS gateway, a.value AS value
			FROM allocations a JOIN pools p ON p.id = a.pool_id
			WHERE a.owner_type = ? AND a.owner_id = ? AND a.state = ? AND p.type IN ('ipv4','ipv6','ipv6prefix')
			ORDER BY p.name`, owner.Type, owner.ID, models.StateAllocated).Scan(&rows).Error
	})
	if err != nil {
		return nil, err
	}
	out := make([]OwnerAddress, 0, len(rows))
	for _, r := range rows {
		addr := r.Value
		if PoolType(r.Type) != TypeIPv6Prefix {
			ip, err := netip.ParseAddr(r.Value)
			if err != nil {
				return nil, err
			}
			addr = netip.PrefixFrom(ip, ip.BitLen()).String()
		}
		out = append(out, OwnerAddress{Pool: r.Name, Address: addr, Gateway: r.Gateway})
	}
	return out, nil
}
