package webhook

import (
	"fmt"
	"slices"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/txn"
)

// checkPoolsExist refuses a pool filter naming a pool that does not
// exist (422 invalid, field pools[i]): a misspelt name would leave a
// webhook that never fires. Names already in the stored filter (kept)
// are not looked up again, so a webhook whose pool has gone since can
// still be edited without touching its filter (docs/decisions.md,
// "A webhook's pool filter names existing pools"). It runs in the writing
// transaction.
func checkPoolsExist(t *txn.Tx, pools, kept []string) error {
	known := map[string]bool{}
	for _, p := range kept {
		known[p] = true
	}
	var check []string
	for _, p := range pools {
		if !known[p] {
			check = append(check, p)
		}
	}
	// In batches: a statement takes at most 32,766 parameters on SQLite
	// and 65,535 on PostgreSQL, and the filter's length is not bounded.
	for chunk := range slices.Chunk(check, 1000) {
		var found []string
		if err := t.Model(&models.Pool{}).Where("name IN ?", chunk).Pluck("name", &found).Error; err != nil {
			return err
		}
		for _, p := range found {
			known[p] = true
		}
	}
	for i, p := range pools {
		if !known[p] {
			f := fmt.Sprintf("pools[%d]", i)
			return fault.Errf(fault.CodeInvalid, f, "%s %q: no pool of that name exists", f, p)
		}
	}
	return nil
}
