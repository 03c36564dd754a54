// Package app assembles the ipledger-k8s manager: the scheme, the cache,
// the ipledger client and change feed, and the controllers (the Cluster
// API IPAM provider's and, where the API server serves its kinds, the
// LedgerNetworkAttachment controller). The command
// (cmd/ipledger-k8s) and the tests build the same manager through New.
package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ipledger/ipledger/k8s/api/v1alpha1"
	"github.com/ipledger/ipledger/k8s/internal/feed"
	"github.com/ipledger/ipledger/k8s/internal/ipam"
	"github.com/ipledger/ipledger/k8s/internal/ledger"
	"github.com/ipledger/ipledger/k8s/internal/nad"
)

// Options are the manager's settings (the command's flags).
type Options struct {
	Rest        *rest.Config
	Ledger      ledger.Config
	ClusterName string

	MetricsAddr string // "0": off
	ProbeAddr   string // "0": off

	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionID        string

	// SyncPeriod is the cache's full resync period. Nothing waits for it:
	// changes in ipledger arrive through the change feed.
	SyncPeriod time.Duration
	// Workers is the number of claims reconciled at once.
	Workers int
	// Namespaces limits the namespaced objects watched (empty: all).
	Namespaces []string
	// GlobalPoolSelector limits the GlobalLedgerIPPools handled (nil: all).
	GlobalPoolSelector labels.Selector

	Logger logr.Logger
}

// Scheme holds every kind the manager reads or writes.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, ipamv1.AddToScheme, clusterv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// New builds the manager with its controllers; run it with Start.
func New(o Options) (ctrl.Manager, error) {
	if err := ipam.ValidateClusterName(o.ClusterName); err != nil {
		return nil, err
	}
	if o.Rest == nil {
		return nil, errors.New("no Kubernetes client configuration")
	}
	lc, err := ledger.New(o.Ledger)
	if err != nil {
		return nil, err
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	if o.SyncPeriod <= 0 {
		o.SyncPeriod = 10 * time.Hour
	}
	if o.Workers <= 0 {
		o.Workers = 16
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = "ipledger-k8s-" + o.ClusterName
	}
	copts := cache.Options{SyncPeriod: &o.SyncPeriod, ByObject: map[client.Object]cache.ByObject{}}
	if len(o.Namespaces) > 0 {
		copts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.Namespaces {
			copts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	if o.GlobalPoolSelector != nil {
		copts.ByObject[&v1alpha1.GlobalLedgerIPPool{}] = cache.ByObject{Label: o.GlobalPoolSelector}
	}
	mgr, err := ctrl.NewManager(o.Rest, ctrl.Options{
		Scheme:                        scheme,
		Logger:                        o.Logger,
		Cache:                         copts,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		// Several managers may run in one process (the tests do).
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("building the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := ipam.SetupIndexes(context.Background(), mgr); err != nil {
		return nil, err
	}
	w := feed.New(lc, o.Logger.WithName("feed"))
	if err := mgr.Add(w); err != nil {
		return nil, err
	}
	copt := controller.Options{MaxConcurrentReconciles: o.Workers}
	if err := ipam.SetupPoolController(mgr, lc, w, func() v1alpha1.PoolObject { return &v1alpha1.LedgerIPPool{} }, v1alpha1.LedgerIPPoolKind, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return nil, err
	}
	if err := ipam.SetupPoolController(mgr, lc, w, func() v1alpha1.PoolObject { return &v1alpha1.GlobalLedgerIPPool{} }, v1alpha1.GlobalLedgerIPPoolKind, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return nil, err
	}
	r := &ipam.ClaimReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Ledger: lc,
		Recorder: mgr.GetEventRecorder("ipledger-k8s"), ClusterName: o.ClusterName,
	}
	if err := ipam.SetupClaimController(mgr, r, w, copt); err != nil {
		return nil, err
	}
	nr := &nad.Reconciler{
		Client: mgr.GetClient(), Ledger: lc,
		Recorder: mgr.GetEventRecorder("ipledger-k8s"), ClusterName: o.ClusterName,
	}
	if err := nad.Setup(context.Background(), mgr, nr, w, controller.Options{MaxConcurrentReconciles: 4}, o.Logger.WithName("ledgernetworkattachment")); err != nil {
		return nil, err
	}
	return mgr, nil
}
