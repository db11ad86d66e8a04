#!/usr/bin/env bash
# Configures (once) and builds oml-cpp into build/ (or $OML_BUILD_DIR). Idempotent: a second
# run only rebuilds what changed. Uses Ninja and ccache when present.
set -euo pipefail
# Usage: scripts/build.sh [--commands] [CMAKE_OPTION]...
#   --commands  builds only the commands and their plugins (target oml_commands), not the tests
#               and benchmarks: what the main job needs.
targets=()
if [ "${1:-}" = "--commands" ]; then
  targets=(--target oml_commands)
  shift
fi
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
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
