package allocator

import (
	"context"
	"strings"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/models"
)

// SerialCaseDuplicates describes each DPU serial number that ExpectedMachines
// declare several times in different cases (MT5002X00001 and
// mt5002x00001): one DPU reserved twice, of which ingestion matches at
// most one spelling. Writes have refused them since migration 32, which
// kept those it found (docs/reservations.md); `ipledger migrate` and the
// start-up log list them, so that an operator removes all but one.
func (a *Allocator) SerialCaseDuplicates(ctx context.Context) ([]string, error) {
	type row struct {
		SerialNumber string
		models.ExpectedMachine
	}
	var rows []row
	err := a.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT d.serial_number, e.* FROM expected_dpus d JOIN expected_machines e ON e.id = d.expected_machine_id
			WHERE lower(d.serial_number) IN (SELECT lower(serial_number) FROM expected_dpus WHERE serial_case_duplicate)
			ORDER BY lower(d.serial_number), d.id`).Scan(&rows).Error
	})
	if err != nil {
		return nil, err
	}
	var out, by []string
	for i, r := range rows {
		by = append(by, r.SerialNumber+" by ExpectedMachine "+emLabelOf(&r.ExpectedMachine))
		if i+1 == len(rows) || serialKey(rows[i+1].SerialNumber) != serialKey(r.SerialNumber) {
			out = append(out, "DPU serial number "+rows[i+1-len(by)].SerialNumber+" is declared in several cases: "+strings.Join(by, ", "))
			by = nil
		}
	}
	return out, nil
}
