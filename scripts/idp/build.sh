#!/usr/bin/env bash
# Builds the identity software that the identity tests run against — Dex
# (an OpenID Connect provider) and oauth2-proxy (an authenticating proxy) —
# from the Go module proxy, each from a small module of its own under
# scripts/idp/, so that their dependencies never reach the server's go.mod.
# The binaries are cached by release, module version, Go version and a hash
# of the module's go.mod and go.sum:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/ipledger/idp/NAME-RELEASE-GOVERSION-SUM/NAME
#
# so a second run only checks that they are there.
#
#   scripts/idp/build.sh           build what is missing; print NAME=PATH lines
#   scripts/idp/build.sh --check   build nothing; print NAME=PATH lines of the
#                                  cached binaries, exit 1 naming one missing
#
# Dex's release tags are not Go module versions (its module path has no
# /v2), so scripts/idp/dex/go.mod requires the pseudo-version of the
# release's commit, and Dex's own replace of its api/v2 module (a directive
# of Dex's go.mod, which applies only when Dex is the main module) is left
# behind: api/v2 comes from the module proxy at the version Dex requires.
# docs/identity.md "Tested against real providers" says how the tests use them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

# name, the release it is, the commit a pseudo-version must name ("" for a
# module version), the package of its main, and the -X flag that stamps the
# release into its version command.
tools=(
  "dex|v2.45.1|11d2eeb52b42|github.com/dexidp/dex/cmd/dex|main.version"
  "oauth2-proxy|v7.15.6||github.com/oauth2-proxy/oauth2-proxy/v7|github.com/oauth2-proxy/oauth2-proxy/v7/pkg/version.VERSION"
)

check=false
case "${1:-}" in
  --check) check=true ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

cache="${XDG_CACHE_HOME:-$HOME/.cache}/ipledger/idp"
mkdir -p "$cache"
gover="$(go env GOVERSION)"
# One build at a time: two test packages, or CI and a developer, may ask
# at once; the second finds the first's binary.
exec 9>"$cache/.lock"
flock 9

status=0
for t in "${tools[@]}"; do
  IFS='|' read -r name release commit pkg stamp <<<"$t"
  dir="$here/$name"
  mod="${pkg%/cmd/*}"
  version="$(cd "$dir" && go list -m -f '{{.Version}}' "$mod")"
  if [ -n "$commit" ] && [ "${version##*-}" != "$commit" ]; then
    echo "$dir/go.mod requires $mod $version, which is not the commit $commit of $name $release: update both together" >&2
    exit 1
  fi
  if [ -z "$commit" ] && [ "$version" != "$release" ]; then
    echo "$dir/go.mod requires $mod $version, not $release: update both together" >&2
    exit 1
  fi
  sum="$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-12)"
  bin="$cache/$name-$release-$gover-$sum/$name"
  if [ ! -x "$bin" ]; then
    if $check; then
      echo "$name $release is not built for $gover: run scripts/idp/build.sh" >&2
      status=1
      continue
    fi
    echo "building $name $release ($mod $version) with $gover" >&2
    start=$(date +%s)
    tmp="$(mktemp -d "$cache/.build-XXXXXX")"
    # No cgo: Dex's in-memory storage needs no SQLite, and a static
    # binary does not depend on the machine's C libraries.
    (cd "$dir" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w -X $stamp=$release" -o "$tmp/$name" "$pkg")
    mkdir -p "$(dirname "$bin")"
    mv "$tmp/$name" "$bin"
    rmdir "$tmp"
    echo "built $name in $(( $(date +%s) - start )) s" >&2
  fi
  echo "$name=$bin"
done
exit $status
