//go:build !unix

package database

// HoldSQLite has no advisory lock on this platform: stop the server
// before a restore.
func HoldSQLite(string) (func(), error) { return func() {}, nil }

func ClaimSQLite(string) (func(), error) { return func() {}, nil }
