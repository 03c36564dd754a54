// Package bench measures ipledger-k8s against a real kube-apiserver and
// etcd and real `ipledger serve` processes on PostgreSQL: IPAddressClaims
// to Ready per second beside the API server's own ceiling, in one run
// (docs/benchmarks.md, "Claims to Ready on Kubernetes"). It holds only a
// benchmark; scripts/bench-k8s-claims.sh runs it.
package bench
