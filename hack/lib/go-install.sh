# shellcheck shell=bash
# Shared by the hack/build-*.sh scripts that build one Go program straight from the Go module
# proxy (`go install module/cmd@version`) into a versioned cache directory.
#
# Contract of go_install_cached NAME PACKAGE VERSION BINARY:
#   - the binary lands in ${KARPENTER_CACHE_DIR:-$HOME/.cache/karpenter-py}/NAME/VERSION/bin/BINARY
#   - a warm cache returns at once; a flock serialises concurrent builds (waits at most
#     GO_INSTALL_LOCK_TIMEOUT_S, default 1800 s)
#   - the toolchain the module's go.mod asks for is fetched through the proxy (GOTOOLCHAIN=auto
#     unless the caller pinned one)
#   - the build is bounded by GO_INSTALL_TIMEOUT_S (default 1800 s): it never hangs
#   - on failure, one line on stderr names what, why (the last line of go's output) and the
#     cache path; the full log stays in the cache directory
#   - the last line printed on stdout is the bin dir
set -euo pipefail

go_install_cached() {
  local name="$1" package="$2" version="$3" binary="$4"
  local cache_root="${KARPENTER_CACHE_DIR:-$HOME/.cache/karpenter-py}/$name"
  local bin_dir="$cache_root/$version/bin"
  local log="$cache_root/$version/build.log"
  local what="$name: go install $package@$version"

  if [[ -x "$bin_dir/$binary" ]]; then
    echo "$bin_dir"
    return 0
  fi
  mkdir -p "$cache_root/$version" || { echo "$what: cannot create $cache_root/$version" >&2; return 1; }
  exec 8>"$cache_root/.lock"
  if command -v flock >/dev/null; then
    flock -w "${GO_INSTALL_LOCK_TIMEOUT_S:-1800}" 8 \
      || { echo "$what: gave up waiting for the build lock $cache_root/.lock" >&2; return 1; }
  fi
  if [[ -x "$bin_dir/$binary" ]]; then
    echo "$bin_dir"
    return 0
  fi
  command -v go >/dev/null \
    || { echo "$what: 'go' not found on PATH (needed to build into $bin_dir)" >&2; return 1; }

  local staging="$cache_root/$version/staging.$$"
  rm -rf "$staging"
  mkdir -p "$staging"
  # shellcheck disable=SC2064  # expand now: the path is fixed for this build
  trap "rm -rf '$staging'" RETURN
  local start rc=0
  start=$(date +%s)
  echo "$what (log: $log)" >&2
  # -trimpath and a static, stripped binary, as for the control plane; `go install pkg@version`
  # ignores any go.mod in the working directory, so the build is the module's own pinned graph.
  (
    cd "$staging"
    export CGO_ENABLED=0 GOBIN="$staging" GOFLAGS="-buildvcs=false"
    export GOTOOLCHAIN="${GOTOOLCHAIN_OVERRIDE:-auto}"
    exec timeout --kill-after=10 "${GO_INSTALL_TIMEOUT_S:-1800}" \
      go install -trimpath -ldflags "${GO_INSTALL_LDFLAGS:--s -w}" "$package@$version"
  ) >"$log" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    local why
    why="$(grep -v '^\s*$' "$log" | tail -n 1)"
    [[ $rc -eq 124 ]] && why="timed out after ${GO_INSTALL_TIMEOUT_S:-1800}s"
    echo "$what failed (exit $rc): ${why:-no output}; cache $bin_dir, log $log" >&2
    return 1
  fi
  local built
  built="$(find "$staging" -maxdepth 1 -type f -perm -u+x | head -n 1)"
  [[ -n "$built" ]] || { echo "$what: go install produced no binary; cache $bin_dir, log $log" >&2; return 1; }
  mkdir -p "$bin_dir"
  mv -f "$built" "$bin_dir/$binary"
  echo "$name: built in $(( $(date +%s) - start ))s" >&2
  echo "$bin_dir"
}
