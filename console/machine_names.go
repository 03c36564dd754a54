package console

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
)

// MachineNames returns the display name of each machine_id given (hosts by
// the host rule, DPUs by serial: allocator.MachineNamesOf); ids that are
// not machines are left out.
func (c *Console) MachineNames(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	err := c.read(ctx, func(db *gorm.DB) error {
		var err error
		out, _, err = allocator.MachineNamesOf(db, ids)
		return err
	})
	return out, err
}

// ExpectedMachineNames returns the display name of each ExpectedMachine id
// given (allocator.ExpectedMachineName); unknown ids are left out.
func (c *Console) ExpectedMachineNames(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	err := c.read(ctx, func(db *gorm.DB) error {
		for start := 0; start < len(ids); start += 500 {
			var rows []models.ExpectedMachine
			if err := db.Select("id", "bmc_mac_address", "metadata_name").Where("id IN ?", ids[start:min(start+500, len(ids))]).Find(&rows).Error; err != nil {
				return err
			}
			for _, r := range rows {
				out[r.ID] = allocator.ExpectedMachineName(r.MetadataName, r.BmcMacAddress)
			}
		}
		return nil
	})
	return out, err
}

// DeletedMachine is what is known of a deleted machine: the name it had,
// its kind, its host, when and by whom it was deleted (the names the
// allocator keeps in deleted_machines when it deletes a machine).
type DeletedMachine struct {
	MachineID, Kind, Name string
	HostMachineID         string
	HostName              string
	DeletedAt             time.Time
	DeletedBy             string
}

// GetDeletedMachine reads what is known of the deleted machine id; 404
// not_found when no machine of that id was ever deleted (or it exists).
func (c *Console) GetDeletedMachine(ctx context.Context, id string) (*DeletedMachine, error) {
	var out *DeletedMachine
	err := c.read(ctx, func(db *gorm.DB) error {
		var rows []models.DeletedMachine
		if err := db.Where("machine_id = ?", id).Limit(1).Find(&rows).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			return fault.Errf(fault.CodeNotFound, "", "machine %q does not exist and was never deleted", id)
		}
		r := rows[0]
		out = &DeletedMachine{MachineID: r.MachineID, Kind: r.Kind, Name: r.Name, HostMachineID: deref(r.HostMachineID),
			DeletedAt: r.DeletedAt.UTC(), DeletedBy: r.DeletedBy}
		if out.HostMachineID != "" {
			names, _, err := allocator.MachineNamesOf(db, []string{out.HostMachineID})
			if err != nil {
				return err
			}
			out.HostName = names[out.HostMachineID]
		}
		return nil
	})
	return out, err
}
