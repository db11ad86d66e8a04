#!/usr/bin/env bash
# Four training runs whose train.jsonl and metrics.jsonl must stay byte for byte the same across a
# refactoring (on the CPU, where training is deterministic): the default job, an
# extractor_with_mlp + ArcFace run, a pairwise run on the default job's best.ckpt, and a 2-rank run.
#
#   bench/identical_runs.sh BUILD_DIR OUT_DIR [RUN...]     (RUN: default mlp pairwise ddp2)
#   bench/identical_runs.sh --compare BEFORE_DIR AFTER_DIR
#
# OUT_DIR/<run>.train.jsonl and .metrics.jsonl are the logs with the one timing field
# (samples_per_s) removed; --compare cmp's them and prints nothing else when they are identical.
# About 4 minutes on 2 cores (the default job is 2 of them). Needs data/fashion_mnist (the
# README's main command converts it).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
python=${OML_PYTHON:-${OML_VENV:-/opt/oml-cpp/venv}/bin/python}
if [ "${1:-}" = "--compare" ]; then
  status=0
  for run in default mlp pairwise ddp2; do
    for log in train metrics; do cmp "$2/$run.$log.jsonl" "$3/$run.$log.jsonl" || status=1; done
  done
  exit $status
fi
build=$(cd "${1:?BUILD_DIR}" && pwd)
mkdir -p "${2:?OUT_DIR}"
out=$(cd "$2" && pwd)
shift 2
runs=${*:-default mlp pairwise ddp2}
cd "$root"
train=$build/pipelines/oml-train
cfg=configs/fashion_mnist/train_extractor.yaml
short=(--set max_epochs=2 --set valid_period=1 --set scheduling.scheduler.args.warmup_steps=5)
for run in $runs; do
  # A run folder of an earlier call (its marker inside) is replaced; anything else is the user's.
  if [ -e "$out/$run" ] && [ ! -f "$out/$run/.identical-runs" ]; then
    echo "identical_runs: $out/$run exists and was not made by this script; choose another OUT_DIR" >&2
    exit 2
  fi
  rm -rf "${out:?}/$run"
  mkdir -p "$out/$run" && touch "$out/$run/.identical-runs"
  case $run in
    default) "$train" --config $cfg --set logs_root="$out/default" --progress quiet > "$out/default.log" 2>&1 ;;
    mlp) "$train" --config $cfg --set logs_root="$out/mlp" "${short[@]}" --set sampler.args.epoch_size=20 \
           --set 'extractor={name: extractor_with_mlp, args: {mlp_features: [64], extractor: {name: conv_net, args: {channels: [16, 32, 64], feat_dim: 128}}}}' \
           --progress quiet > "$out/mlp.log" 2>&1 ;;
    pairwise) ckpt=$(ls "$out"/default/*/checkpoints/best.ckpt | head -1)
      "$train" --config configs/fashion_mnist/train_pairwise.yaml --set logs_root="$out/pairwise" --set weights="$ckpt" \
        --set max_epochs=2 --set valid_period=1 --set sampler.args.epoch_size=30 \
        --set embeddings_cache_dir="$out/cache" --progress quiet > "$out/pairwise.log" 2>&1 ;;
    ddp2) "$train" --config $cfg --set logs_root="$out/ddp2" "${short[@]}" --set sampler.args.epoch_size=30 \
            --nproc-per-node 2 --progress quiet > "$out/ddp2.log" 2>&1 ;;
    *) echo "identical_runs: unknown run '$run'" >&2; exit 2 ;;
  esac
  echo "$run: exit $?"
  for log in train metrics; do
    "$python" - "$out/$run"/*/$log.jsonl > "$out/$run.$log.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    row = json.loads(line)
    row.pop("samples_per_s", None)  # the only timing field
    print(json.dumps(row, sort_keys=True))
PY
  done
done
