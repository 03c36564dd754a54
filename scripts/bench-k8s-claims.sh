#!/usr/bin/env bash
# IPAddressClaims to Ready per second through ipledger-k8s, beside the
# API server's own ceiling, in one run against one kube-apiserver and etcd
# (docs/benchmarks.md, "Claims to Ready on Kubernetes"):
#
#   - the ceiling: a plain client (no client-side rate limit, 32
#     goroutines) creating 1,000 IPAddressClaims, their IPAddresses and
#     their Ready statuses, no allocation;
#   - the ipledger-k8s binary with its default flags driving 1,000 claims
#     to Ready (the bench creates them as above) with one `ipledger serve`
#     on PostgreSQL, then with two on the same database behind a
#     round-robin TCP balancer (as a Service spreads connections).
#
#   scripts/bench-k8s-claims.sh
#   IPLEDGER_BENCH_MANAGER_FLAGS="--kube-api-qps 50 --kube-api-burst 100" scripts/bench-k8s-claims.sh
#
# Needs the PostgreSQL of the tests (IPLEDGER_TEST_POSTGRES, default
# postgres://postgres@127.0.0.1:5432/test); each server run has a schema
# of its own, dropped at the end. kube-apiserver and etcd come from
# k8s/hack/build-apiserver.sh (cached; about 15 minutes the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$(k8s/hack/build-apiserver.sh | tail -n 1)}"
export KUBEBUILDER_ASSETS
cd k8s
exec go test -count=1 -run '^$' -bench '^BenchmarkClaimsToReady$' -benchtime 1x -timeout 30m ./bench/
