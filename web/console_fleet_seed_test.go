package web_test

import (
	"context"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/models"
)

// benchMachines is how many machines the fleet benchmark loads
// (IPLEDGER_BENCH_MACHINES, default 100,000): a third hosts, each with two
// DPUs.
func benchMachines() int {
	if s := os.Getenv("IPLEDGER_BENCH_MACHINES"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 30 {
			return n
		}
	}
	return 100_000
}

// fleetSite is what seedFleet loaded: enough to name pages to request.
type fleetSite struct {
	hosts, dpus int
	hostIDs     []string
	dpuIDs      []string
	emIDs       []string
	names       []string // host names, by host index ("" without an ExpectedMachine)
}

// seedFleet loads a site of n machines (n/3 hosts with two DPUs each) in
// the rows ingestion writes, set-based in batches of 2,000 rows, without the
// minutes n reports would take: pools lo-ip and lo-ip-v6, an
// ExpectedMachine for nine hosts in ten (named rackNNN-uNN, both DPUs
// declared), every DPU holding both loopbacks (a third reserved, the rest
// automatic) except a few pending (declared value differs from the active
// one) and conflicts (declared values held by no DPU), 20 quarantines, one
// machine.create audit event per machine and one allocation.create per
// loopback.
func seedFleet(b *testing.B, site *consoleSite, n int) *fleetSite {
	b.Helper()
	ctx := context.Background()
	auto := true
	for _, p := range []allocator.PoolSpec{
		{Name: allocator.PoolLoopbackV4, Type: "ipv4", Ranges: []allocator.RangeSpec{{First: "10.0.0.0", Last: "10.255.255.255", AutoAssign: &auto}}},
		{Name: allocator.PoolLoopbackV6, Type: "ipv6", Ranges: []allocator.RangeSpec{{First: "fd00::", Last: "fd00::ffff:ffff", AutoAssign: &auto}}},
	} {
		if _, err := site.a.CreatePool(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	db := site.a.DB()
	var pools []models.Pool
	if err := db.Order("name").Find(&pools).Error; err != nil {
		b.Fatal(err)
	}
	poolID := map[string]int64{}
	for _, p := range pools {
		poolID[p.Name] = p.ID
	}
	start := time.Now()
	now := time.Now().UTC()
	fs := &fleetSite{hosts: n / 3, dpus: 2 * (n / 3)}
	var (
		ems    []models.ExpectedMachine
		eds    []models.ExpectedDPU
		hosts  []models.Machine
		dpus   []models.Machine
		ncs    []models.NetworkConfig
		allocs []models.Allocation
		events []models.AuditEvent
	)
	v4 := func(i int) (string, string) {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		return a.String(), fmt.Sprintf("%032x", uint32(10<<24|i))
	}
	v6 := func(i int) (string, string) {
		x := new(big.Int).Lsh(big.NewInt(0xfd00), 112)
		x.Add(x, big.NewInt(int64(i)))
		var raw [16]byte
		x.FillBytes(raw[:])
		return netip.AddrFrom16(raw).String(), fmt.Sprintf("%032x", x)
	}
	str := func(s string) *string { return &s }
	owner := allocator.OwnerTypeMachine
	k := 0 // values held so far, contiguous from the bottom of each pool
	for h := 0; h < fs.hosts; h++ {
		mac := fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", h>>24&255, h>>16&255, h>>8&255, h&255)
		hid := allocator.HostMachineID(mac)
		fs.hostIDs = append(fs.hostIDs, hid)
		var emID *string
		name := ""
		if h%10 != 9 {
			name = fmt.Sprintf("rack%04d-u%02d", h/40, h%40)
			id := fmt.Sprintf("00000000-0000-4000-8000-%012x", h)
			emID = &id
			fs.emIDs = append(fs.emIDs, id)
			ems = append(ems, models.ExpectedMachine{ID: id, BmcMacAddress: mac, ChassisSerialNumber: fmt.Sprintf("CH%07d", h),
				FallbackDPUSerialNumbers: "[]", MetadataName: name, MetadataLabels: "[]", Version: 1, CreatedAt: now, UpdatedAt: now})
		}
		fs.names = append(fs.names, name)
		hosts = append(hosts, models.Machine{MachineID: hid, Kind: allocator.KindHost, State: allocator.StateReady, BmcMacAddress: str(mac),
			ChassisSerialNumber: fmt.Sprintf("CH%07d", h), ExpectedMachineID: emID, Version: 1, CreatedAt: now, UpdatedAt: now})
		events = append(events, models.AuditEvent{At: now, Actor: "site-explorer", Action: "machine.create", ObjectType: "machine", ObjectID: hid})
		for pos := 0; pos < 2; pos++ {
			d := 2*h + pos
			serial := fmt.Sprintf("MT%08d", d)
			did := allocator.DPUMachineID(serial)
			fs.dpuIDs = append(fs.dpuIDs, did)
			dpus = append(dpus, models.Machine{MachineID: did, Kind: allocator.KindDPU, HostMachineID: str(hid), State: allocator.StateReady,
				SerialNumber: str(serial), Version: 1, CreatedAt: now, UpdatedAt: now})
			events = append(events, models.AuditEvent{At: now, Actor: "site-explorer", Action: "machine.create", ObjectType: "machine", ObjectID: did})
			conflict := emID != nil && d%1000 == 5
			pending := emID != nil && d%500 == 2
			nc := models.NetworkConfig{MachineID: did, Version: 1, UpdatedAt: now}
			var ed *models.ExpectedDPU
			if emID != nil {
				ed = &models.ExpectedDPU{ExpectedMachineID: *emID, Position: pos, SerialNumber: serial}
			}
			if !conflict {
				a4, k4 := v4(k)
				a6, k6 := v6(k)
				k++
				nc.LoopbackIP, nc.LoopbackIPv6 = str(a4), str(a6)
				for _, x := range [][3]string{{allocator.PoolLoopbackV4, a4, k4}, {allocator.PoolLoopbackV6, a6, k6}} {
					allocs = append(allocs, models.Allocation{PoolID: poolID[x[0]], ValueKey: x[2], Value: x[1], State: models.StateAllocated,
						OwnerType: &owner, OwnerID: str(did), AllocatedAt: now})
					events = append(events, models.AuditEvent{At: now.AddDate(0, 0, -(d % 30)), Actor: "site-explorer", Action: "allocation.create",
						ObjectType: "allocation", ObjectID: x[0] + "/" + x[1]})
				}
				if ed != nil && d%3 == 0 {
					ed.LoopbackIP, ed.LoopbackIPKey, ed.LoopbackIPv6, ed.LoopbackIPv6Key = str(a4), str(k4), str(a6), str(k6)
				}
			}
			if pending || conflict {
				// A declared value no DPU holds, far above the held block.
				a4, k4 := v4(1<<23 + d)
				a6, k6 := v6(1<<31 + d)
				ed.LoopbackIP, ed.LoopbackIPKey, ed.LoopbackIPv6, ed.LoopbackIPv6Key = str(a4), str(k4), str(a6), str(k6)
			}
			ncs = append(ncs, nc)
			if ed != nil {
				eds = append(eds, *ed)
			}
		}
	}
	for i := range allocs {
		allocs[i].RunEnd = i >= len(allocs)-2 // the last value of each pool ends the run
	}
	for q := 0; q < 20; q++ {
		a4, k4 := v4(1<<22 + q)
		at := now
		allocs = append(allocs, models.Allocation{PoolID: poolID[allocator.PoolLoopbackV4], ValueKey: k4, Value: a4, State: models.StateQuarantined,
			RunEnd: q == 19, AllocatedAt: now, QuarantineReason: str("bench: returned hardware"), FormerOwnerType: &owner,
			FormerOwnerID: str(fmt.Sprintf("former-%d", q)), QuarantinedAt: &at})
	}
	err := db.Transaction(func(tx *gorm.DB) error {
		for _, rows := range []any{&ems, &eds, &hosts, &dpus, &ncs, &allocs, &events} {
			if err := tx.CreateInBatches(rows, 2000).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if models.DialectOf(db) == models.Postgres {
		if err := db.Exec(`VACUUM ANALYZE`).Error; err != nil {
			b.Fatal(err)
		}
	} else if err := db.Exec(`ANALYZE`).Error; err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d hosts, %d DPUs, %d allocations, %d audit events in %s", len(hosts), len(dpus), len(allocs), len(events), time.Since(start).Round(time.Millisecond))
	return fs
}
