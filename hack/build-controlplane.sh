#!/usr/bin/env bash
# Builds a Kubernetes control plane (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager) from the Go module proxy, for the e2e tests.
#
# Why from source: the test machines reach proxy.golang.org but not GitHub or
# dl.k8s.io, so release tarballs are out of reach. The pinned versions live in
# hack/controlplane-go/{kubernetes,etcd}/go.mod (with go.sum), which keeps the
# build reproducible; the two programs are separate modules because etcd's and
# kubernetes' dependency graphs (grpc, otel) need not agree.
#
# Output: ${KARPENTER_CACHE_DIR:-$HOME/.cache/karpenter-py}/controlplane/<k8s>/bin
# The last line printed is that directory. A warm rerun exits immediately.
set -euo pipefail

K8S_VERSION=v1.34.4   # must match hack/controlplane-go/kubernetes/go.mod
ETCD_VERSION=v3.6.4   # must match hack/controlplane-go/etcd/go.mod
BINARIES=(etcd kube-apiserver kube-scheduler kube-controller-manager)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${KARPENTER_CACHE_DIR:-$HOME/.cache/karpenter-py}/controlplane"
bin_dir="$cache_root/$K8S_VERSION/bin"
# The etcd version is part of the stamp so that bumping it alone rebuilds.
stamp="$bin_dir/.built-k8s-$K8S_VERSION-etcd-$ETCD_VERSION"

complete() {
  [[ -f "$stamp" ]] || return 1
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$bin_dir/$b" ]] || return 1; done
}

if complete; then
  echo "$bin_dir"
  exit 0
fi

mkdir -p "$cache_root"
# Two test sessions may race to build; the second waits and reuses the result.
exec 9>"$cache_root/.lock"
if command -v flock >/dev/null; then flock 9; fi
if complete; then
  echo "$bin_dir"
  exit 0
fi

command -v go >/dev/null || { echo "build-controlplane: 'go' not found on PATH" >&2; exit 1; }

# Static, stripped, path-independent binaries; the module cache and build
# cache keep their defaults (~/go/pkg/mod, ~/.cache/go-build) so reruns and CI
# caches reuse them.
export CGO_ENABLED=0
export GOFLAGS="-mod=readonly -buildvcs=false"
build_flags=(-trimpath)
version_pkg=k8s.io/component-base/version
k8s_ldflags="-s -w -X $version_pkg.gitVersion=$K8S_VERSION -X $version_pkg.gitTreeState=clean"
k8s_ldflags+=" -X $version_pkg.gitMajor=1 -X $version_pkg.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"

staging="$cache_root/$K8S_VERSION/staging.$$"
rm -rf "$staging"
mkdir -p "$staging"
trap 'rm -rf "$staging"' EXIT

start=$(date +%s)
echo "build-controlplane: first build of the control plane into $bin_dir" >&2
echo "build-controlplane: (cold, 2 cores: about 6 min; Go module cache: $(go env GOMODCACHE))" >&2
echo "build-controlplane: [1/2] etcd $ETCD_VERSION" >&2
(cd "$here/controlplane-go/etcd" && go build "${build_flags[@]}" -ldflags "-s -w" -o "$staging/etcd" .)
echo "build-controlplane: [1/2] etcd done after $(( $(date +%s) - start ))s" >&2

echo "build-controlplane: [2/2] kube-apiserver, kube-scheduler, kube-controller-manager $K8S_VERSION" >&2
(cd "$here/controlplane-go/kubernetes" && go build "${build_flags[@]}" -ldflags "$k8s_ldflags" \
  -o "$staging/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kube-controller-manager)
echo "build-controlplane: [2/2] kubernetes done after $(( $(date +%s) - start ))s" >&2

mkdir -p "$bin_dir"
for b in "${BINARIES[@]}"; do mv -f "$staging/$b" "$bin_dir/$b"; done
touch "$stamp"
echo "build-controlplane: done in $(( $(date +%s) - start ))s" >&2
echo "$bin_dir"
