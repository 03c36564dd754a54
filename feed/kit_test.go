package feed

import (
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/models/dbtest"
)

// proc is one server process of a test: its database handle, its
// allocator and its feed, wired as serve wires them.
type proc struct {
	db   *gorm.DB
	a    *allocator.Allocator
	feed *Feed
}

func newProc(db *gorm.DB) *proc {
	f := New(db, Options{})
	return &proc{db: db, a: allocator.New(db, allocator.Options{OnCommit: f.Committed}), feed: f}
}

func concurrencyURL(t *testing.T, d models.Dialect) string {
	if d == models.Postgres {
		return dbtest.NewPostgresURL(t)
	}
	return dbtest.NewSQLiteURL(t)
}

// processes opens n independent handles (own connection pools) on one
// database: the in-process picture of n server processes.
func processes(t *testing.T, u string, n int) []*proc {
	out := make([]*proc, n)
	for i := range out {
		var db *gorm.DB
		if i == 0 {
			db = dbtest.OpenURL(t, u)
		} else {
			var err error
			db, _, err = models.Open(u)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := db.DB()
			t.Cleanup(func() { s.Close() })
		}
		out[i] = newProc(db)
	}
	return out
}

func rng(first, last string, auto bool) allocator.RangeSpec {
	return allocator.RangeSpec{First: first, Last: last, AutoAssign: &auto}
}
