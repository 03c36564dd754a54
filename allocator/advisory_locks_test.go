package allocator

// The advisory locks on PostgreSQL (models/advisory.go): a schema's
// writers take them in one order, so a pool file's load and a pool's
// creation never deadlock; and they are the schema's, so writers of one
// schema never wait for another schema of the same database (each test
// has its own schema, and a reservation made in one once died of a
// deadlock among the locks of others).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/models"
)

// lockActor is one handle of its own on a schema, named in
// pg_stat_activity so that a test can see it wait for a lock.
type lockActor struct {
	t   *testing.T
	db  *gorm.DB
	app string
}

// lockActors opens a handle per name on the schema at u (the first one
// migrates it), each with an application name of its own.
func lockActors(t *testing.T, u string, names ...string) map[string]*lockActor {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	out := map[string]*lockActor{}
	for i, n := range names {
		app := "lock-" + hex.EncodeToString(b[:]) + "-" + n
		au := u + "&application_name=" + app
		var db *gorm.DB
		if i == 0 {
			db = dbtest.OpenURL(t, au)
		} else {
			db = dbtest.Handles(t, au, 2)[1]
		}
		out[n] = &lockActor{t: t, db: db, app: app}
	}
	return out
}

// waiting tells whether a connection of the actor waits for a lock.
func (l *lockActor) waiting() bool {
	l.t.Helper()
	var n int64
	if err := l.db.Raw(`SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = ? AND wait_event_type = 'Lock'`, l.app).
		Scan(&n).Error; err != nil {
		l.t.Fatal(err)
	}
	return n > 0
}

