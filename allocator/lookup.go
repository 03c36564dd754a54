package allocator

import (
	"context"
	"net/netip"
	"strings"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// AddressEntry is one thing that holds a value: a pool membership, an
// allocation, a quarantine or an ExpectedDpu reservation.
type AddressEntry struct {
	Kind             string  `json:"kind"`
	Pool             string  `json:"pool"`
	Value            string  `json:"value"`
	RangeID          string  `json:"range_id,omitempty"`
	AutoAssign       *bool   `json:"auto_assign,omitempty"`
	OwnerType        *string `json:"owner_type,omitempty"`
	OwnerID          *string `json:"owner_id,omitempty"`
	FormerOwnerType  *string `json:"former_owner_type,omitempty"`
	FormerOwnerID    *string `json:"former_owner_id,omitempty"`
	QuarantineReason *string `json:"quarantine_reason,omitempty"`
	// OwnerName names a machine owner (or former owner) as Allocation's
	// does.
	OwnerName         string `json:"owner_name,omitempty"`
	SerialNumber      string `json:"serial_number,omitempty"`
	ExpectedMachineID string `json:"expected_machine_id,omitempty"`
}

// AddressInfo is the answer of GET /api/v1/addresses/{value}.
type AddressInfo struct {
	Value   string         `json:"value"`
	Entries []AddressEntry `json:"entries"`
}

// LookupAddress finds every pool entry, allocation, quarantine and
// reservation that holds value, across all pools: an IPv4 or IPv6 address
// (IPv6 addresses also match the ipv6prefix block that contains them) or
// an integer. An address with its host prefix (/32, /128) is the plain
// address; another prefix length is 422 invalid (docs/api.md). A value
// that is none of these is 422 invalid; a value nothing holds answers
// with no entries.
func (a *Allocator) LookupAddress(ctx context.Context, value string) (*AddressInfo, error) {
	s := strings.TrimSpace(value)
	var (
		addr   netip.Addr
		isInt  bool
		intVal u128
	)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Zone() != "" || p.Addr().Is4In6() {
			return nil, fault.Errf(fault.CodeInvalid, "value", "%q is not an address or an integer", value)
		}
		if p.Bits() != p.Addr().BitLen() {
			return nil, fault.Errf(fault.CodeInvalid, "value", "%q: an address is looked up alone or with its host prefix (/32, /128), not a /%d; any address of an ipv6prefix block finds the block", value, p.Bits())
		}
		// A host prefix (/32, /128) is the plain address.
		addr = p.Addr()
	} else if v, err := parseInteger(s); err == nil {
		isInt, intVal = true, v
	} else {
		a2, err := parseAddr(s)
		if err != nil {
			return nil, fault.Errf(fault.CodeInvalid, "value", "%v", err)
		}
		addr = a2
	}
	var pools []models.Pool
	if err := a.read(ctx, func(db *gorm.DB) error { return db.Order("name").Find(&pools).Error }); err != nil {
		return nil, err
	}
	info := &AddressInfo{Value: s, Entries: []AddressEntry{}}
	for i := range pools {
		p := &pools[i]
		sp := spaceOf(p)
		var key u128
		switch {
		case isInt && sp.typ == TypeInteger:
			key = intVal
		case addr.IsValid() && addr.Is4() && sp.typ == TypeIPv4:
			key = fromAddr(addr)
		case addr.IsValid() && addr.Is6() && sp.typ == TypeIPv6:
			key = fromAddr(addr)
		case addr.IsValid() && addr.Is6() && sp.typ == TypeIPv6Prefix:
			key = fromAddr(netip.PrefixFrom(addr, sp.plen).Masked().Addr())
		default:
			continue
		}
		if err := a.lookupIn(ctx, p, sp, key, info); err != nil {
			return nil, err
		}
	}
	if addr.IsValid() {
		info.Value = addr.String()
	}
	return info, nil
}

func (a *Allocator) lookupIn(ctx context.Context, p *models.Pool, sp space, key u128, info *AddressInfo) error {
	k := key.key()
	val := sp.format(key)
	var ranges []models.PoolRange
	var allocs []models.Allocation
	var dpus []models.ExpectedDPU
	var named []Allocation
	err := a.read(ctx, func(db *gorm.DB) error {
		if err := db.Where("pool_id = ? AND first_key <= ? AND last_key >= ?", p.ID, k, k).Find(&ranges).Error; err != nil {
			return err
		}
		q := db.Where("pool_id = ? AND value_key = ?", p.ID, k)
		if a.hold > 0 {
			q = q.Where("(state <> ? OR quarantined_at > ?)", models.StateQuarantined, a.now().Add(-a.hold))
		}
		if err := q.Find(&allocs).Error; err != nil {
			return err
		}
		for i := range allocs {
			named = append(named, allocationOut(p.Name, &allocs[i]))
		}
		if err := nameOwners(db, named); err != nil {
			return err
		}
		if col := reservationColumn(p.Name); col != "" {
			return db.Where(col+" = ?", k).Find(&dpus).Error
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range ranges {
		auto := r.AutoAssign
		info.Entries = append(info.Entries, AddressEntry{Kind: "pool_member", Pool: p.Name, Value: val, RangeID: itoa(r.ID), AutoAssign: &auto})
	}
	for i, al := range allocs {
		e := AddressEntry{Kind: "allocation", Pool: p.Name, Value: al.Value, OwnerType: al.OwnerType, OwnerID: al.OwnerID, OwnerName: named[i].OwnerName}
		if al.State == models.StateQuarantined {
			e = AddressEntry{Kind: "quarantine", Pool: p.Name, Value: al.Value, FormerOwnerType: al.FormerOwnerType,
				FormerOwnerID: al.FormerOwnerID, QuarantineReason: al.QuarantineReason, OwnerName: named[i].OwnerName}
		}
		info.Entries = append(info.Entries, e)
	}
	for _, d := range dpus {
		info.Entries = append(info.Entries, AddressEntry{Kind: "reservation", Pool: p.Name, Value: val,
			SerialNumber: d.SerialNumber, ExpectedMachineID: d.ExpectedMachineID})
	}
	return nil
}
