package allocator

import (
	"context"

	"gorm.io/gorm/clause"

	"github.com/ipledger/ipledger/models"
)

// DeleteAllExpectedMachines removes every ExpectedMachine and its
// ExpectedDpu reservations in one transaction (the admin's erase: REST
// DELETE /api/v1/expected-machines, gRPC DeleteAllExpectedMachines, the
// CLI's `expected-machine erase --confirm`). It is replace-all with an
// empty list: each record gets its own delete event, then one
// expected_machine.delete_all event counts them. Active DPUs keep their
// values; their bindings become automatic. It
// returns how many records were deleted.
func (a *Allocator) DeleteAllExpectedMachines(ctx context.Context) (int, error) {
	deleted := 0
	err := a.write(ctx, func(t *tx) error {
		deleted = 0
		if err := t.prepareEM(); err != nil {
			return err
		}
		var stored []models.ExpectedMachine
		q := t.DB
		if t.a.dialect == models.Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		if err := q.Order("bmc_mac_address").Find(&stored).Error; err != nil {
			return err
		}
		for i := range stored {
			if err := t.deleteEM(&stored[i]); err != nil {
				return err
			}
			deleted++
		}
		return t.audit("expected_machine.delete_all", "expected_machine", "*", nil, map[string]int{"deleted": deleted})
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}
