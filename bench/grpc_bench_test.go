package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/proto/gen/forge"
	"github.com/ipledger/ipledger/proto/gen/forge/forgeconnect"
	"github.com/ipledger/ipledger/web"
)

// ExpectedMachine Get and Update over REST and over gRPC, side by side:
// the same server (a real loopback listener, HTTP/1.1 and h2c as `serve`
// runs it), the same 100 records with two reserved DPUs each, one client
// in this process calling one request at a time. REST uses a keep-alive
// HTTP/1.1 connection and JSON; gRPC one HTTP/2 connection and protobuf.
// Update changes sku_id and leaves the reservations out (they are kept),
// as an older client does. docs/benchmarks.md has the figures:
//
//	go test ./bench -run '^$' -bench 'ExpectedMachine(Get|Update)' -benchtime 2000x
func BenchmarkExpectedMachineGet(b *testing.B)    { benchEM(b, false) }
func BenchmarkExpectedMachineUpdate(b *testing.B) { benchEM(b, true) }

const emRecords = 100

func benchEM(b *testing.B, update bool) {
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			base := emServer(b, d)
			restClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			tr := &http.Transport{}
			tr.Protocols = new(http.Protocols)
			tr.Protocols.SetUnencryptedHTTP2(true)
			grpc := forgeconnect.NewForgeClient(&http.Client{Transport: tr}, base, connect.WithGRPC())
			mac := func(i int) string { return fmt.Sprintf("0a:00:00:00:%02x:%02x", i/256, i%256) }
			b.Run("rest", func(b *testing.B) {
				measure(b, func(i int) error {
					m := mac(i % emRecords)
					var req *http.Request
					if update {
						body := fmt.Sprintf(`{"bmc_mac_address":%q,"bmc_username":"root","chassis_serial_number":"CHS-%d","sku_id":"sku-%d"}`, m, i%emRecords, i)
						req, _ = http.NewRequest("PUT", base+"/api/v1/expected-machines/"+m, strings.NewReader(body))
						req.Header.Set("Content-Type", "application/json")
					} else {
						req, _ = http.NewRequest("GET", base+"/api/v1/expected-machines/"+m, nil)
					}
					req.Header.Set("Authorization", "Bearer "+benchToken)
					res, err := restClient.Do(req)
					if err != nil {
						return err
					}
					body, _ := io.ReadAll(res.Body)
					res.Body.Close()
					if res.StatusCode != 200 || !strings.Contains(string(body), `"expected_dpus":[{`) {
						return fmt.Errorf("%d %s", res.StatusCode, body)
					}
					return nil
				})
			})
			b.Run("grpc", func(b *testing.B) {
				measure(b, func(i int) error {
					m := mac(i % emRecords)
					if update {
						sku := fmt.Sprint("sku-", i)
						req := connect.NewRequest(&forge.ExpectedMachine{BmcMacAddress: m, BmcUsername: "root",
							ChassisSerialNumber: fmt.Sprint("CHS-", i%emRecords), SkuId: &sku})
						req.Header().Set("Authorization", "Bearer "+benchToken)
						_, err := grpc.UpdateExpectedMachine(context.Background(), req)
						return err
					}
					req := connect.NewRequest(&forge.ExpectedMachineRequest{BmcMacAddress: m})
					req.Header().Set("Authorization", "Bearer "+benchToken)
					res, err := grpc.GetExpectedMachine(context.Background(), req)
					if err == nil && len(res.Msg.GetExpectedDpus().GetItems()) != 2 {
						err = fmt.Errorf("record %s has %d DPUs", m, len(res.Msg.GetExpectedDpus().GetItems()))
					}
					return err
				})
			})
		})
	}
}

// emServer serves a fresh database holding emRecords ExpectedMachines on
// a loopback listener and returns its base URL.
func emServer(b *testing.B, d models.Dialect) string {
	b.Helper()
	db := dbtest.Open(b, d)
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
	a := allocator.New(db, allocator.Options{Logger: quiet})
	au := auth.New(a.DB(), auth.Options{})
	ctx := context.Background()
	if _, err := au.EnsureAdminToken(ctx, benchToken); err != nil {
		b.Fatal(err)
	}
	f := false
	for _, p := range []allocator.PoolSpec{
		{Name: "lo-ip", Type: "ipv4", Ranges: []allocator.RangeSpec{{First: "10.180.0.0", Last: "10.180.0.255"}, {First: "10.180.1.0", Last: "10.180.1.255", AutoAssign: &f}}},
		{Name: "lo-ip-v6", Type: "ipv6", Ranges: []allocator.RangeSpec{{First: "fd00::1", Last: "fd00::ffff"}, {First: "fd00:1::", Last: "fd00:1::ffff", AutoAssign: &f}}},
	} {
		if _, err := a.CreatePool(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	specs := make([]allocator.ExpectedMachineSpec, emRecords)
	for i := range specs {
		v4a, v4b, v6 := fmt.Sprintf("10.180.1.%d", 2*i), fmt.Sprintf("10.180.1.%d", 2*i+1), fmt.Sprintf("fd00:1::%x", i)
		dpus := []allocator.ExpectedDPU{{SerialNumber: fmt.Sprint("MT-A", i), LoopbackIP: &v4a, LoopbackIPv6: &v6}, {SerialNumber: fmt.Sprint("MT-B", i), LoopbackIP: &v4b}}
		pw := "bench-password"
		specs[i] = allocator.ExpectedMachineSpec{BmcMacAddress: fmt.Sprintf("0a:00:00:00:%02x:%02x", i/256, i%256), BmcUsername: "root",
			BmcPassword: &pw, ChassisSerialNumber: fmt.Sprint("CHS-", i), ExpectedDPUs: &dpus}
	}
	if _, err := a.ReplaceAllExpectedMachines(ctx, specs); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := web.New(web.Config{Allocator: a, Logger: quiet}).HTTPServer()
	go func() { _ = hs.Serve(ln) }()
	b.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String()
}

// measure runs op b.N times, one at a time, and reports p50 and p99.
func measure(b *testing.B, op func(i int) error) {
	for i := 0; i < 20; i++ { // warm the connection and caches
		if err := op(i); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := op(i); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 { return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
