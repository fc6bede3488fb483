#!/usr/bin/env bash
# Builds a real Kubernetes control plane from Go modules: kube-apiserver, kube-controller-manager, kube-scheduler and
# kubectl (Kubernetes, hack/control-plane/kubernetes), etcd (hack/control-plane/etcd) and kwok
# (hack/control-plane/kwok). The versions are the wrapper modules' pins; the binaries go to a versioned cache outside
# the repository, and a second run with the same pins does nothing.
#
#   hack/control-plane/build.sh              build (or find) the binaries; prints their directory last
#   hack/control-plane/build.sh --print-dir  print the directory the binaries go to, build nothing
#   hack/control-plane/build.sh --check      exit 0 when the binaries are built, 1 otherwise
#
# The cache root is $CONTROL_PLANE_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/microservice-operator/control-plane.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
mode="${1:-build}"
case "$mode" in
  build | --print-dir | --check) ;;
  *) echo "usage: $0 [--print-dir | --check]" >&2; exit 2 ;;
esac

die() { echo "error: $*" >&2; exit 1; }
pin() { awk -v m="$2" '$1 == m || ($1 == "require" && $2 == m) { print $NF; exit }' "$here/$1/go.mod"; }

k8s_version="$(pin kubernetes k8s.io/kubernetes)"
etcd_version="$(pin etcd go.etcd.io/etcd/server/v3)"
kwok_version="$(pin kwok sigs.k8s.io/kwok)"
[[ -n "$k8s_version" && -n "$etcd_version" && -n "$kwok_version" ]] || die "cannot read the pinned versions from $here/*/go.mod"

# The directory name carries the versions and a digest of the pins, so a changed go.sum builds anew beside the old.
pins_digest="$(cat "$here"/{kubernetes,etcd,kwok}/go.{mod,sum} "$here"/etcd/main.go "$0" | sha256sum | cut -c1-12)"
cache_root="${CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/microservice-operator/control-plane}"
dir="$cache_root/kubernetes-$k8s_version-etcd-$etcd_version-kwok-$kwok_version-$pins_digest"
bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)

complete() {
  [[ -f "$dir/.complete" ]] || return 1
  for b in "${bins[@]}"; do [[ -x "$dir/bin/$b" ]] || return 1; done
}

case "$mode" in
  --print-dir) echo "$dir/bin"; exit 0 ;;
  --check) complete && exit 0 || exit 1 ;;
esac

if complete; then
  echo "control plane already built (Kubernetes $k8s_version, etcd $etcd_version, kwok $kwok_version)" >&2
  echo "$dir/bin"
  exit 0
fi

command -v go >/dev/null 2>&1 || die "the Go toolchain is missing (go is not on PATH); install Go >= 1.26 and run $0 again"
go_version="$(go env GOVERSION)"
case "$go_version" in
  go1.2[6-9]* | go1.[3-9][0-9]*) ;;
  *) die "Go $go_version is too old: Kubernetes $k8s_version needs Go >= 1.26; install it and run $0 again" ;;
esac

start=$SECONDS
step() { printf '[%4ds] %s\n' "$((SECONDS - start))" "$*" >&2; }

mkdir -p "$dir/bin.partial"
export GOFLAGS="-trimpath -buildvcs=false -mod=readonly"
export CGO_ENABLED=0

# Module downloads first, so a module the proxy does not serve is named in one line before any compiling.
for m in kubernetes etcd kwok; do
  step "downloading the modules $m needs"
  if ! out="$(cd "$here/$m" && go mod download 2>&1)"; then
    die "a Go module pinned in hack/control-plane/$m/go.mod cannot be downloaded: $(printf '%s' "$out" | grep -m1 -E 'go: |reading|not found|410|404' || printf '%s' "$out" | tail -1)"
  fi
done

k8s_minor="${k8s_version#v1.}"; k8s_minor="${k8s_minor%%.*}"
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

step "building kube-apiserver, kube-controller-manager, kube-scheduler and kubectl $k8s_version (cold: about 25 min on 2 cores)"
(cd "$here/kubernetes" && go build -ldflags "$ldflags" -o "$dir/bin.partial/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)

step "building etcd $etcd_version"
(cd "$here/etcd" && go build -ldflags "-s -w" -o "$dir/bin.partial/etcd" .)

step "building kwok $kwok_version"
(cd "$here/kwok" && go build -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${kwok_version#v}" \
  -o "$dir/bin.partial/" sigs.k8s.io/kwok/cmd/kwok)

for b in "${bins[@]}"; do
  [[ -x "$dir/bin.partial/$b" ]] || die "the build finished without $b; see the output above"
done
rm -rf "$dir/bin"
mv "$dir/bin.partial" "$dir/bin"
{
  echo "kubernetes $k8s_version"
  echo "etcd $etcd_version"
  echo "kwok $kwok_version"
  echo "go $go_version"
  echo "built $build_date in $((SECONDS - start))s"
} >"$dir/.complete"
step "built the control plane in $((SECONDS - start))s"
echo "$dir/bin"
