#!/usr/bin/env bash
# Training-step throughput of oml-cpp (eager, and on CUDA with `cuda_graphs`) beside PyTorch eager
# and torch.compile (default mode), for issue 42's table: resnet18 at 64 px, resnet50 at 224 px and
# ViT-S/16 at 224 px, fp32 and bf16, at batch 32 and 256 (the step: bench_precision's and
# bench/precision_python.py's).
#
#   bench/step_table.sh [--device cpu|cuda] [--bench PATH] [--python PY] [--rounds R] [--steps S]
#                       [--batches "32 256"] [--cases "resnet18 resnet50 vits16"] [--no-compile]
#                       [--compile-batches "256"] [--channels-last] [--budget-s SECONDS]
#
# For each case and batch: R rounds of oml-cpp (then, on cuda, oml-cpp replaying its step from a
# CUDA graph: OML_BENCH_CUDA_GRAPHS=1) then PyTorch eager, alternating (one process each,
# both precisions inside), then one torch.compile process of R rounds (its compilation, once per
# precision, is paid in each precision's warm-up step and not timed; --compile-batches limits it to
# those batch sizes, as compiling costs a device call most of its minutes). --channels-last adds,
# in each round, oml-cpp and PyTorch eager with the model and batch in the channels_last memory
# format (bench_precision's `last` modes; OML_BENCH_CHANNELS_LAST=1), the layout torch.compile
# picks for convolutional networks. OML_BENCH_CUDNN_BENCHMARK=1 in the environment turns cuDNN's
# benchmark search on in every process, oml-cpp's and PyTorch's alike (`benchmark: true`). Cases left when the elapsed
# time passes --budget-s are listed as not run, so that a device call with a hard limit still
# returns its table. Prints each measurement, then a table of medians (images/s) and ratios.
# scripts/gpu_bundle.sh's check.sh runs it on cuda; on the CPU it rehearses the same command:
#   bench/step_table.sh --rounds 1 --steps 1 --batches 8 --cases resnet18
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
device=cpu
bench=$root/build/bench/bench_precision
python=${OML_PYTHON:-/opt/oml-cpp/venv/bin/python}
rounds=3
steps=20
batches="32 256"
cases="resnet18 resnet50 vits16"
compile=1
compile_batches=
channels_last=0
budget=0
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --bench) bench=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --no-compile) compile=0; shift ;;
    --compile-batches) compile_batches=$2; shift 2 ;;
    --channels-last) channels_last=1; shift ;;
    --budget-s) budget=$2; shift 2 ;;
    *) echo "step_table: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$bench" ] || { echo "step_table: no $bench (build bench_precision first)" >&2; exit 2; }
case "$device" in cpu) export OML_BENCH_DEVICE=cpu ;; cuda) export OML_BENCH_DEVICE=cuda ;;
  *) echo "step_table: --device must be cpu or cuda, got '$device'" >&2; exit 2 ;; esac

