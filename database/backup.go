package database

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ipledger/ipledger/models"
	"gorm.io/gorm"
)

// Backups of the embedded SQLite file
// (docs/operations.md "Backup, restore and check").
// PostgreSQL is backed up with its own tools (pg_dump, continuous
// archiving); ipledger does not wrap them: they must match the server's
// major version and the site's archive settings, which only the site knows.

// ErrPostgresBackup is returned by Backup and Restore for PostgreSQL.
var ErrPostgresBackup = errors.New("a PostgreSQL database is backed up and restored with PostgreSQL's own tools " +
	"(pg_dump --format=custom and pg_restore, or continuous archiving for point-in-time recovery): " +
	"see docs/operations.md \"PostgreSQL: pg_dump, or continuous archiving for point-in-time recovery\"; run `ipledger check` on the restored database")

// Backup writes a consistent copy of the SQLite database behind db to path
// while other connections and processes keep writing: VACUUM INTO reads
// one snapshot (a read transaction, which in WAL mode never blocks a
// writer) and writes a compact, self-contained file. The copy goes to a
// temporary name beside path, is checked (integrity_check, a readable
// schema version) and synced, then renamed: path is either absent or a
// complete backup. path must not exist.
func Backup(ctx context.Context, db *gorm.DB, path string) (schemaVersion int, err error) {
	if models.DialectOf(db) != models.SQLite {
		return 0, ErrPostgresBackup
	}
	if _, err := os.Stat(path); err == nil {
		return 0, fmt.Errorf("backup file %q exists: choose a new name", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	tmp := path + ".partial"
	_ = os.Remove(tmp)
	defer os.Remove(tmp)
	// VACUUM INTO writes into an empty file as into a new one and keeps
	// its mode: the backup holds secrets (webhook secrets), so it is
	// created readable by its owner alone, whatever the umask.
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		return 0, err
	}
	if f, _ := ctx.Value(beforeCopyKey{}).(func(string) error); f != nil {
		if err := f(tmp); err != nil {
			return 0, err
		}
	}
	if err := db.WithContext(ctx).Exec(`VACUUM INTO ?`, tmp).Error; err != nil {
		return 0, fmt.Errorf("copy the database: %w", err)
	}
	v, err := VerifySQLiteFile(tmp)
	if err != nil {
		return 0, fmt.Errorf("the copy does not verify: %w", err)
	}
	if err := syncFile(tmp); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, err
	}
	return v, syncDir(filepath.Dir(path))
}

type beforeCopyKey struct{}

// WithBeforeCopy returns ctx carrying f, which Backup calls with the name
// of the copy, created empty, just before the copy starts. The backup
// drill (cmd/ipledger) takes a write lock on that file there: VACUUM INTO
// reads its snapshot of the database, then waits for the lock to write the
// copy, so the drill's writers land writes while the copy is taken.
func WithBeforeCopy(ctx context.Context, f func(partial string) error) context.Context {
	return context.WithValue(ctx, beforeCopyKey{}, f)
}

// VerifySQLiteFile opens an SQLite file read-only, runs its integrity
// check and returns the ipledger schema version it holds.
func VerifySQLiteFile(path string) (int, error) {
	if _, err := os.Stat(path); err != nil {
		return 0, err
	}
	db, _, err := OpenTarget(sqliteReadOnly(path))
	if err != nil {
		return 0, err
	}
	if s, e := db.DB(); e == nil {
		defer s.Close()
	}
	if err := integrityCheck(db, path); err != nil {
		return 0, err
	}
	var v int
	if err := db.Raw(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v).Error; err != nil {
		return 0, fmt.Errorf("%q is not an ipledger database: %w", path, err)
	}
	if v > models.SchemaVersion() {
		return v, fmt.Errorf("%q holds schema version %d, newer than this build's %d: restore it with the release that wrote it", path, v, models.SchemaVersion())
	}
	return v, nil
}

// CheckSQLiteIntegrity runs SQLite's own integrity check (every page, every
// index against its table) on the file at path, opened read-only. The
// consistency check of ipledger's rows reads only what its rules need, so
// a damaged page elsewhere (an index, a table no rule reads) is found here.
func CheckSQLiteIntegrity(path string) error {
	db, _, err := OpenTarget(sqliteReadOnly(path))
	if err != nil {
		return err
	}
	if s, e := db.DB(); e == nil {
		defer s.Close()
	}
	return integrityCheck(db, path)
}

func integrityCheck(db *gorm.DB, path string) error {
	var res []string
	if err := db.Raw(`PRAGMA integrity_check`).Scan(&res).Error; err != nil {
		return fmt.Errorf("integrity check of %q: %w", path, err)
	}
	if len(res) != 1 || res[0] != "ok" {
		return fmt.Errorf("integrity check of %q: %v", path, res)
	}
	return nil
}

// ErrBadBackup is wrapped by Restore's error when the file to restore is
// not a readable, intact ipledger SQLite database; nothing was changed.
var ErrBadBackup = errors.New("not a usable backup")

