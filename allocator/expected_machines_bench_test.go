package allocator

import (
	"context"
	"fmt"
	"testing"

	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// emBenchAllocator is an allocator over a fresh database with wide
// loopback pools whose explicit ranges hold every reservation below.
func emBenchAllocator(b *testing.B, d models.Dialect) (*Allocator, context.Context) {
	b.Helper()
	a := New(dbtest.Open(b, d), Options{})
	ctx := audit.WithActor(context.Background(), "bench", "")
	for _, spec := range []PoolSpec{
		{Name: PoolLoopbackV4, Type: "ipv4", Ranges: []RangeSpec{rng("10.0.0.0", "10.0.255.255", true), rng("10.1.0.0", "10.1.255.255", false)}},
		{Name: PoolLoopbackV6, Type: "ipv6", Ranges: []RangeSpec{rng("fd00::", "fd00::ffff", true), rng("fd00:1::", "fd00:1::ffff", false)}},
	} {
		if _, err := a.CreatePool(ctx, spec); err != nil {
			b.Fatal(err)
		}
	}
	return a, ctx
}

// emBenchFile is n records of two DPUs each, both reserved in both
// families; shift moves every reservation to the next record.
func emBenchFile(n, shift int) []ExpectedMachineSpec {
	specs := make([]ExpectedMachineSpec, n)
	for i := range specs {
		j := (i + shift) % n
		v4a, v4b := fmt.Sprintf("10.1.%d.%d", (2*j)/256, (2*j)%256), fmt.Sprintf("10.1.%d.%d", (2*j+1)/256, (2*j+1)%256)
		v6a, v6b := fmt.Sprintf("fd00:1::%x", 2*j), fmt.Sprintf("fd00:1::%x", 2*j+1)
		specs[i] = ExpectedMachineSpec{BmcMacAddress: fmt.Sprintf("0a:00:00:00:%02x:%02x", i/256, i%256), BmcUsername: "admin",
			BmcPassword: sp("pw"), ChassisSerialNumber: fmt.Sprintf("CHS-%d", i), Metadata: &Metadata{Name: fmt.Sprintf("host-%d", i)},
			ExpectedDPUs: emDPUs(emDPU4(fmt.Sprintf("MT-%d-A", i), v4a, v6a), emDPU4(fmt.Sprintf("MT-%d-B", i), v4b, v6b))}
	}
	return specs
}

// BenchmarkExpectedMachineCreate: one POST's work (validate under the
// pool locks, insert the record and one reserved DPU, audit).
func BenchmarkExpectedMachineCreate(b *testing.B) {
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			a, ctx := emBenchAllocator(b, d)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				spec := ExpectedMachineSpec{BmcMacAddress: fmt.Sprintf("0a:00:%02x:%02x:%02x:%02x", i>>24&255, i>>16&255, i>>8&255, i&255),
					ExpectedDPUs: emDPUs(emDPU4(fmt.Sprintf("MT-%d", i), fmt.Sprintf("10.1.%d.%d", i/256%256, i%256), ""))}
				if i >= 65536 {
					spec.ExpectedDPUs = emDPUs(emDPU4(fmt.Sprintf("MT-%d", i), "", ""))
				}
				if _, err := a.CreateExpectedMachine(ctx, spec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkExpectedMachineReplaceAll2000: an atomic replace-all of a NICo
// file of 2000 records (4000 DPUs, 8000 reservations) where every record's
// reservations move to another record, so each run rewrites everything.
func BenchmarkExpectedMachineReplaceAll2000(b *testing.B) {
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			a, ctx := emBenchAllocator(b, d)
			files := [][]ExpectedMachineSpec{emBenchFile(2000, 0), emBenchFile(2000, 1)}
			if _, err := a.ReplaceAllExpectedMachines(ctx, files[1]); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := a.ReplaceAllExpectedMachines(ctx, files[i%2]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkExpectedMachineList: one page of 100 records with their DPUs.
func BenchmarkExpectedMachineList(b *testing.B) {
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			a, ctx := emBenchAllocator(b, d)
			if _, err := a.ReplaceAllExpectedMachines(ctx, emBenchFile(2000, 0)); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p, err := a.ListExpectedMachines(ctx, ExpectedMachineFilter{Limit: 100, Cursor: "0a:00:00:00:03:00"})
				if err != nil || len(p.Items) != 100 {
					b.Fatal(err)
				}
			}
		})
	}
}
