package main

import (
	"context"
	"log/slog"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/docs/samples"
	"github.com/ipledger/ipledger/poolfile"
)

// demoPools is the NICo site configuration of the demo site:
// docs/samples/site-config.toml, the sample operators already have (only
// its [pools.*] tables are read; end is exclusive).
var demoPools = samples.SiteConfig

// demoSteps add the rest of the demo site after the pools are loaded, in
// order: the ExpectedMachines first, so that the machines step ingests
// their hosts.
var demoSteps = []func(ctx context.Context, a *allocator.Allocator) error{
	demoExpectedMachines,
	demoMachines,
}

// seedDemo loads the demo site when the database holds no pool yet.
func seedDemo(ctx context.Context, a *allocator.Allocator, log *slog.Logger) error {
	pools, err := a.ListPools(ctx)
	if err != nil {
		return err
	}
	if len(pools) > 0 {
		log.Info("demo not loaded: the database already holds pools")
		return nil
	}
	ctx = audit.WithActor(ctx, "system:demo", "")
	if _, err := poolfile.Load(ctx, a, []byte(demoPools)); err != nil {
		return err
	}
	for i := 0; i < 12; i++ {
		if _, _, err := a.Allocate(ctx, "vlan-id", allocator.Owner{Type: "network", ID: "tenant-" + string(rune('a'+i))}, ""); err != nil {
			return err
		}
	}
	for _, ep := range []string{"pod-web-1", "pod-web-2", "pod-db-1"} {
		if _, _, err := a.Allocate(ctx, "endpoint-v6", allocator.Owner{Type: "endpoint", ID: ep}, ""); err != nil {
			return err
		}
	}
	for _, step := range demoSteps {
		if err := step(ctx, a); err != nil {
			return err
		}
	}
	log.Info("demo site loaded")
	return nil
}
