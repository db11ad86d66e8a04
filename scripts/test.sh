#!/usr/bin/env bash
# The test command: installs what the build and the tests need, builds, runs the whole suite.
# Idempotent. Prints the time each phase took.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${OML_BUILD_DIR:-$root/build}
start=$(date +%s)

bash "$root/scripts/setup.sh" --with-tests
bash "$root/scripts/build.sh"
built=$(date +%s)
echo "test.sh: build finished in $((built - start)) s"

cd "$build_dir"
status=0
ctest --output-on-failure -j "${OML_TEST_JOBS:-2}" --timeout 900 || status=$?
echo "test.sh: tests finished in $(($(date +%s) - built)) s (total $(($(date +%s) - start)) s)"
exit $status
