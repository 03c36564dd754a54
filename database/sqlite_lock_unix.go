//go:build unix

package database

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// A SQLite database's servers and its restore agree through an advisory
// lock on a file beside it (PATH.lock, PATH with its symlinks resolved):
// every process serving the database holds it shared for as long as it
// runs, a restore takes it exclusively.
// The kernel drops the lock when its process ends, kill -9 included, so a
// crashed server never blocks a restore. Without it a restore beside a
// running server would swap the file under the server, which would keep
// acknowledging writes into the replaced, deleted file: lost at its next
// start.

// ErrSQLiteInUse says another process holds the database's lock.
var ErrSQLiteInUse = errors.New("in use")

func sqliteLockPath(path string) string { return path + ".lock" }

func lockFile(path string, how int) (func(), error) {
	// The lock belongs to the file, not to one of its names: a symlink to
	// a served database takes the lock beside the real file.
	real, err := resolveSQLitePath(path)
	if err != nil {
		return nil, fmt.Errorf("lock file of database %q: %w", path, err)
	}
	f, err := os.OpenFile(sqliteLockPath(real), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock file of database %q: %w", path, err)
	}
	// The lock file has the database's owner (its directory's, for a new
	// file): one created by a restore run as root would be root's, 0644,
	// and the server's own user could not open it at its next start.
	if err := takeOwner(sqliteLockPath(real), real); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock file of database %q: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrSQLiteInUse
		}
		return nil, fmt.Errorf("lock database %q: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// HoldSQLite marks the SQLite database at path as served by this process
// until release is called. Several servers may hold it at once; it fails
// while a restore replaces the file.
func HoldSQLite(path string) (release func(), err error) {
	release, err = lockFile(path, syscall.LOCK_SH)
	if errors.Is(err, ErrSQLiteInUse) {
		return nil, fmt.Errorf("database %q is being restored: start the server when the restore has ended", path)
	}
	return release, err
}

// ClaimSQLite takes the database at path for a restore; it fails while
// any server holds it.
func ClaimSQLite(path string) (release func(), err error) {
	release, err = lockFile(path, syscall.LOCK_EX)
	if errors.Is(err, ErrSQLiteInUse) {
		return nil, fmt.Errorf("database %q is in use by a running ipledger server: stop every server using it, then restore", path)
	}
	return release, err
}
