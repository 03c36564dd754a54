#!/usr/bin/env bash
# Builds kube-apiserver (k8s.io/kubernetes/cmd/kube-apiserver) and etcd
# (go.etcd.io/etcd/server/v3's etcdmain) from the Go module proxy, at the
# versions pinned in hack/kube-apiserver/go.mod and hack/etcd/go.mod, for
# the envtest tests of the k8s module. No binary is downloaded.
#
# The binaries are cached in a directory keyed by the pinned versions, the
# go.sum files and the Go version:
#   ${IPLEDGER_ENVTEST_CACHE:-${XDG_CACHE_HOME:-~/.cache}/ipledger/envtest}/KEY/
# so a second run takes a second. The directory is printed alone on the last
# line of standard output: KUBEBUILDER_ASSETS=$(k8s/hack/build-apiserver.sh).
#
#   --dir   print the directory without building anything
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# version MODULE GOMOD: the version GOMOD requires of MODULE.
version() {
  awk -v m="$1" '$1 == "require" && $2 == m { print $3; exit } $1 == m && $2 ~ /^v/ { print $2; exit }' "$2"
}
k8sver=$(version k8s.io/kubernetes "$here/kube-apiserver/go.mod")
etcdver=$(version go.etcd.io/etcd/server/v3 "$here/etcd/go.mod")
[ -n "$k8sver" ] && [ -n "$etcdver" ] || { echo "cannot read the pinned versions from hack/*/go.mod" >&2; exit 1; }
gover=$(go env GOVERSION)
sums=$(cat "$here/kube-apiserver/go.mod" "$here/kube-apiserver/go.sum" "$here/etcd/go.mod" "$here/etcd/go.sum" "$here/etcd/main.go" | sha256sum | cut -c1-12)
cache="${IPLEDGER_ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ipledger/envtest}"
dir="$cache/kube-apiserver-$k8sver-etcd-$etcdver-$gover-$sums"

if [ "${1:-}" = "--dir" ]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$dir"
# One build at a time: test binaries of several packages may call this
# together.
exec 9>"$dir/.lock"
flock 9

build() { # name module-dir package [ldflags]
  local name=$1 mod=$2 pkg=$3 ldflags=${4:-}
  if [ -x "$dir/$name" ]; then
    echo "$name: cached in $dir" >&2
    return
  fi
  echo "building $name from $pkg with $gover (the first build takes minutes)" >&2
  local t0=$SECONDS
  (cd "$here/$mod" && GOFLAGS=-mod=readonly go build -trimpath -ldflags "$ldflags" -o "$dir/.$name.tmp" "$pkg")
  mv "$dir/.$name.tmp" "$dir/$name"
  echo "built $name in $((SECONDS - t0))s" >&2
}

minor=${k8sver#v1.}
minor=${minor%%.*}
build kube-apiserver kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver \
  "-X k8s.io/component-base/version.gitVersion=$k8sver -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
build etcd etcd .

"$dir/kube-apiserver" --version >&2
# The whole output is read before the first line is printed: under pipefail,
# head closing the pipe early would end this script with SIGPIPE (141).
etcdver_out=$("$dir/etcd" --version)
printf '%s\n' "${etcdver_out%%$'\n'*}" >&2
echo "$dir"
