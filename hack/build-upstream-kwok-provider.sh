#!/usr/bin/env bash
# Builds upstream Karpenter's kwok provider (sigs.k8s.io/karpenter/kwok: upstream's core
# controllers with an in-cluster fake cloud) from the Go module proxy, for bench/perf_suite.py
# only, which runs it side by side with this controller. CI never builds it.
#
# Its go.mod asks for a newer Go than many machines have (v1.14.3: go 1.26.10); GOTOOLCHAIN=auto
# fetches that toolchain through the same proxy.
#
# Output: ${KARPENTER_CACHE_DIR:-$HOME/.cache/karpenter-py}/upstream-kwok-provider/<version>/bin/karpenter-kwok
# The last line printed is that directory. A warm rerun exits immediately.
set -euo pipefail

KARPENTER_VERSION=v1.14.3

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/lib/go-install.sh
source "$here/lib/go-install.sh"
go_install_cached upstream-kwok-provider sigs.k8s.io/karpenter/kwok "$KARPENTER_VERSION" karpenter-kwok
