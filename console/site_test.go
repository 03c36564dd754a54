package console

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/internal/testkit/sitekit"
)

// site is a database with the two loopback pools, the allocator writing
// it and the read models over it.
type site struct {
	t   *testing.T
	db  *gorm.DB
	a   *allocator.Allocator
	c   *Console
	ctx context.Context
}

type siteOpts struct {
	autoV4 [2]string
}

// newSite builds a site: lo-ip auto 10.0.0.1..10.0.0.9 (or opts.autoV4)
// and explicit 10.0.0.100..10.0.0.199; lo-ip-v6 auto fd00::1..fd00::ff and
// explicit fd00:1::1..fd00:1::ff.
func newSite(t *testing.T, db *gorm.DB, o siteOpts) *site {
	t.Helper()
	a := allocator.New(db, allocator.Options{})
	s := &site{t: t, db: db, a: a, c: New(a, db), ctx: audit.WithActor(context.Background(), "test", "req-console")}
	auto := o.autoV4
	if auto[0] == "" {
		auto = [2]string{"10.0.0.1", "10.0.0.9"}
	}
	s.pool(allocator.PoolLoopbackV4, "ipv4", sitekit.Range(auto[0], auto[1], true), sitekit.Range("10.0.0.100", "10.0.0.199", false))
	s.pool(allocator.PoolLoopbackV6, "ipv6", sitekit.Range("fd00::1", "fd00::ff", true), sitekit.Range("fd00:1::1", "fd00:1::ff", false))
	return s
}

// siteEach runs fn on a fresh site on SQLite and on PostgreSQL.
func siteEach(t *testing.T, o siteOpts, fn func(t *testing.T, s *site)) {
	t.Helper()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) { fn(t, newSite(t, db, o)) })
}

func (s *site) pool(name, typ string, ranges ...allocator.RangeSpec) {
	s.t.Helper()
	if _, err := s.a.CreatePool(s.ctx, allocator.PoolSpec{Name: name, Type: typ, Ranges: ranges}); err != nil {
		s.t.Fatalf("create pool %s: %v", name, err)
	}
}

// report ingests a host with the DPUs serials.
func (s *site) report(mac string, serials ...string) *allocator.IngestResult {
	s.t.Helper()
	spec := allocator.ReportSpec{BmcMacAddress: mac, ChassisSerialNumber: "CHS-" + mac}
	for _, x := range serials {
		spec.DPUs = append(spec.DPUs, allocator.ReportDPU{SerialNumber: x})
	}
	res, err := s.a.Report(s.ctx, spec)
	if err != nil {
		s.t.Fatalf("report %s %v: %v", mac, serials, err)
	}
	return res
}

// heldBy returns the value owner holds in pool ("" when none).
func (s *site) heldBy(pool, owner string) string {
	s.t.Helper()
	var vals []string
	if err := s.db.Raw(`SELECT a.value FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = ? AND a.state = 'allocated' AND a.owner_type = 'machine' AND a.owner_id = ?`,
		pool, owner).Scan(&vals).Error; err != nil {
		s.t.Fatal(err)
	}
	if len(vals) > 1 {
		s.t.Fatalf("%s holds %d values in %s", owner, len(vals), pool)
	}
	if len(vals) == 0 {
		return ""
	}
	return vals[0]
}

func (s *site) binding(serial string) allocator.Binding {
	s.t.Helper()
	b, err := s.a.GetBinding(s.ctx, serial)
	if err != nil {
		s.t.Fatalf("binding of %s: %v", serial, err)
	}
	return *b
}

func (s *site) decommission(id string) {
	s.t.Helper()
	if _, err := s.a.Decommission(s.ctx, id); err != nil {
		s.t.Fatalf("decommission %s: %v", id, err)
	}
}

func (s *site) delete(id string, force bool) {
	s.t.Helper()
	if _, err := s.a.DeleteMachine(s.ctx, id, force); err != nil {
		s.t.Fatalf("delete %s (force %v): %v", id, force, err)
	}
}
