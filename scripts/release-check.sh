#!/usr/bin/env bash
# scripts/release-check.sh [VERSION]: the release build into dist/
# (scripts/release.sh, which checks its binaries: static and stamped, and
# its image: both platforms, carrying those binaries), then the checks of
# the rest of what it wrote: the checksums (`sha256sum -c`) and the
# packaged chart, rendered with Helm's Go packages, deploying the image
# the OCI layout names (deploy/chartcheck).
# scripts/ci-extra.sh runs it; VERSION defaults to ci-COMMIT.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-ci-$(git rev-parse --short=12 HEAD)}
start=$(date +%s)
scripts/release.sh "$version"
(cd dist && sha256sum --check --strict SHA256SUMS)
n=$(wc -l <dist/SHA256SUMS)
[ "$n" -eq 6 ] || { echo "SHA256SUMS lists $n files, want 6" >&2; exit 1; }
(cd deploy && go run ./chartcheck "../dist/ipledger-chart-$version.tgz" "$version" ../dist/oci)
echo "release $version built and checked in $(($(date +%s) - start)) s"