// Restore puts the SQLite backup from in place of the database to. It
// refuses a target that holds any table unless force is set, and a target
// that a running server holds (see HoldSQLite) even with force, and the
// target itself as the backup. The backup is verified, then copied beside
// the target through SQLite (VACUUM INTO), never byte for byte: a raw copy
// of a live database (a volume snapshot: FILE, FILE-wal, FILE-shm) holds
// committed transactions in its WAL that a copy of the main file alone
// would drop, while SQLite applies them when it reads the file. The copy
// is verified and synced, the target's WAL and shared-memory files are
// removed (a stale WAL would be replayed over the restored file), and the
// copy is renamed over the target.
func Restore(from string, to Target, force bool) (schemaVersion int, err error) {
	if to.Dialect != models.SQLite {
		return 0, ErrPostgresBackup
	}
	// Work on the file itself: a symlink's path would take a lock of its
	// own, beside the one a server holds on the real path, and the rename
	// would replace the link instead of the database.
	p, err := resolveSQLitePath(to.Path)
	if err != nil {
		return 0, err
	}
	to.Path = p
	// The database restored over itself: the copy would take the main
	// file alone, and removing the WAL would drop what it still holds.
	if a, err := os.Stat(from); err == nil {
		if b, err := os.Stat(to.Path); err == nil && os.SameFile(a, b) {
			return 0, fmt.Errorf("%w: %q is the database being restored", ErrBadBackup, from)
		}
	}
	v, err := VerifySQLiteFile(from)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadBackup, err)
	}
	release, err := ClaimSQLite(to.Path)
	if err != nil {
		return 0, err
	}
	defer release()
	n, err := sqliteTables(to)
	if err != nil {
		return 0, err
	}
	if n > 0 && !force {
		return 0, fmt.Errorf("database %q is not empty (%d tables): stop the server using it and restore with --force to replace it", to.Path, n)
	}
	tmp := to.Path + ".restore"
	if err := copySQLite(from, tmp); err != nil {
		os.Remove(tmp)
		return 0, err
	}
	if err := takeOwner(tmp, to.Path); err != nil {
		os.Remove(tmp)
		return 0, err
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if err := os.Remove(to.Path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			os.Remove(tmp)
			return 0, err
		}
	}
	if err := os.Rename(tmp, to.Path); err != nil {
		os.Remove(tmp)
		return 0, err
	}
	return v, syncDir(filepath.Dir(to.Path))
}

// resolveSQLitePath returns path with its symlinks resolved; for a file
// that does not exist yet, its directory's.
func resolveSQLitePath(path string) (string, error) {
	r, err := filepath.EvalSymlinks(path)
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.Base(path)), nil
}

// sqliteTables counts the tables of the SQLite file of t (0 when the file
// is absent or empty).
func sqliteTables(t Target) (int, error) {
	st, err := os.Stat(t.Path)
	if errors.Is(err, os.ErrNotExist) || (err == nil && st.Size() == 0) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	db, _, err := OpenTarget(sqliteReadOnly(t.Path))
	if err != nil {
		return 0, err
	}
	if s, e := db.DB(); e == nil {
		defer s.Close()
	}
	var n int
	err = db.Raw(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'`).Scan(&n).Error
	return n, err
}

// sqliteReadOnly opens a file read-only, without the pragmas that write
// (journal_mode) or the immediate transactions of a server's handle.
func sqliteReadOnly(path string) Target {
	esc := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
	return Target{Dialect: models.SQLite, DSN: "file:" + esc + "?mode=ro&_pragma=busy_timeout(10000)", Path: path}
}

// takeOwner gives the restored copy (or the lock file) at tmp the owner
// of the file it replaces (or, for a new file, of its directory). A
// restore is run as root while the server runs as a user of its own (the
// systemd unit's dynamic user, the image's uid 65532): a copy left owned
// by root would keep the server from opening its database at the next
// start.
func takeOwner(tmp, target string) error {
	ref, err := os.Stat(target)
	if errors.Is(err, os.ErrNotExist) {
		ref, err = os.Stat(filepath.Dir(target))
	}
	if err != nil {
		return err
	}
	uid, gid, ok := fileOwner(ref)
	if !ok || (uid == os.Geteuid() && gid == os.Getegid()) {
		return nil
	}
	if err := os.Chown(tmp, uid, gid); err != nil && os.Geteuid() == 0 {
		return fmt.Errorf("give %q the owner of %q (uid %d, gid %d): %w", tmp, target, uid, gid, err)
	}
	return nil
}

// copySQLite writes a self-contained image of the SQLite database at from
// (its main file with whatever its WAL holds) to to, verified and synced.
func copySQLite(from, to string) error {
	if err := os.Remove(to); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	// VACUUM INTO writes into an empty file as into a new one, and keeps
	// its mode: the database holds secrets.
	if err := os.WriteFile(to, nil, 0o600); err != nil {
		return err
	}
	db, _, err := OpenTarget(sqliteReadOnly(from))
	if err != nil {
		return err
	}
	if s, e := db.DB(); e == nil {
		defer s.Close()
	}
	if err := db.Exec(`VACUUM INTO ?`, to).Error; err != nil {
		return fmt.Errorf("copy %q: %w", from, err)
	}
	if _, err := VerifySQLiteFile(to); err != nil {
		return fmt.Errorf("the copy of %q does not verify: %w", from, err)
	}
	return syncFile(to)
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	_ = d.Sync() // not every filesystem syncs a directory
	return nil
}
