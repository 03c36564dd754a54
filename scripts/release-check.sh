#!/usr/bin/env bash
# scripts/release-check.sh [VERSION]: the release build into dist/
# (scripts/release.sh, which checks its binaries: static and stamped, and
# its image: both platforms, carrying those binaries), then the checks of
# the rest of what it wrote: the checksums (`sha256sum -c`) and the
# packaged charts (ipledger's and the Kubernetes manager's), rendered with
# Helm's Go packages, each deploying the image its OCI layout names
# (deploy/chartcheck), and clusterctl's components deploying the
# release's manager image.
# scripts/ci-extra.sh runs it; VERSION defaults to ci-COMMIT.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-ci-$(git rev-parse --short=12 HEAD)}
start=$(date +%s)
scripts/release.sh "$version"
(cd dist && sha256sum --check --strict SHA256SUMS)
n=$(wc -l <dist/SHA256SUMS)
[ "$n" -eq 12 ] || { echo "SHA256SUMS lists $n files, want 12" >&2; exit 1; }
(cd deploy && go run ./chartcheck "../dist/ipledger-chart-$version.tgz" "$version" ../dist/oci)
(cd deploy && go run ./chartcheck -set clusterName=ci,ipledger.url=https://ipledger.example,ipledger.token=t \
	"../dist/ipledger-k8s-chart-$version.tgz" "$version" ../dist/oci-ipledger-k8s)
grep -qF "ghcr.io/ipledger/ipledger-k8s:$version}" dist/ipam-components.yaml ||
	{ echo "dist/ipam-components.yaml does not deploy ghcr.io/ipledger/ipledger-k8s:$version" >&2; exit 1; }
echo "release $version built and checked in $(($(date +%s) - start)) s"
