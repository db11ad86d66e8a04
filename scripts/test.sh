#!/usr/bin/env bash
# The test command: installs what the build and the tests need, builds, runs the whole suite.
# Idempotent. Prints the time each phase took.
set -euo pipefail
# Usage: scripts/test.sh [--libtorch wheel|debian] [--suites "core integration ..."]
#   --libtorch  the LibTorch to build and test against (default: the torch wheel's; see build.sh)
#   --suites    only these test binaries' folders (core, plugins, integration, fuzz) and what they
#               need, instead of everything (the script tests and benchmarks are then left out)
libtorch=wheel
suites=""
while [ $# -gt 0 ]; do
  case "$1" in
    --libtorch) libtorch=${2:?--libtorch needs wheel or debian}; shift ;;
    --suites) suites=${2:?--suites needs a list}; shift ;;
    *) echo "test: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(bash "$root/scripts/build.sh" --libtorch "$libtorch" --print-dir)
start=$(date +%s)

bash "$root/scripts/setup.sh" --with-tests --libtorch "$libtorch"
build_args=(--libtorch "$libtorch")
ctest_args=()
if [ -n "$suites" ]; then
  regex=""
  for s in $suites; do
    case "$s" in
      core|plugins|integration|fuzz) ;;
      *) echo "test: unknown suite '$s' (core, plugins, integration, fuzz)" >&2; exit 2 ;;
    esac
    build_args+=(--target "oml_${s}_tests")
    regex="${regex:+$regex|}^$s( \\(built without Faiss\\))?:"
  done
  ctest_args=(-R "$regex")
fi
bash "$root/scripts/build.sh" "${build_args[@]}"
built=$(date +%s)
echo "test.sh: build ($libtorch LibTorch) finished in $((built - start)) s"

cd "$build_dir"
status=0
ctest --output-on-failure -j "${OML_TEST_JOBS:-2}" --timeout 900 "${ctest_args[@]}" || status=$?
echo "test.sh: tests ($libtorch LibTorch) finished in $(($(date +%s) - built)) s (total $(($(date +%s) - start)) s)"
exit $status
