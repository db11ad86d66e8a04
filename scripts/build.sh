#!/usr/bin/env bash
# Configures (once) and builds oml-cpp into build/ (or $OML_BUILD_DIR). Idempotent: a second
# run only rebuilds what changed. Uses Ninja and ccache when present.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${OML_BUILD_DIR:-$root/build}
jobs=${OML_JOBS:-$(nproc)}

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
elif [ $# -gt 0 ]; then
  cmake -S "$root" -B "$build_dir" "$@"
fi
cmake --build "$build_dir" -j "$jobs"
