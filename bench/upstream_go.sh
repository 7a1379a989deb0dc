#!/usr/bin/env bash
# Upstream Karpenter's Go scheduling benchmark, run on this machine for comparison.
#
# Downloads sigs.k8s.io/karpenter (module source, _test.go files included) from the Go module
# proxy into a scratch directory OUTSIDE this repository, adds one benchmark for 40,000 pods
# beside upstream's own (1 ... 20,000) in that scratch copy, and runs
# pkg/controllers/provisioning/scheduling's BenchmarkScheduling* (build tag test_performance):
# the diverse mix, fake catalogue of 400 types, as bench/scheduling.py reproduces it.
# Nothing of upstream's is written into this repository.
#
# Usage: bench/upstream_go.sh [SIZES]   (default "1000 5000 20000 40000")
# Env: KARPENTER_VERSION (default v1.15.0), GO_TOOLCHAIN (default go1.26.9, what its go.mod
# asks for), SCRATCH (default a new temporary directory), COUNT (runs per size, default 3).
set -euo pipefail

VERSION="${KARPENTER_VERSION:-v1.15.0}"
TOOLCHAIN="${GO_TOOLCHAIN:-go1.26.9}"
SIZES="${1:-1000 5000 20000 40000}"
COUNT="${COUNT:-3}"
SCRATCH="${SCRATCH:-$(mktemp -d)}"
case "$(realpath "$SCRATCH")" in
  "$(git rev-parse --show-toplevel 2>/dev/null || echo /nonexistent)"*)
    echo "SCRATCH must be outside the repository" >&2; exit 2 ;;
esac

export GOPATH="$SCRATCH/gopath" GOMODCACHE="$SCRATCH/gomodcache" GOFLAGS=-mod=mod
export GOTOOLCHAIN="$TOOLCHAIN"

zip="$(go mod download -json "sigs.k8s.io/karpenter@$VERSION" | python3 -c \
  'import json, sys; print(json.load(sys.stdin)["Zip"])')"
src="$SCRATCH/src"
rm -rf "$src" && mkdir -p "$src"
(cd "$src" && unzip -q "$zip")
pkg="$src/sigs.k8s.io/karpenter@$VERSION/pkg/controllers/provisioning/scheduling"
chmod -R u+w "$src"

# Upstream stops at 20,000 pods; one more size, written into the scratch copy only.
cat > "$pkg/zz_scale_bench_test.go" <<'EOF'
//go:build test_performance

package scheduling_test

import "testing"

func BenchmarkScheduling40000(b *testing.B) {
	benchmarkScheduler(b, makeDiversePods(40000))
}
EOF

names=""
for size in $SIZES; do names="${names:+$names|}BenchmarkScheduling${size}\$"; done

cd "$src/sigs.k8s.io/karpenter@$VERSION"
echo "karpenter $VERSION, $(go version), $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -v go test -tags=test_performance -run '^$' -bench "^(${names})" \
  -benchtime 1x -count "$COUNT" -benchmem -timeout 6h ./pkg/controllers/provisioning/scheduling \
  2> "$SCRATCH/time.txt"
grep -E "Maximum resident|Elapsed" "$SCRATCH/time.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
