#!/usr/bin/env bash
# Training throughput of oml-train on configs/fashion_mnist/benchmark_resnet18.yaml (resnet18 at
# 32 px, balance 8 x 4, soft triplet + hard miner, Adam 1e-3) at 1 and 2 ranks, optionally
# alternated with the Python/PyTorch way on the same data (these machines drift by ±20 % over
# minutes: compare medians of alternating rounds).
#
#   bench/train_throughput.sh [--data DIR] [--steps S] [--rounds R] [--peer PATH/train_torch.py]
#                             [--config FILE] [--side PX] [--precision LIST] [--set KEY=VALUE]...
#
# --data   an OML-format Fashion-MNIST folder (converted here into build/bench_data when absent)
# --peer   the peer script (not part of oml-cpp); run with $OML_PYTHON (default: the virtual
#          environment of scripts/setup.sh, the pinned torch 2.11)
# --config another Fashion-MNIST training config (e.g. configs/fashion_mnist/train_extractor.yaml,
#          the default pipeline); the peer always runs the resnet18 setup
# --side   the image side (transforms_train.args.im_size), e.g. 64
# --precision  a comma-separated list such as 32,bf16: instead of 1 vs 2 ranks, each round runs
#          one rank once per precision, alternating, and the medians are compared with the first
# --set    any further override for every oml-train run (e.g. --set extractor.args.arch=resnet50,
#          or a ViT: --set extractor.name=vit --set extractor.args.arch=vits16 --side 224)
# Prints one line per run and the medians. images/s is end to end: data loading, forward,
# backward, gradient all-reduce (2 ranks) and the Adam step, from train.jsonl's samples_per_s
# (global batch / wall time between consecutive steps); the first 3 steps are warm-up.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${OML_BUILD_DIR:-$root/build}
data=$build/bench_data/fashion_mnist
steps=100
rounds=3
peer=""
config=$root/configs/fashion_mnist/benchmark_resnet18.yaml
precisions=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --side) extra+=(--set "transforms_train.args.im_size=$2"); shift 2 ;;
    --precision) precisions=$2; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    --data) data=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --peer) peer=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    *) echo "train_throughput.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
warmup=3

if [ ! -f "$data/df.csv" ]; then
  "$build/pipelines/oml-convert" fashion-mnist --src /usr/share/datasets/fashion-mnist --dst "$data"
fi
# Training rows only, so that no validation runs at the end of the measured run.
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "split") c = i; print; next } $c == "train"' \
  "$data/df.csv" > "$data/df_train_only.csv"

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Mean images/s of one oml-train run after warm-up (total images / total time of those steps).
oml_run() {
  local nproc=$1 run=$2
  shift 2
  "$build/pipelines/oml-train" --config "$config" "${extra[@]}" "$@" \
    --nproc-per-node "$nproc" --progress quiet \
    --set "dataset_root=$data" --set dataframe_name=df_train_only.csv \
    --set "logs_root=$logs" --set "run_name=$run" --set logger=null \
    --set max_epochs=1 --set "sampler.args.epoch_size=$((steps + warmup))" >"$logs/$run.log" 2>&1 ||
    { echo "train_throughput.sh: oml-train failed ($nproc rank(s)):" >&2; tail -5 "$logs/$run.log" >&2; exit 1; }
  grep -o '"samples_per_s":[0-9.e+-]*' "$logs/$run/train.jsonl" | cut -d: -f2 | tail -n +$((warmup + 1)) |
    awk '{ t += 1 / $1; n++ } END { printf "%.1f\n", n / t }'
}

peer_run() {
  OMP_NUM_THREADS=2 "${OML_PYTHON:-/opt/oml-cpp/venv/bin/python}" "$peer" --data "$data" --steps "$steps" --threads 2 |
    grep -o '"images_per_s": [0-9.]*' | cut -d' ' -f2
}

if [ -n "$precisions" ]; then
  IFS=, read -r -a modes <<< "$precisions"
  declare -A figures=()
  for r in $(seq 1 "$rounds"); do
    for p in "${modes[@]}"; do
      v=$(oml_run 1 "r${r}_$p" --set "precision=$p"); figures[$p]+="$v "
      echo "round $r: oml-train precision $p  $v images/s"
    done
  done
  echo "median over $rounds rounds of $steps steps (after $warmup warm-up steps), 1 rank:"
  base=""
  for p in "${modes[@]}"; do
    m=$(printf '%s\n' ${figures[$p]} | median)
    [ -z "$base" ] && base=$m
    echo "  precision $p: $m images/s ($(awk -v a="$m" -v b="$base" 'BEGIN { printf "%.2f", a / b }')x precision ${modes[0]})"
  done
  exit 0
fi

one=() two=() py=()
for r in $(seq 1 "$rounds"); do
  v=$(oml_run 1 "r${r}_1rank"); one+=("$v"); echo "round $r: oml-train 1 rank   $v images/s"
  v=$(oml_run 2 "r${r}_2ranks"); two+=("$v"); echo "round $r: oml-train 2 ranks  $v images/s (2 x the per-rank batch)"
  if [ -n "$peer" ]; then
    v=$(peer_run); py+=("$v"); echo "round $r: PyTorch peer      $v images/s"
  fi
done
echo "median over $rounds rounds of $steps steps (after $warmup warm-up steps):"
echo "  oml-train 1 rank:  $(printf '%s\n' "${one[@]}" | median) images/s"
echo "  oml-train 2 ranks: $(printf '%s\n' "${two[@]}" | median) images/s"
if [ -n "$peer" ]; then echo "  PyTorch peer:      $(printf '%s\n' "${py[@]}" | median) images/s"; fi
