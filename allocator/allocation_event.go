package allocator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/models"
)

// actionAllocationCreate is the audit action of a new allocation, written
// by every allocation path: in Go (allocationCreateEvent) and in the SQL
// of the PostgreSQL group commit (allocationCreateSQL).
const actionAllocationCreate = "allocation.create"

// allocationCreateSQL is the action and object type of a new allocation's
// audit event as SQL literals, for the INSERTs that build the events in
// the statement.
const allocationCreateSQL = `'` + actionAllocationCreate + `', 'allocation'`

// allocationCreateEvent is the audit event of row, new in pool, made by
// ctx's actor at at: object pool/value, no before, the allocation as the
// API shows it after. Every allocation path builds its events here, so
// that the paths' events are equal field by field.
func allocationCreateEvent(ctx context.Context, at time.Time, pool string, row *models.Allocation) (models.AuditEvent, error) {
	return audit.NewRow(ctx, at, actionAllocationCreate, "allocation", pool+"/"+row.Value, nil, allocationOut(pool, row))
}

// splitAroundValue splits ev's after_json around the value of row, for a
// statement that chooses the value itself (the guessed group commit):
// pre + value + suf is the after_json of the value it chose.
func splitAroundValue(ev *models.AuditEvent, row *models.Allocation) (pre, suf string, err error) {
	aj := deref(ev.AfterJSON)
	mark := `"value":"` + row.Value + `"`
	i := strings.Index(aj, mark)
	if i < 0 {
		return "", "", fmt.Errorf("audit event of %s: no value in %s", row.Value, aj)
	}
	return aj[:i+len(`"value":"`)], aj[i+len(mark)-1:], nil
}
