package auth

import (
	"context"
	"strings"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/txn"
)

// SignedOutAtProxy writes the sign-out of a person the trusted proxy
// signed in (actor user:NAME), whom the console is sending to the proxy's
// sign-out (IPLEDGER_AUTH_PROXY_LOGOUT_URL): session.end, by the person,
// as a console session's sign-out is. ipledger keeps no session of theirs
// to delete; the proxy ends its own.
func (p *People) SignedOutAtProxy(ctx context.Context, actor string, role Role) error {
	name := strings.TrimPrefix(actor, "user:")
	return p.Service.write(actedBy(ctx, actor, string(role)), func(t *txn.Tx) error {
		return audit.Record(t, "session.end", "session", actor, map[string]any{"user": name, "role": role, "via": "proxy", "reason": "signed out through the proxy"}, nil)
	})
}
