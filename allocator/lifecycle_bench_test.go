package allocator

import (
	"context"
	"fmt"
	"testing"

	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
)

// lcBenchSite is a site with /16-sized loopback pools and 500 reserved DPUs
// declared, so reports pay for reservation look-ups and gap search on a
// realistic amount of state.
func lcBenchSite(b *testing.B, d models.Dialect) (*Allocator, context.Context) {
	b.Helper()
	db := dbtest.Open(b, d)
	a := New(db, Options{})
	ctx := context.Background()
	for _, spec := range []PoolSpec{
		{Name: PoolLoopbackV4, Type: "ipv4", Ranges: []RangeSpec{rng("10.0.0.0", "10.0.255.255", true), rng("10.1.0.0", "10.1.255.255", false)}},
		{Name: PoolLoopbackV6, Type: "ipv6", Ranges: []RangeSpec{rng("fd00::", "fd00::ffff:ffff", true), rng("fd00:1::", "fd00:1::ffff", false)}},
	} {
		if _, err := a.CreatePool(ctx, spec); err != nil {
			b.Fatal(err)
		}
	}
	s := &lcSite{db: db, a: a, ctx: ctx}
	for i := 0; i < 500; i++ {
		emID := fmt.Sprintf("bench-em-%d", i)
		if err := db.Create(&models.ExpectedMachine{ID: emID, BmcMacAddress: fmt.Sprintf("0b:00:00:00:%02x:%02x", i/256, i%256),
			FallbackDPUSerialNumbers: "[]", MetadataLabels: "[]", Version: 1}).Error; err != nil {
			b.Fatal(err)
		}
		v4 := fmt.Sprintf("10.1.%d.%d", i/256, i%256)
		v6 := fmt.Sprintf("fd00:1::%x", i)
		r := models.ExpectedDPU{ExpectedMachineID: emID, SerialNumber: fmt.Sprintf("R%05d", i), LoopbackIP: &v4, LoopbackIPKey: lcKey(v4),
			LoopbackIPv6: &v6, LoopbackIPv6Key: lcKey(v6)}
		if err := s.db.Create(&r).Error; err != nil {
			b.Fatal(err)
		}
	}
	return a, ctx
}

// BenchmarkReport: one site-explorer report of a new host with two DPUs
// (one reserved, one automatic), the whole transaction.
func BenchmarkReport(b *testing.B) {
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			a, ctx := lcBenchSite(b, d)
			i := 0
			for b.Loop() {
				spec := ReportSpec{BmcMacAddress: fmt.Sprintf("0b:00:00:01:%02x:%02x", (i/256)%256, i%256),
					DPUs: []ReportDPU{{SerialNumber: fmt.Sprintf("A%06d", i)}}}
				if i < 500 {
					spec.DPUs = append(spec.DPUs, ReportDPU{SerialNumber: fmt.Sprintf("R%05d", i)})
				}
				res, err := a.Report(ctx, spec)
				if err != nil || len(res.Incomplete) > 0 {
					b.Fatalf("report %d: %v %+v", i, err, res)
				}
				i++
			}
		})
	}
}

// BenchmarkReportRepeated: the steady state of site explorer, re-reporting
// a host that is already complete (nothing to write).
func BenchmarkReportRepeated(b *testing.B) {
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			a, ctx := lcBenchSite(b, d)
			spec := ReportSpec{BmcMacAddress: "0b:00:00:02:00:01", DPUs: []ReportDPU{{SerialNumber: "R00001"}, {SerialNumber: "A1"}}}
			if _, err := a.Report(ctx, spec); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := a.Report(ctx, spec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkListBindings: one page of 100 bindings out of 1000 DPUs.
func BenchmarkListBindings(b *testing.B) {
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			a, ctx := lcBenchSite(b, d)
			for i := 0; i < 500; i++ {
				if _, err := a.Report(ctx, ReportSpec{BmcMacAddress: fmt.Sprintf("0b:00:00:03:%02x:%02x", i/256, i%256),
					DPUs: []ReportDPU{{SerialNumber: fmt.Sprintf("R%05d", i)}, {SerialNumber: fmt.Sprintf("A%05d", i)}}}); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				p, err := a.ListBindings(ctx, BindingFilter{Limit: 100, Cursor: DPUMachineID("R00250")})
				if err != nil || len(p.Items) != 100 {
					b.Fatalf("%v %d", err, len(p.Items))
				}
			}
		})
	}
}
