package webhook

import (
	"fmt"
	"slices"

	"github.com/ipledger/ipledger/kernel"
	"github.com/ipledger/ipledger/models"
)

// checkPoolsExist refuses a pool filter naming a pool that does not
// exist (422 invalid, field pools[i]): a misspelt name would leave a
// webhook that never fires. Names already in the stored filter (kept)
// are not looked up again, so a webhook whose pool has gone since can
// still be edited without touching its filter (docs/decisions.md,
// "A webhook's pool filter"). It runs in the writing transaction.
func checkPoolsExist(t *kernel.Tx, pools, kept []string) error {
	var check []string
	for _, p := range pools {
		if !slices.Contains(kept, p) {
			check = append(check, p)
		}
	}
	if len(check) == 0 {
		return nil
	}
	var found []string
	if err := t.Model(&models.Pool{}).Where("name IN ?", check).Pluck("name", &found).Error; err != nil {
		return err
	}
	for i, p := range pools {
		if !slices.Contains(kept, p) && !slices.Contains(found, p) {
			f := fmt.Sprintf("pools[%d]", i)
			return kernel.Errf(kernel.CodeInvalid, f, "%s %q: no pool of that name exists", f, p)
		}
	}
	return nil
}
