#!/usr/bin/env bash
# Training-step throughput of oml-cpp built against LibTorch 2.11 (build/) and against Debian's
# 1.13 (build-debian/), beside PyTorch 2.11 eager (the pinned wheel), in one run, alternating
# the three in every round (these machines drift by ±20 % over minutes: compare medians).
#
#   bench/libtorch_versions.sh [--rounds R] [--steps S] [--threads T] [--vit-steps S]
#                              [--vit-precision 32|bf16] [--no-resnet-bf16] [--no-debian]
#
# The step is bench_precision's / bench/precision_python.py's: forward and loss under autocast
# (bf16) or not (32), soft-margin triplet loss with hard mining in float32, backward, Adam;
# synthetic 3 x side x side batches of 32 (8 labels x 4). Cases: resnet18 at 32 and 64 px in 32
# and bf16, ViT-S/16 at 224 px in bf16 (fewer steps: ~3 s a step on 2 cores; --vit-precision 32
# on a CPU without AVX512-BF16 or AMX, where bf16 GEMMs are emulated and 3-8x slower than fp32).
# --no-resnet-bf16: leaves out resnet18's bf16 cases, for a CPU without AVX512-BF16 where oneDNN
# emulates bf16 convolutions (~3 images/s on an AMD Zen 3: minutes a measurement).
# --no-debian: LibTorch 2.11 and PyTorch only (no build-debian/ needed; its column shows "-").
# Prints one line per measurement and a table of medians (images/s) with the ratios to PyTorch.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=3
steps=10
vit_steps=2
threads=0
vit_precision=bf16
resnet_bf16=1
debian=1
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --vit-steps) vit_steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --vit-precision) vit_precision=$2; shift 2 ;;
    --no-resnet-bf16) resnet_bf16=0; shift ;;
    --no-debian) debian=0; shift ;;
    *) echo "libtorch_versions: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
python=${OML_PYTHON:-/opt/oml-cpp/venv/bin/python}
builds=("$root/build")
[ "$debian" = 1 ] && builds+=("$root/build-debian")
for b in "${builds[@]}"; do
  [ -x "$b/bench/bench_precision" ] || { echo "libtorch_versions: no $b/bench/bench_precision (build it first)" >&2; exit 2; }
done

# case: label | oml-cpp extractor | python arch | side | precision | steps
cases=(
  "resnet18 32px fp32|{name: resnet, args: {arch: resnet18}}|resnet18|32|32|$steps"
  "resnet18 32px bf16|{name: resnet, args: {arch: resnet18}}|resnet18|32|bf16|$steps"
  "resnet18 64px fp32|{name: resnet, args: {arch: resnet18}}|resnet18|64|32|$steps"
  "resnet18 64px bf16|{name: resnet, args: {arch: resnet18}}|resnet18|64|bf16|$steps"
  "ViT-S/16 224px $vit_precision|{name: vit, args: {arch: vits16}}|vits16|224|$vit_precision|$vit_steps"
)
if [ "$resnet_bf16" = 0 ]; then
  kept=()
  for c in "${cases[@]}"; do [[ "$c" == "resnet18 "*" bf16|"* ]] || kept+=("$c"); done
  cases=("${kept[@]}")
fi
results=$(mktemp)
last_value() { grep -o '[0-9.]* images/s' | tail -1 | cut -d' ' -f1; }
for r in $(seq 1 "$rounds"); do
  for c in "${cases[@]}"; do
    IFS='|' read -r label extractor arch side precision n <<< "$c"
    v=$("$root/build/bench/bench_precision" "$threads" 1 "$n" "$extractor" "$side" "$precision" | last_value)
    echo "round $r  $label  oml-cpp/2.11  $v" | tee -a "$results"
    if [ "$debian" = 1 ]; then
      v=$("$root/build-debian/bench/bench_precision" "$threads" 1 "$n" "$extractor" "$side" "$precision" | last_value)
      echo "round $r  $label  oml-cpp/1.13  $v" | tee -a "$results"
    fi
    v=$("$python" "$root/bench/precision_python.py" "$threads" 1 "$n" "$side" "$arch" "$precision" | last_value)
    echo "round $r  $label  PyTorch/2.11  $v" | tee -a "$results"
  done
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
echo
echo "| case | oml-cpp on 2.11 | oml-cpp on 1.13 | PyTorch 2.11 eager | 2.11 / PyTorch | 1.13 / PyTorch |"
echo "|---|---|---|---|---|---|"
for c in "${cases[@]}"; do
  label=${c%%|*}
  m() { grep -F "  $label  $1  " "$results" | awk '{print $NF}' | median; }
  a=$(m oml-cpp/2.11); p=$(m PyTorch/2.11)
  if [ "$debian" = 1 ]; then
    b=$(m oml-cpp/1.13)
    printf '| %s | %.1f | %.1f | %.1f | %.2f× | %.2f× |\n' "$label" "$a" "$b" "$p" \
      "$(echo "$a / $p" | bc -l)" "$(echo "$b / $p" | bc -l)"
  else
    printf '| %s | %.1f | - | %.1f | %.2f× | - |\n' "$label" "$a" "$p" "$(echo "$a / $p" | bc -l)"
  fi
done
echo "(images/s, medians of $rounds alternating rounds; threads: ${threads} (0: all cores))"
