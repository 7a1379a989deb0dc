#!/usr/bin/env bash
# Installs helm from the Go module proxy, for the chart tests (tests/test_chart.py).
#
# Why from source: the test machines reach proxy.golang.org but not get.helm.sh or GitHub.
# Output: ${KARPENTER_CACHE_DIR:-$HOME/.cache/karpenter-py}/bin/helm-<version>; the last line
# printed is that path. A warm rerun exits immediately.
set -euo pipefail

HELM_VERSION=v3.16.4

cache_root="${KARPENTER_CACHE_DIR:-$HOME/.cache/karpenter-py}"
bin_dir="$cache_root/bin"
target="$bin_dir/helm-$HELM_VERSION"

if [[ -x "$target" ]]; then
  echo "$target"
  exit 0
fi

mkdir -p "$bin_dir"
# Two test sessions may race to build; the second waits and reuses the result.
exec 9>"$bin_dir/.helm.lock"
if command -v flock >/dev/null; then flock 9; fi
if [[ -x "$target" ]]; then
  echo "$target"
  exit 0
fi

command -v go >/dev/null || { echo "install-helm: 'go' not found on PATH" >&2; exit 1; }

staging="$(mktemp -d "$bin_dir/.helm-build.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
# version stamped like helm's own release builds, so `helm version` reports it
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
# helm's Makefile stamps the Kubernetes version it was built against (client-go v0.31 for
# v3.16); without it `helm template` assumes v1.20 and rejects the chart's kubeVersion
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=31"
done
CGO_ENABLED=0 GOBIN="$staging" GOFLAGS="-buildvcs=false" \
  go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
mv "$staging/helm" "$target"
echo "$target"