# case -> oml-cpp extractor | Python arch | side
spec() {
  case "$1" in
    resnet18) echo "{name: resnet, args: {arch: resnet18}}|resnet18|64" ;;
    resnet50) echo "{name: resnet, args: {arch: resnet50}}|resnet50|224" ;;
    vits16) echo "{name: vit, args: {arch: vits16}}|vits16|224" ;;
    *) echo "step_table: unknown case '$1' (resnet18, resnet50, vits16)" >&2; exit 2 ;;
  esac
}
for c in $cases; do spec "$c" > /dev/null || exit 2; done  # spec's exit inside $(...) would not end the script
results=$(mktemp)
trap 'rm -f "$results"' EXIT
start=$(date +%s)
# "round N  32 NCHW  X images/s" (oml-cpp) and "round N  python 32  X images/s" -> "32 X" / "bf16 X"
values() { grep -E '^round [0-9]+ ' | sed -E 's/^round [0-9]+ +(python +)?(32|bf16)( NCHW| channels_last)? +([0-9.]+) images\/s.*/\2 \4/'; }
record() { while read -r precision v; do echo "$1|$2|$precision|$3|$v" | tee -a "$results"; done; }
skipped=()
for c in $cases; do
  IFS='|' read -r extractor arch side <<< "$(spec "$c")"
  for batch in $batches; do
    if [ "$budget" -gt 0 ] && [ $(($(date +%s) - start)) -ge "$budget" ]; then
      skipped+=("$c batch $batch")
      continue
    fi
    # A program that fails (out of memory at batch 256, ...) leaves its cells empty, not the table.
    for r in $(seq 1 "$rounds"); do
      "$bench" 0 1 "$steps" "$extractor" "$side" nchw "$batch" | values | record "$c" "$batch" oml-cpp ||
        echo "step_table: oml-cpp failed on $c batch $batch" >&2
      if [ "$device" = cuda ]; then
        OML_BENCH_CUDA_GRAPHS=1 "$bench" 0 1 "$steps" "$extractor" "$side" nchw "$batch" | values |
          record "$c" "$batch" graphs || echo "step_table: oml-cpp with cuda_graphs failed on $c batch $batch" >&2
      fi
      "$python" "$root/bench/precision_python.py" 0 1 "$steps" "$side" "$arch" all "$batch" 2>/dev/null |
        values | record "$c" "$batch" eager || echo "step_table: PyTorch eager failed on $c batch $batch" >&2
      if [ "$channels_last" = 1 ]; then
        "$bench" 0 1 "$steps" "$extractor" "$side" last "$batch" | values | record "$c" "$batch" last ||
          echo "step_table: oml-cpp channels_last failed on $c batch $batch" >&2
        OML_BENCH_CHANNELS_LAST=1 "$python" "$root/bench/precision_python.py" 0 1 "$steps" "$side" "$arch" all \
          "$batch" 2>/dev/null | values | record "$c" "$batch" eager_last ||
          echo "step_table: PyTorch eager channels_last failed on $c batch $batch" >&2
      fi
    done
    if [ "$compile" = 1 ] && { [ -z "$compile_batches" ] || [[ " $compile_batches " == *" $batch "* ]]; }; then
      OML_BENCH_COMPILE=1 "$python" "$root/bench/precision_python.py" 0 "$rounds" "$steps" "$side" "$arch" all \
        "$batch" 2>/dev/null | values | record "$c" "$batch" compile ||
        echo "step_table: torch.compile failed on $c batch $batch" >&2
    fi
  done
done

median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
m() { { grep -F "$1|$2|$3|$4|" "$results" || true; } | cut -d'|' -f5 | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "nan" || b == "nan" || b == 0) print "-"; else printf "%.2f×", a / b}'; }
# table ROW: a header, then ROW for every case, batch and precision with a measurement in it
# (ROW reads $c, $batch, $precision and prints its line, or nothing).
table() {
  local row=$1 header=$2
  echo
  echo "$header"
  echo "$header" | sed -E 's/[^|]+/---/g'
  for c in $cases; do
    for batch in $batches; do
      for precision in 32 bf16; do "$row"; done
    done
  done
}
nchw_row() {
  local a e k g
  a=$(m "$c" "$batch" "$precision" oml-cpp)
  [ "$a" = nan ] && return
  e=$(m "$c" "$batch" "$precision" eager)
  k=$(m "$c" "$batch" "$precision" compile)
  g=$(m "$c" "$batch" "$precision" graphs)
  echo "| $c | $batch | $precision | $a | $g | $e | $k | $(ratio "$a" "$e") | $(ratio "$a" "$k") |" \
    "$(ratio "$g" "$e") | $(ratio "$g" "$k") |"
}
channels_last_row() {
  local a l e k
  l=$(m "$c" "$batch" "$precision" last)
  [ "$l" = nan ] && return
  a=$(m "$c" "$batch" "$precision" oml-cpp)
  e=$(m "$c" "$batch" "$precision" eager_last)
  k=$(m "$c" "$batch" "$precision" compile)
  echo "| $c | $batch | $precision | $a | $l | $e | $k | $(ratio "$l" "$a") | $(ratio "$l" "$e") | $(ratio "$l" "$k") |"
}
table nchw_row "| case | batch | precision | oml-cpp | oml-cpp cuda_graphs | PyTorch eager | torch.compile | oml-cpp / eager | oml-cpp / compile | graphs / eager | graphs / compile |"
[ "$channels_last" = 1 ] &&
  table channels_last_row "| case | batch | precision | oml-cpp NCHW | oml-cpp channels_last | PyTorch eager channels_last | torch.compile | channels_last: oml-cpp / NCHW | oml-cpp / eager | oml-cpp / compile |"
echo "(images/s on $device, medians of $rounds rounds of $steps steps; $(($(date +%s) - start)) s in all)"
for s in ${skipped[@]+"${skipped[@]}"}; do echo "not run (--budget-s $budget): $s"; done
