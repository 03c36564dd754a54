// Command ipledger-k8s is ipledger's Kubernetes manager: the Cluster API
// IPAM provider (LedgerIPPool, GlobalLedgerIPPool and IPAddressClaims of
// them) and the LedgerNetworkAttachment controller (NetworkAttachmentDefinitions
// for galactic-ipam), backed by ipledger's REST API and change feed. See
// docs/kubernetes.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ipledger/ipledger/k8s/internal/app"
	"github.com/ipledger/ipledger/k8s/internal/ipam"
	"github.com/ipledger/ipledger/k8s/internal/ledger"
)

// version is the release, stamped by scripts/release.sh
// (-X main.version=…).
var version = "dev"

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ipledger-k8s:", err)
		os.Exit(1)
	}
}

// flags are the command's settings before they become app.Options.
type flags struct {
	url, tokenFile, caCert, clientCert, clientKey string
	kubeconfig, metrics, probe, clusterName       string
	leaderElect, printVersion                     bool
	leaderNS, namespaces, globalSelector, level   string
	syncPeriod                                    time.Duration
	workers, burst                                int
	qps                                           float64
}

func parse(args []string, stderr io.Writer) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("ipledger-k8s", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.url, "ipledger-url", os.Getenv("IPLEDGER_URL"), "ipledger's base URL (env IPLEDGER_URL)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding ipledger's API token, an operator-role token (else env IPLEDGER_TOKEN)")
	fs.StringVar(&f.caCert, "ca-cert", os.Getenv("IPLEDGER_CA_CERT"), "PEM file of the CA of ipledger's TLS certificate (env IPLEDGER_CA_CERT; default the system's roots)")
	fs.StringVar(&f.clientCert, "client-cert", os.Getenv("IPLEDGER_CLIENT_CERT"), "PEM client certificate for mutual TLS with ipledger (env IPLEDGER_CLIENT_CERT)")
	fs.StringVar(&f.clientKey, "client-key", os.Getenv("IPLEDGER_CLIENT_KEY"), "PEM key of --client-cert (env IPLEDGER_CLIENT_KEY)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, else $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&f.metrics, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 turns it off")
	fs.StringVar(&f.probe, "health-probe-bind-address", ":8081", "address serving /healthz and /readyz; 0 turns it off")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "elect one active manager among replicas (a Lease)")
	fs.StringVar(&f.leaderNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	fs.StringVar(&f.clusterName, "cluster-name", "", "this cluster's name in ipledger's owner ids (required; a DNS label, unique among the clusters sharing one ipledger)")
	fs.DurationVar(&f.syncPeriod, "sync-period", 10*time.Hour, "full resync of the cache; ipledger's changes arrive through its change feed, not through this")
	fs.IntVar(&f.workers, "workers", 16, "IPAddressClaims reconciled at once")
	fs.StringVar(&f.namespaces, "watch-namespaces", "", "comma-separated namespaces to watch (default: all)")
	fs.StringVar(&f.globalSelector, "global-pool-selector", "", "label selector of the GlobalLedgerIPPools this manager handles (default: all)")
	// A claim costs about four writes (finalizer, IPAddress, status,
	// event): at 50 requests per second the manager, not the API server,
	// bounded a burst of claims to about 12 per second. The API server's
	// priority and fairness is what protects it (docs/benchmarks.md,
	// "Claims to Ready on Kubernetes").
	fs.Float64Var(&f.qps, "kube-api-qps", 500, "requests per second to the Kubernetes API server")
	fs.IntVar(&f.burst, "kube-api-burst", 1000, "burst of requests to the Kubernetes API server")
	fs.StringVar(&f.level, "log-level", "info", "log level: debug, info, warn or error (JSON on stderr)")
	fs.BoolVar(&f.printVersion, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if f.printVersion {
		return f, nil
	}
	if f.clusterName == "" {
		return nil, errors.New("--cluster-name is required: it names this cluster in ipledger's owner ids")
	}
	if err := ipam.ValidateClusterName(f.clusterName); err != nil {
		return nil, err
	}
	if f.url == "" {
		return nil, errors.New("--ipledger-url (or IPLEDGER_URL) is required")
	}
	return f, nil
}

func run(args []string, stderr io.Writer) error {
	f, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if f.printVersion {
		fmt.Println("ipledger-k8s", version)
		return nil
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.level)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", f.level)
	}
	log := logr.FromSlogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctrl.SetLogger(log)
	klog.SetLogger(log)

	token := os.Getenv("IPLEDGER_TOKEN")
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" && f.clientCert == "" {
		return errors.New("no credentials for ipledger: give --token-file, IPLEDGER_TOKEN or --client-cert/--client-key")
	}
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(f.qps), f.burst
	cfg.UserAgent = "ipledger-k8s/" + f.clusterName

	o := app.Options{
		Rest: cfg,
		Ledger: ledger.Config{URL: f.url, Token: token, CACert: f.caCert, ClientCert: f.clientCert, ClientKey: f.clientKey,
			UserAgent: "ipledger-k8s/" + f.clusterName},
		ClusterName: f.clusterName, MetricsAddr: f.metrics, ProbeAddr: f.probe,
		LeaderElect: f.leaderElect, LeaderElectionNamespace: f.leaderNS,
		SyncPeriod: f.syncPeriod, Workers: f.workers, Logger: log,
	}
	for _, ns := range strings.Split(f.namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			o.Namespaces = append(o.Namespaces, ns)
		}
	}
	if f.globalSelector != "" {
		sel, err := labels.Parse(f.globalSelector)
		if err != nil {
			return fmt.Errorf("--global-pool-selector: %w", err)
		}
		o.GlobalPoolSelector = sel
	}
	mgr, err := app.New(o)
	if err != nil {
		return err
	}
	log.Info("starting ipledger-k8s", "version", version, "cluster", f.clusterName, "ipledger", f.url, "syncPeriod", f.syncPeriod.String(),
		"leaderElect", f.leaderElect, "workers", f.workers)
	return mgr.Start(ctrl.SetupSignalHandler())
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		return c, nil
	}
	return ctrl.GetConfig()
}
