package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/webhook"
)

// wideSite is what seedWideData adds to a believable site: the ids the
// page walk needs to reach every page.
type wideSite struct {
	emIDs     []string // ExpectedMachines with the longest names
	hosts     []string // their hosts' machine ids (reported)
	dpu       string   // a DPU with a 64-character serial
	gone      string   // a long-named host, force-deleted
	longPool  string   // a pool with a 64-character name
	prefix    string   // an ipv6prefix pool: /64 blocks of a /32
	huge      string   // an ipv6 pool of 2^108 addresses
	rangeID   string   // a range of huge, with its 39-character bounds
	webhookID string   // a webhook with a 64-character name and a long URL
}

// fill repeats unit up to max bytes without cutting a character.
func fill(unit string, max int) string {
	var b strings.Builder
	for b.Len() < max {
		for _, r := range unit {
			if b.Len()+len(string(r)) > max {
				return b.String()
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// seedWideData adds to a believable site the longest data the rules
// accept, in several scripts: ExpectedMachines named with 250 bytes of
// Latin without a break, Latin with hyphens, Cyrillic, CJK and emoji,
// with 128-byte chassis serials (the most a report carries), 64-character DPU serials, long labels
// and a 1,024-byte description, reported as hosts; a pool with a
// 64-character name; an ipv6prefix pool delegating /64 blocks of a /32
// (4,294,967,296 blocks) and an ipv6 pool of 2^108 addresses (33-digit
// counts, 39-character bounds); owners with 128-character ids; a long
// actor; a webhook with a 64-character name. One long-named host is
// force-deleted, so its name shows on the quarantine page and on its
// history page.
func seedWideData(t testing.TB, site *consoleSite) wideSite {
	t.Helper()
	a := site.a
	actor := "token:" + fill("nightly-reconciler-of-the-storage-platform-", 120)
	ctx := audit.WithActor(context.Background(), actor, "")
	var w wideSite

	names := []string{
		fill("x", 250),
		fill("rack7-spine-facing-storage-host-", 250),
		fill("стойка-семь-сервер-хранилища-", 250),
		fill("東京第三データセンター北棟ラック七番", 250),
		fill("🖥🔥🚀🌏", 250),
	}
	str := func(s string) *string { return &s }
	macs := []string{"5a:00:00:00:00:01", "5a:00:00:00:00:02", "5a:00:00:00:00:03", "5a:00:00:00:00:04", "5a:00:00:00:00:05"}
	for i, name := range names {
		serial := fill("MT2299X", 60) + string(rune('A'+i)) + "001"
		spec := allocator.ExpectedMachineSpec{
			BmcMacAddress: macs[i], BmcUsername: fill("operator-", 250),
			ChassisSerialNumber: fill("CHASSIS-SERIAL-", 127) + string(rune('A'+i)),
			Metadata: &allocator.Metadata{Name: name, Description: fill("долгое-описание-без-пробелов-", 1024),
				Labels: []allocator.Label{{Key: fill("label-key-", 250), Value: fill("ラベル値", 250)}}},
			ExpectedDPUs: &[]allocator.ExpectedDPU{{SerialNumber: serial, LoopbackIP: str(fmt.Sprintf("10.180.62.%d", 240+i))}},
		}
		em, err := a.CreateExpectedMachine(ctx, spec)
		if err != nil {
			t.Fatalf("create the ExpectedMachine named %.20q…: %v", name, err)
		}
		if _, err := a.Report(ctx, allocator.ReportSpec{BmcMacAddress: macs[i], ChassisSerialNumber: spec.ChassisSerialNumber,
			DPUs: []allocator.ReportDPU{{SerialNumber: serial}}}); err != nil {
			t.Fatalf("report %s: %v", macs[i], err)
		}
		w.emIDs = append(w.emIDs, em.ID)
		w.hosts = append(w.hosts, allocator.HostMachineID(macs[i]))
		if i == 0 {
			w.dpu = allocator.DPUMachineID(serial)
		}
	}
	w.gone = w.hosts[len(w.hosts)-1]
	if _, err := a.DeleteMachine(ctx, w.gone, true); err != nil {
		t.Fatalf("force delete the emoji-named host: %v", err)
	}

	yes, no := true, false
	w.longPool = fill("tenant-overlay-loopbacks-of-the-east-availability-zone-", 64)
	w.prefix = "delegated-v6-blocks"
	w.huge = "documentation-v6"
	for _, p := range []allocator.PoolSpec{
		{Name: w.longPool, Type: "ipv4", Ranges: []allocator.RangeSpec{{First: "10.61.0.1", Last: "10.61.255.254", AutoAssign: &yes}}},
		{Name: w.prefix, Type: "ipv6prefix", DelegatePrefixLen: 64, Gateway: "2001:db8::1",
			Ranges: []allocator.RangeSpec{{First: "2001:db8::/64", Last: "2001:db8:ffff:ffff::/64", AutoAssign: &yes}}},
		{Name: w.huge, Type: "ipv6", Ranges: []allocator.RangeSpec{
			{First: "3fff::1", Last: "3fff:7ff:ffff:ffff:ffff:ffff:ffff:ffff", AutoAssign: &yes},
			{First: "3fff:800::", Last: "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", AutoAssign: &no}}},
	} {
		if _, err := a.CreatePool(ctx, p); err != nil {
			t.Fatalf("create pool %s: %v", p.Name, err)
		}
	}
	hp, err := a.GetPool(ctx, w.huge)
	if err != nil {
		t.Fatal(err)
	}
	w.rangeID = hp.Ranges[len(hp.Ranges)-1].ID
	owner := allocator.Owner{Type: fill("tenant_network_", 32), ID: fill("vpc-ab12cd34ef56-", 128)}
	for _, p := range []string{w.longPool, w.prefix, w.huge} {
		if _, _, err := a.Allocate(ctx, p, owner, ""); err != nil {
			t.Fatalf("allocate in %s: %v", p, err)
		}
	}
	if _, _, err := a.Allocate(ctx, w.huge, allocator.Owner{Type: "tenant", ID: "pinned-far"}, "3fff:fff:ffff:ffff:ffff:ffff:ffff:fffe"); err != nil {
		t.Fatalf("allocate a 39-character address: %v", err)
	}
	hook, err := site.hooks.CreateWebhook(ctx, webhook.WebhookSpec{Name: fill("vpc-controller-of-the-east-availability-zone-", 64),
		URL: "https://" + fill("hooks.", 200) + "example.com/" + fill("ipledger-events/", 400), Secret: "0123456789abcdef0123",
		Actions: []string{"allocation.*", "machine.*"}, Pools: []string{w.longPool, w.prefix}})
	if err != nil {
		t.Fatalf("create the webhook: %v", err)
	}
	w.webhookID = hook.ID
	return w
}
