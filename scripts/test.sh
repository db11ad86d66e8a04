#!/usr/bin/env bash
# The test command: installs what the build and the tests need, builds, runs the whole suite.
# Idempotent. Prints the time each phase took.
set -euo pipefail
# Usage: scripts/test.sh [--libtorch wheel|debian] [--suites "core integration ..."] [--slow]
#   --libtorch  the LibTorch to build and test against (default: the torch wheel's; see build.sh)
#   --suites    only these test binaries' folders (core, plugins, integration, fuzz) and what they
#               need, instead of everything (the script tests and benchmarks are then left out)
#   --slow      also the tests labelled slow (OML's shipped configs run whole: ~25 min more here)
#   --optimize N  the build's -O level (1, 2 or 3; a build folder keeps what it was last given,
#               3 when new): 1 checks the code in a third less compile time (CI's 1.13 build)
libtorch=wheel
suites=""
slow=0
optimize=""
while [ $# -gt 0 ]; do
  case "$1" in
    --libtorch) libtorch=${2:?--libtorch needs wheel or debian}; shift ;;
    --suites) suites=${2:?--suites needs a list}; shift ;;
    --slow) slow=1 ;;
    --optimize)
      optimize=${2:?--optimize needs 1, 2 or 3}; shift
      case "$optimize" in 1|2|3) ;; *) echo "test: --optimize takes 1, 2 or 3, not '$optimize'" >&2; exit 2 ;; esac ;;
    *) echo "test: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(bash "$root/scripts/build.sh" --libtorch "$libtorch" --print-dir)
start=$(date +%s)

# What the build needs first; what only the tests need (the Python references' wheels, chromium,
# ...: minutes on a new machine, mostly downloads) installs beside the build, unless it may ask
# for a password (then before it, in the foreground).
bash "$root/scripts/setup.sh" --libtorch "$libtorch"
setup_pid=""
setup_log=""
finish_setup() {
  [ -n "$setup_pid" ] || return 0
  local pid=$setup_pid
  setup_pid=""
  local setup_status=0
  wait "$pid" || setup_status=$?
  cat "$setup_log"
  rm -f "$setup_log"
  if [ "$setup_status" != 0 ]; then
    echo "test: installing what the tests need failed (exit $setup_status, above)" >&2
    return "$setup_status"
  fi
}
build_args=(--libtorch "$libtorch")
[ -z "$optimize" ] || build_args+=("-DOML_OPTIMIZE=$optimize")
ctest_args=()
[ "$slow" = 1 ] || ctest_args+=(-LE slow)
if [ -n "$suites" ]; then
  regex=""
  for s in $suites; do
    case "$s" in
      core|plugins|integration|fuzz) ;;
      *) echo "test: unknown suite '$s' (core, plugins, integration, fuzz)" >&2; exit 2 ;;
    esac
    target="oml_${s}_tests"
    [ "$s" != plugins ] || target=oml_plugin_tests
    build_args+=(--target "$target")
    regex="${regex:+$regex|}^$s( \\((built without Faiss|slow)\\))?:"
  done
  ctest_args+=(-R "$regex")
fi
# The Python references' exports, shared by the run's test processes
# (tests/support/support.h, reference_export); a folder the caller gives is used as it is
# (.ci/run gives one to both LibTorches' runs).
references=""
if [ -z "${OML_TEST_REFERENCES:-}" ]; then
  references=$(mktemp -d "${TMPDIR:-/tmp}/oml-test-references.XXXXXX")
  export OML_TEST_REFERENCES=$references
fi
# Never stop a package installation half-way: on any exit, wait for it first (a Ctrl-C does not
# reach it: a script's background commands ignore SIGINT).
trap 'finish_setup || true; [ -z "$references" ] || rm -rf "$references"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ "$(id -u)" = 0 ] || sudo -n true 2> /dev/null; then
  setup_log=$(mktemp "${TMPDIR:-/tmp}/oml-test-setup.XXXXXX")
  bash "$root/scripts/setup.sh" --with-tests --libtorch "$libtorch" > "$setup_log" 2>&1 &
  setup_pid=$!
else
  bash "$root/scripts/setup.sh" --with-tests --libtorch "$libtorch"
fi
bash "$root/scripts/build.sh" "${build_args[@]}"
echo "test.sh: build ($libtorch LibTorch) finished in $(($(date +%s) - start)) s"
finish_setup
built=$(date +%s)

cd "$build_dir"
status=0
# The tests run in parallel, so each gets its share of the cores (as OMP_NUM_THREADS, which the
# commands and Python's torch read) instead of all of them: OpenMP threads that outnumber the
# cores spin at every barrier while the thread they wait for is descheduled.
jobs=${OML_TEST_JOBS:-2}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / jobs > 0 ? $(nproc) / jobs : 1 ))}
ctest --output-on-failure -j "$jobs" --timeout 900 "${ctest_args[@]}" || status=$?
echo "test.sh: tests ($libtorch LibTorch) finished in $(($(date +%s) - built)) s (total $(($(date +%s) - start)) s)"
exit $status
