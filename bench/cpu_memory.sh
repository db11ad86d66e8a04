#!/usr/bin/env bash
# What the commands hold in memory on a CPU machine (docs/benchmarks.md, "What the CUDA wheel
# costs on a CPU machine"): the peak resident set (/usr/bin/time's maximum RSS) of
#   - each command doing nothing but start (`--version`): what every process pays before work;
#   - `bench_retrieval`: validating 60,000 x 128 embeddings (top 5), when it is built;
#   - one epoch of the default job (100 steps of 160 images, then validation on 10,000), with
#     --train (about a minute on 2 cores).
#
#   bash bench/cpu_memory.sh [--train] [BUILD_DIR]     (default: scripts/build.sh's folder)
#
# Compare two builds (before and after a change, or the wheel's LibTorch and Debian's) by running
# it once per build folder. Needs Fashion-MNIST converted in data/fashion_mnist for --train
# (scripts/run_default.sh does it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
train=0
build=
for arg in "$@"; do
  case "$arg" in
    --train) train=1 ;;
    -*) echo "cpu_memory: unknown option '$arg'" >&2; exit 2 ;;
    *) build=$arg ;;
  esac
done
[ -n "$build" ] || build=$(bash "$root/scripts/build.sh" --print-dir)
[ -x "$build/pipelines/oml-train" ] || { echo "cpu_memory: $build/pipelines/oml-train is not built" >&2; exit 2; }

peak_mb() {  # COMMAND... -> the peak RSS in MB; the command's output goes to $work/last.log
  /usr/bin/time -f '%M' -o "$work/rss" "$@" >"$work/last.log" 2>&1 ||
    { echo "cpu_memory: failed: $*" >&2; tail -5 "$work/last.log" >&2; exit 1; }
  awk '{ printf "%.0f", $1 / 1024 }' "$work/rss"
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "build: $build ($(grep -m1 '^CMAKE_BUILD_TYPE' "$build/CMakeCache.txt" 2>/dev/null || true))"
"$build/pipelines/oml-train" --version | sed 's/^/  /'
printf '%-46s %s\n' "case" "peak RSS (MB)"
for cmd in oml-train oml-validate oml-serve oml-index; do
  [ -x "$build/pipelines/$cmd" ] && printf '%-46s %s\n' "$cmd --version" "$(peak_mb "$build/pipelines/$cmd" --version)"
done
if [ -x "$build/bench/bench_retrieval" ]; then
  printf '%-46s %s\n' "bench_retrieval --n 60000 --dim 128 (top 5)" \
    "$(peak_mb "$build/bench/bench_retrieval" --n 60000 --dim 128 --threads 2)"
fi
if [ "$train" = 1 ]; then
  [ -f "$root/data/fashion_mnist/df.csv" ] ||
    { echo "cpu_memory: --train needs data/fashion_mnist (scripts/run_default.sh converts it)" >&2; exit 2; }
  printf '%-46s %s\n' "oml-train default job, 1 epoch" "$(peak_mb "$build/pipelines/oml-train" \
    --config "$root/configs/fashion_mnist/train_extractor.yaml" --set max_epochs=1 \
    --set dataset_root="$root/data/fashion_mnist" --set logs_root="$work/logs" --progress quiet)"
fi
