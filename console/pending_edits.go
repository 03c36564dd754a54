package console

import (
	"context"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/models"

	"github.com/ipledger/ipledger/allocator"
)

// PendingLoopback is one family of an active DPU whose binding a proposed
// ExpectedMachine would leave `pending`: the DPU keeps Active (an edit
// never readdresses an ingested DPU) until its host is deleted and
// ingested again (allocator.PendingRemedy), when Proposed takes effect.
type PendingLoopback struct {
	// Index is the DPU's position in the spec's expected_dpus, Field the
	// JSON path of the reservation (expected_dpus[1].loopback_ip).
	Index     int
	Field     string
	Serial    string
	MachineID string
	Family    string
	Active    string
	Proposed  string
	// Already is set when the stored reservation is pending too (the edit
	// does not change that).
	Already bool
	Message string
}

// PendingLoopbacks says, for a proposed ExpectedMachine (id "" for a new
// one; the spec as a PUT would carry it), which of its DPUs are ingested
// and would have a binding in `pending` after the save: the binding rules
// of ListBindings applied to the proposed reservations and the DPUs'
// current network configs. Nothing is written. Reservations that do not
// parse are left to the validation; a spec without expected_dpus keeps
// the stored list, so it proposes no change.
func (c *Console) PendingLoopbacks(ctx context.Context, id string, spec allocator.ExpectedMachineSpec) ([]PendingLoopback, error) {
	out := []PendingLoopback{}
	if spec.ExpectedDPUs == nil {
		return out, nil
	}
	err := c.read(ctx, func(db *gorm.DB) error {
		for i, d := range *spec.ExpectedDPUs {
			serial := strings.TrimSpace(d.SerialNumber)
			if !ident.ValidSerial(serial) {
				continue
			}
			mid := allocator.DPUMachineID(serial)
			var ncs []models.NetworkConfig
			if err := db.Where("machine_id = ?", mid).Limit(1).Find(&ncs).Error; err != nil {
				return err
			}
			if len(ncs) == 0 {
				continue // not ingested: the reservation applies at ingestion
			}
			stored, err := allocator.ExpectedDPUBySerial(db, serial)
			if err != nil {
				return err
			}
			for _, f := range []struct {
				family, field    string
				active, proposed *string
				stored           *string
			}{
				{allocator.FamilyIPv4, "loopback_ip", ncs[0].LoopbackIP, canonicalOrNil(d.LoopbackIP), storedOf(stored, false)},
				{allocator.FamilyIPv6, "loopback_ip_v6", ncs[0].LoopbackIPv6, canonicalOrNil(d.LoopbackIPv6), storedOf(stored, true)},
			} {
				if f.proposed == nil && ipGiven(d, f.family) {
					continue // malformed: the validation says so
				}
				if allocator.BindingStatus(f.active, f.proposed, true) != allocator.BindingPending {
					continue
				}
				p := PendingLoopback{Index: i, Field: fmt.Sprintf("expected_dpus[%d].%s", i, f.field), Serial: serial, MachineID: mid,
					Family: f.family, Active: *f.active, Proposed: *f.proposed,
					Already: f.stored != nil && *f.stored == *f.proposed}
				p.Message = fmt.Sprintf("DPU %s is active with %s and keeps it: %s is reserved (binding pending). %s",
					serial, p.Active, p.Proposed, allocator.PendingRemedy)
				out = append(out, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ipGiven reports a non-empty reservation text of one family.
func ipGiven(d allocator.ExpectedDPU, family string) bool {
	v := d.LoopbackIP
	if family == allocator.FamilyIPv6 {
		v = d.LoopbackIPv6
	}
	return v != nil && strings.TrimSpace(*v) != ""
}

func canonicalOrNil(s *string) *string {
	if s == nil || strings.TrimSpace(*s) == "" {
		return nil
	}
	a, err := allocator.CanonicalAddress(*s)
	if err != nil {
		return nil
	}
	c := a.String()
	return &c
}

func storedOf(d *models.ExpectedDPU, v6 bool) *string {
	if d == nil {
		return nil
	}
	if v6 {
		return d.LoopbackIPv6
	}
	return d.LoopbackIP
}