// start runs fn in a goroutine and returns its error channel once fn has
// ended or waits for a lock, telling which.
func (l *lockActor) start(fn func() error) (<-chan error, bool) {
	l.t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	for {
		select {
		case err := <-done:
			done <- err
			return done, false
		default:
		}
		if l.waiting() {
			return done, true
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// holdReservation opens a transaction on the actor's schema that declares
// a reservation (the expected_dpus triggers take the reserved lock
// shared), uncommitted.
func (l *lockActor) holdReservation() *gorm.DB {
	l.t.Helper()
	if err := l.db.Exec(`INSERT INTO expected_machines (id, bmc_mac_address, created_at, updated_at) VALUES ('em-hold', '02:00:00:00:0f:01', now(), now())`).Error; err != nil {
		l.t.Fatal(err)
	}
	tx := l.db.Begin()
	if err := tx.Exec(`INSERT INTO expected_dpus (expected_machine_id, position, serial_number, loopback_ip, loopback_ip_key) VALUES ('em-hold', 0, 'HOLD', '10.0.0.150', ?)`,
		*lcKey("10.0.0.150")).Error; err != nil {
		tx.Rollback()
		l.t.Fatal(err)
	}
	return tx
}

// lockTestPools are a pool file's two reservation pools.
var lockTestPools = []PoolSpec{
	{Name: PoolLoopbackV4, Type: "ipv4", Ranges: []RangeSpec{rng("10.0.0.100", "10.0.0.199", false)}},
	{Name: PoolLoopbackV6, Type: "ipv6", Ranges: []RangeSpec{rng("fd00:1::1", "fd00:1::ff", false)}},
}

// A pool file's load creating lo-ip then lo-ip-v6 and a creation of
// lo-ip-v6, both waiting for the reserved lock: once it is free, the load
// goes on to lo-ip-v6. Had the creation taken the ipv6 family's lock
// before the load (the load taking it only after lo-ip's range took the
// reserved lock), each would hold what the other waits for, and
// PostgreSQL would kill one of them (a deadlock, which the allocator
// retries). No write may run twice.
func TestPoolLoadAndCreateTakeLocksInOneOrderOnPostgres(t *testing.T) {
	t.Parallel()
	u := dbtest.NewPostgresURL(t)
	act := lockActors(t, u, "hold", "load", "create")
	ctx := audit.WithActor(context.Background(), "test", "req-lock")
	var retries atomic.Int64
	load, create := New(act["load"].db, Options{}), New(act["create"].db, Options{})
	load.testOnRetry = func() { retries.Add(1) }
	create.testOnRetry = load.testOnRetry

	hold := act["hold"].holdReservation()
	loaded, waits := act["load"].start(func() error { _, err := load.LoadPools(ctx, lockTestPools); return err })
	if !waits {
		hold.Rollback()
		t.Fatalf("the load did not wait for the reservation's lock: %v", <-loaded)
	}
	created, waits := act["create"].start(func() error {
		_, err := create.CreatePool(ctx, PoolSpec{Name: PoolLoopbackV6, Type: "ipv6", Ranges: []RangeSpec{rng("fd00::1", "fd00::ff", true)}})
		return err
	})
	if !waits {
		hold.Rollback()
		t.Fatalf("the creation did not wait for the load: %v", <-created)
	}
	if err := hold.Commit().Error; err != nil {
		t.Fatal(err)
	}
	if err := <-loaded; err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := <-created; err != nil {
		if e, ok := fault.AsError(err); !ok || e.Code != fault.CodeConflict {
			t.Fatalf("create: %v", err)
		}
	}
	if n := retries.Load(); n > 0 {
		t.Fatalf("%d writes ran again: the load and the creation deadlocked", n)
	}
	requireCountsTruth(t, act["hold"].db, "after the load and the creation")
}

// While one schema's load waits for its reserved lock, holding its family
// locks, and a transaction holds its reserved, migrations' and feed's
// locks, the writes of another schema of the same database take every
// lock too and never wait: a reservation declared in SQL (the reserved
// lock shared, which PostgreSQL would queue behind the load's exclusive
// request), ranges added to both reservation pools, a pool file's load,
// a migration and a feed pass.
func TestAdvisoryLocksStayInTheirSchemaOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := audit.WithActor(context.Background(), "test", "req-lock")
	one := lockActors(t, dbtest.NewPostgresURL(t), "hold", "load")
	other := lockActors(t, dbtest.NewPostgresURL(t), "writer")["writer"]
	b := New(other.db, Options{})
	for _, p := range lockTestPools {
		if _, err := b.CreatePool(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.db.Exec(`INSERT INTO expected_machines (id, bmc_mac_address, created_at, updated_at) VALUES ('em-b', '02:00:00:00:0f:02', now(), now())`).Error; err != nil {
		t.Fatal(err)
	}

	hold := one["hold"].holdReservation()
	for _, c := range []models.LockClass{models.LockMigrate, models.LockFeed} {
		if err := models.LockSchema(hold, c); err != nil {
			hold.Rollback()
			t.Fatal(err)
		}
	}
	loaded, waits := one["load"].start(func() error { _, err := New(one["load"].db, Options{}).LoadPools(ctx, lockTestPools); return err })
	if !waits {
		hold.Rollback()
		t.Fatalf("the load did not wait for the reservation's lock: %v", <-loaded)
	}

	steps := []struct {
		name string
		fn   func() error
	}{
		{"reservation in SQL", func() error {
			return other.db.Exec(`INSERT INTO expected_dpus (expected_machine_id, position, serial_number, loopback_ip, loopback_ip_key, loopback_ip_v6, loopback_ip_v6_key)
				VALUES ('em-b', 0, 'B1', '10.0.0.160', ?, 'fd00:1::60', ?)`, *lcKey("10.0.0.160"), *lcKey("fd00:1::60")).Error
		}},
		{"range added to lo-ip", func() error {
			_, err := b.AddRange(ctx, PoolLoopbackV4, rng("10.0.1.0", "10.0.1.9", false))
			return err
		}},
		{"range added to lo-ip-v6", func() error {
			_, err := b.AddRange(ctx, PoolLoopbackV6, rng("fd00:2::1", "fd00:2::f", false))
			return err
		}},
		{"pool file loaded", func() error {
			_, err := b.LoadPools(ctx, append(lockTestPools, PoolSpec{Name: "vips", Type: "ipv4", Ranges: []RangeSpec{rng("192.0.2.1", "192.0.2.9", true)}}))
			return err
		}},
		{"migration", func() error { return models.Migrate(other.db) }},
		{"feed pass", func() error { _, err := feed.New(other.db, feed.Options{}).SequenceOnce(ctx); return err }},
	}
	failed := ""
	for _, s := range steps {
		done, waits := other.start(s.fn)
		if waits {
			failed = s.name
			hold.Rollback()
			<-done
			break
		}
		if err := <-done; err != nil {
			hold.Rollback()
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	if failed != "" {
		<-loaded
		t.Fatalf("%s in one schema waited for the locks of another schema", failed)
	}
	if err := hold.Commit().Error; err != nil {
		t.Fatal(err)
	}
	if err := <-loaded; err != nil && !database.IsRetryable(err) {
		t.Fatalf("load: %v", err)
	}
	requireCountsTruth(t, other.db, "after the other schema's writes")
}
