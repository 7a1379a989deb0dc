#!/usr/bin/env bash
# Builds kwok (Kubernetes WithOut Kubelet, sigs.k8s.io/kwok/cmd/kwok) from the Go module proxy,
# for the e2e tests, the sandbox and the benchmarks: it plays every simulated Node's kubelet.
#
# Output: ${KARPENTER_CACHE_DIR:-$HOME/.cache/karpenter-py}/kwok/<version>/bin/kwok
# The last line printed is that directory. A warm rerun exits immediately. See hack/README.md.
set -euo pipefail

KWOK_VERSION=v0.7.0   # go.mod: go 1.24.0 (the local toolchain suffices)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/lib/go-install.sh
source "$here/lib/go-install.sh"
GO_INSTALL_LDFLAGS="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
  go_install_cached kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION" kwok
