#!/usr/bin/env bash
# scripts/release.sh [VERSION]: the release build, into dist/ (gitignored).
#
#   dist/ipledger-linux-amd64, dist/ipledger-linux-arm64,
#   dist/galactic-ipam-linux-amd64, dist/galactic-ipam-linux-arm64
#       static binaries (CGO_ENABLED=0, -trimpath), version, commit and
#       build date stamped into package buildinfo (`ipledger version`)
#   dist/oci/                     the OCI image as a layout (index over
#                                 linux/amd64 and linux/arm64)
#   dist/ipledger-VERSION.oci.tar the same layout as one archive
#   dist/ipledger-chart-VERSION.tgz  the Helm chart, appVersion VERSION
#   dist/SHA256SUMS               sha256sum -c checks the files above
#                                 (the layout's blobs are named by digest)
#
# VERSION defaults to `git describe --tags --always --dirty`. The build
# date is SOURCE_DATE_EPOCH when set (reproducible builds), else now. No
# container daemon is needed: scripts/mkimage writes the image, and
# scripts/releasecheck checks the binaries and the image at the end.
# docs/operations.md says how to load and run the artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
commit=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
	commit="$commit-dirty"
fi
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
	date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
else
	date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
fi
pkg=github.com/ipledger/ipledger/buildinfo
ldflags="-s -w -X $pkg.version=$version -X $pkg.commit=$commit -X $pkg.date=$date"

rm -rf dist
mkdir -p dist
for arch in amd64 arm64; do
	echo "building linux/$arch"
	out=$(mktemp -d)
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$out/" ./cmd/ipledger ./cmd/galactic-ipam
	for bin in ipledger galactic-ipam; do
		mv "$out/$bin" "dist/$bin-linux-$arch"
	done
	rmdir "$out"
done

go run ./scripts/mkimage --dist dist --version "$version" --revision "$commit" --created "$date" \
	--platforms linux/amd64,linux/arm64

# The Helm chart with its appVersion (the image tag it deploys when
# image.tag is empty) set to this release: the checked-in chart says
# "dev", a tag no registry holds.
mkdir -p dist/chart
cp -R deploy/helm/ipledger dist/chart/
sed -i "s/^appVersion: .*/appVersion: \"$version\"/" dist/chart/ipledger/Chart.yaml
grep -qx "appVersion: \"$version\"" dist/chart/ipledger/Chart.yaml || { echo "could not stamp the chart's appVersion" >&2; exit 1; }
tar -C dist/chart --sort=name --owner=0 --group=0 --numeric-owner --mtime="$date" \
	-czf "dist/ipledger-chart-$version.tgz" ipledger
rm -rf dist/chart

(cd dist && sha256sum ipledger-linux-* galactic-ipam-linux-* "ipledger-$version.oci.tar" "ipledger-chart-$version.tgz" > SHA256SUMS)

# What was written: the binaries static (no interpreter, nothing to load)
# and stamped, the image's two platforms carrying them.
go run ./scripts/releasecheck --dist dist --version "$version"
echo
echo "release $version ($commit, built $date):"
(cd dist && ls -l --block-size=1 -- *-linux-* *.oci.tar *.tgz SHA256SUMS | awk '{printf "  %-40s %12d bytes\n", $NF, $5}')
