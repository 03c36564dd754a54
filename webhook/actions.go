package webhook

import (
	"strings"

	"github.com/ipledger/ipledger/fault"
)

// eventActions are the actions ipledger writes to its audit log, so the
// events a webhook can be sent. A webhook's action filter must match at
// least one of them: "allocate" or "allocation" (meant as allocation.*)
// would otherwise be stored and silently never fire. A new audited action
// is added here.
var eventActions = []string{
	"allocation.create", "allocation.quarantine", "allocation.quarantine_expired",
	"allocation.reclaim", "allocation.release", "allocation.unquarantine",
	"expected_machine.create", "expected_machine.delete", "expected_machine.delete_all",
	"expected_machine.import", "expected_machine.replace_all", "expected_machine.update",
	"machine.create", "machine.decommission", "machine.delete", "machine.force_delete", "machine.update",
	"network_config.update",
	"pool.create", "pool.range.add", "pool.range.remove", "pool.range.update",
	"session.end", "session.open",
	"token.create", "token.delete",
	"webhook.create", "webhook.delete", "webhook.redeliver", "webhook.update",
}

// checkActionMatches refuses an action filter (already well formed) that
// no event ipledger writes can match, naming the field and the value.
func checkActionMatches(field, s string) error {
	if s == "*" {
		return nil
	}
	prefix, isPrefix := strings.CutSuffix(s, "*")
	for _, a := range eventActions {
		if a == s || (isPrefix && strings.HasPrefix(a, prefix)) {
			return nil
		}
	}
	return fault.Errf(fault.CodeInvalid, field, "%s %q matches no event ipledger writes: use an action such as allocation.create, a prefix such as allocation.* or *", field, s)
}
