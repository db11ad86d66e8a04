#!/usr/bin/env bash
# Configures (once) and builds oml-cpp. Idempotent: a second run only rebuilds what changed.
# Uses Ninja and ccache when present.
set -euo pipefail
# Usage: scripts/build.sh [--commands] [--libtorch wheel|debian] [--target T]... [CMAKE_OPTION]...
#   --commands  builds only the commands and their plugins (target oml_commands), not the tests
#               and benchmarks: what the main job needs.
#   --libtorch  the LibTorch to build against: the pinned torch wheel's in scripts/setup.sh's
#               virtual environment (default; into build/), or Debian 12's 1.13 (into build-debian/).
#   --target    builds just that target (repeatable).
#   --print-dir prints the build folder for these options and exits (test.sh, run_default.sh).
# OML_BUILD_DIR overrides the build folder, OML_VENV the virtual environment, OML_JOBS the jobs.
targets=()
libtorch=wheel
print_dir=0
cmake_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --commands) targets+=(--target oml_commands) ;;
    --libtorch) libtorch=${2:?--libtorch needs wheel or debian}; shift ;;
    --target) targets+=(--target "${2:?--target needs a name}"); shift ;;
    --print-dir) print_dir=1 ;;
    *) cmake_args+=("$1") ;;
  esac
  shift
done
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${OML_VENV:-/opt/oml-cpp/venv}
case "$libtorch" in
  wheel) default_dir=$root/build ;;
  debian) default_dir=$root/build-debian ;;
  *) echo "build: --libtorch takes wheel or debian, not '$libtorch'" >&2; exit 2 ;;
esac
build_dir=${OML_BUILD_DIR:-$default_dir}
if [ "$print_dir" = 1 ]; then
  echo "$build_dir"
  exit 0
fi
jobs=${OML_JOBS:-$(nproc)}

if [ "$libtorch" = wheel ]; then
  # torch.utils.cmake_prefix_path, found without importing torch: scripts/test.sh installs the
  # tests' wheels into the same environment while this builds, and an import then could meet a
  # dependency of torch's half replaced.
  if ! prefix=$("$venv/bin/python" -c 'import importlib.util, os
spec = importlib.util.find_spec("torch")
print(os.path.join(os.path.dirname(spec.origin), "share", "cmake"))' 2>/dev/null) || [ ! -d "$prefix" ]; then
    echo "build: no torch in $venv; run scripts/setup.sh first (or --libtorch debian)" >&2
    exit 2
  fi
  torch_args=(-DCMAKE_PREFIX_PATH="$prefix" -DOML_PYTHON="$venv/bin/python")
  # The wheel's CMake package enables CUDA; CMake looks for nvcc on PATH.
  if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export CUDACXX=/usr/local/cuda/bin/nvcc
  fi
else
  torch_args=(-DCMAKE_PREFIX_PATH=/usr -DOML_PYTHON="$venv/bin/python")
fi

# A build folder belongs to one LibTorch: mixing them would link two.
if [ -f "$build_dir/CMakeCache.txt" ]; then
  configured=$(sed -n 's/^OML_LIBTORCH_KIND:STRING=//p' "$build_dir/CMakeCache.txt")
  if [ -n "$configured" ] && [ "$configured" != "$libtorch" ]; then
    echo "build: $build_dir was configured for --libtorch $configured; use another OML_BUILD_DIR for $libtorch" >&2
    exit 2
  fi
fi

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  # A new build folder is a cold build: a unity build, the libraries' files one folder a unit and
  # the test files eight a unit (docs/building.md#keeping-builds-fast). Give -DOML_UNITY_BUILD=OFF to work on the code.
  cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DOML_UNITY_BUILD=ON \
    -DOML_LIBTORCH_KIND="$libtorch" "${torch_args[@]}" "${cmake_args[@]}"
elif [ ${#cmake_args[@]} -gt 0 ]; then
  cmake -S "$root" -B "$build_dir" "${cmake_args[@]}"
fi
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
