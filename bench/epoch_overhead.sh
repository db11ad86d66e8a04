#!/usr/bin/env bash
# What an epoch costs oml-train beyond its steps: the same optimizer steps run as E one-batch
# epochs (OML's balance sampler on 10 labels) and as 1 epoch of E batches (epoch_size), same
# config, data and validation (one, at the end); (wall(E x 1) - wall(1 x E)) / (E - 1) is the
# per-epoch cost. docs/benchmarks.md has the figures.
#
#   bash bench/epoch_overhead.sh [--epochs 300] [--runs 2] [--data DIR] [--config FILE] [--set k=v]...
#
# Default config: bench/oml_configs/short_epochs.yaml (issue 43's); --data is where
# bench/versus_oml.sh keeps the converted Fashion-MNIST (build/bench_data).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(bash "$root/scripts/build.sh" --print-dir)
epochs=300
runs=2
data=$build/bench_data
config=$root/bench/oml_configs/short_epochs.yaml
sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs=${2:?}; shift ;;
    --runs) runs=${2:?}; shift ;;
    --data) data=${2:?}; shift ;;
    --config) config=${2:?}; shift ;;
    --set) sets+=(--set "${2:?}"); shift ;;
    *) echo "epoch_overhead: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
oml_train=$build/pipelines/oml-train
[ -x "$oml_train" ] || { echo "epoch_overhead: build oml-train first" >&2; exit 2; }
if [ ! -f "$data/fashion_mnist/df.csv" ]; then
  "$build/pipelines/oml-convert" fashion-mnist --src /usr/share/datasets/fashion-mnist \
    --dst "$data/fashion_mnist" --progress quiet
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # name, then oml-train's --set arguments; prints the wall seconds
  local start end
  start=$(date +%s.%N)
  "$oml_train" --config "$config" --progress quiet --set "dataset_root=$data/fashion_mnist" \
    --set "logs_root=$out" --set "run_name=$1" "${sets[@]+"${sets[@]}"}" "${@:2}" > "$out/$1.log" 2>&1 ||
    { tail -20 "$out/$1.log" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

for r in $(seq 1 "$runs"); do
  short=$(run "short-$r" --set "max_epochs=$epochs" --set "valid_period=$epochs")
  long=$(run "long-$r" --set max_epochs=1 --set valid_period=1 --set "sampler.args.epoch_size=$epochs")
  per_epoch_ms=$(echo "($short - $long) * 1000 / ($epochs - 1)" | bc -l)
  printf 'run %d (load %s): %d x 1 batch %.1f s, 1 x %d batches %.1f s, %.1f ms per epoch\n' \
    "$r" "$(cut -d' ' -f1 /proc/loadavg)" "$epochs" "$short" "$epochs" "$long" "$per_epoch_ms"
done
