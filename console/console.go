// Package console holds the operator console's read models: the header
// search, the wallboard's fleet summary, the machine page, the pending-edit
// warnings of the ExpectedMachine form, the quarantine list and the hosts
// listed by name. Each reads the database with txn.Read and derives
// what only the domain can say (names, bindings, lapsed quarantines,
// machine rendering) through the allocator's read API; nothing here
// writes, and the allocator never imports this package.
package console

import (
	"context"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/txn"
)

// Console serves the console's read models over one allocator and the
// database it writes.
type Console struct {
	a  *allocator.Allocator
	db *gorm.DB
}

// New returns the read models that read db, the database of a.
func New(a *allocator.Allocator, db *gorm.DB) *Console { return &Console{a: a, db: db} }

// read runs fn with a read-only handle, mapping database errors.
func (c *Console) read(ctx context.Context, fn func(db *gorm.DB) error) error {
	return txn.Read(ctx, c.db, fn)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// clampLimit is a list's page size: 100 by default, at most 1000.
func clampLimit(n int) int {
	if n <= 0 {
		return 100
	}
	return min(n, 1000)
}
