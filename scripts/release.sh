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
#   dist/ipledger-k8s-linux-amd64, dist/ipledger-k8s-linux-arm64
#       the Kubernetes manager (module k8s/), static, version stamped
#       (`ipledger-k8s --version`)
#   dist/oci-ipledger-k8s/        its OCI image as a layout
#   dist/ipledger-k8s-VERSION.oci.tar  the same layout as one archive
#   dist/ipledger-k8s-chart-VERSION.tgz  its Helm chart, appVersion VERSION
#   dist/ipam-components.yaml, dist/metadata.yaml
#       the Cluster API IPAM provider's files for clusterctl (a GitHub
#       release's assets), the components deploying this release's image
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
	(cd k8s && CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "-s -w -X main.version=$version" \
		-o "$out/" ./cmd/ipledger-k8s)
	for bin in ipledger galactic-ipam ipledger-k8s; do
		mv "$out/$bin" "dist/$bin-linux-$arch"
	done
	rmdir "$out"
done

for image in ipledger ipledger-k8s; do
	go run ./scripts/mkimage --image "$image" --dist dist --version "$version" --revision "$commit" --created "$date" \
		--platforms linux/amd64,linux/arm64
done

# The Helm charts with their appVersion (the image tag each deploys when
# image.tag is empty) set to this release: the checked-in charts say
# "dev", a tag no registry holds.
for chart in ipledger ipledger-k8s; do
	mkdir -p dist/chart
	cp -R "deploy/helm/$chart" dist/chart/
	sed -i "s/^appVersion: .*/appVersion: \"$version\"/" "dist/chart/$chart/Chart.yaml"
	grep -qx "appVersion: \"$version\"" "dist/chart/$chart/Chart.yaml" || { echo "could not stamp $chart's appVersion" >&2; exit 1; }
	tar -C dist/chart --sort=name --owner=0 --group=0 --numeric-owner --mtime="$date" \
		-czf "dist/$chart-chart-$version.tgz" "$chart"
	rm -rf dist/chart
done

# clusterctl's files: the components deploy this release's image unless
# IPLEDGER_K8S_IMAGE says otherwise.
sed "s|\${IPLEDGER_K8S_IMAGE:=ghcr.io/ipledger/ipledger-k8s:dev}|\${IPLEDGER_K8S_IMAGE:=ghcr.io/ipledger/ipledger-k8s:$version}|" \
	k8s/config/ipam-components.yaml > dist/ipam-components.yaml
grep -qF "ipledger-k8s:$version}" dist/ipam-components.yaml || { echo "could not stamp the components' image" >&2; exit 1; }
cp k8s/config/metadata.yaml dist/metadata.yaml

(cd dist && sha256sum ipledger-linux-* galactic-ipam-linux-* ipledger-k8s-linux-* "ipledger-$version.oci.tar" \
	"ipledger-k8s-$version.oci.tar" "ipledger-chart-$version.tgz" "ipledger-k8s-chart-$version.tgz" \
	ipam-components.yaml metadata.yaml > SHA256SUMS)

# What was written: the binaries static (no interpreter, nothing to load)
# and stamped, the image's two platforms carrying them.
go run ./scripts/releasecheck --dist dist --version "$version"
echo
echo "release $version ($commit, built $date):"
(cd dist && ls -l --block-size=1 -- *-linux-* *.oci.tar *.tgz *.yaml SHA256SUMS | awk '{printf "  %-40s %12d bytes\n", $NF, $5}')
