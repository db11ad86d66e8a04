#!/usr/bin/env bash
# oml-train against OML 4.0's own training pipeline from PyPI
# (oml.lightning.pipelines.train.extractor_training_pipeline, run by bench/oml_pipeline.py) on
# the same OML config files (bench/oml_configs/), side by side in one session, alternating which
# program goes first: wall time (the whole process, start-up included), images/s (optimizer
# steps x batch / wall time) and the last validation's cmc@1. docs/benchmarks.md has the table.
#
#   bash bench/versus_oml.sh [--runs 2] [--cases "short_epochs default_job cub cars"] [--data DIR]
#                            [--out DIR] [--set key=value]...
#
# --set applies to every case and both programs (e.g. `--set max_epochs=600 --set
# valid_period=200` to shorten default_job). The data is prepared once under --data
# (default build/bench_data): Fashion-MNIST converted by oml-convert, and the CUB-like image
# folder of bench/make_image_folder.py. Needs OML 4.0's pipeline in the virtual environment
# (scripts/requirements-oml.txt, installed by scripts/setup.sh --with-tests) and oml-train built (scripts/build.sh --target oml-train
# --target oml-convert). Measure on an idle machine: the script prints the load average before
# every run.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(bash "$root/scripts/build.sh" --print-dir)
python=${OML_VENV:-/opt/oml-cpp/venv}/bin/python
runs=2
cases="short_epochs default_job cub"
data=$build/bench_data
out=$build/versus_oml
sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=${2:?}; shift ;;
    --cases) cases=${2:?}; shift ;;
    --data) data=${2:?}; shift ;;
    --out) out=${2:?}; shift ;;
    --set) sets+=("${2:?}"); shift ;;
    *) echo "versus_oml: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

oml_train=$build/pipelines/oml-train
for tool in "$oml_train" "$build/pipelines/oml-convert"; do
  [ -x "$tool" ] || { echo "versus_oml: $tool is not built (scripts/build.sh --target oml-train --target oml-convert)" >&2; exit 2; }
done
"$python" -c 'import oml.lightning.pipelines.train' 2>/dev/null ||
  { echo "versus_oml: OML's pipeline does not import in $python (scripts/requirements-oml.txt, installed by scripts/setup.sh --with-tests)" >&2; exit 2; }

mkdir -p "$data" "$out"
if [ ! -f "$data/fashion_mnist/df.csv" ]; then
  "$build/pipelines/oml-convert" fashion-mnist --src /usr/share/datasets/fashion-mnist \
    --dst "$data/fashion_mnist" --progress quiet
fi
if [ ! -f "$data/cub_like/df_with_bboxes.csv" ]; then
  "$python" "$root/bench/make_image_folder.py" --out "$data/cub_like"
fi

dataset_of() {
  case "$1" in
    cub|cars) echo "$data/cub_like" ;;
    *) echo "$data/fashion_mnist" ;;
  esac
}

# The config's batch: n_labels x n_instances of its balance sampler.
batch_of() {
  "$python" -c 'import sys, yaml; a = yaml.safe_load(open(sys.argv[1]))["sampler"]["args"]; print(a["n_labels"] * a["n_instances"])' "$1"
}

set_args=()
oml_sets=()
for s in "${sets[@]+"${sets[@]}"}"; do
  set_args+=(--set "$s")
  oml_sets+=(--set "$s")
done

results=$out/results.jsonl
: > "$results"

run_oml() {  # case run
  local config=$root/bench/oml_configs/$1.yaml workdir=$out/$1/oml-$2
  rm -rf "$workdir"
  "$python" "$root/bench/oml_pipeline.py" --config "$config" --workdir "$workdir" \
    --set "dataset_root=$(dataset_of "$1")" "${oml_sets[@]+"${oml_sets[@]}"}" > "$workdir.log" 2>&1 ||
    { echo "versus_oml: OML's pipeline failed on $1 (log: $workdir.log)" >&2; tail -20 "$workdir.log" >&2; exit 1; }
  tail -n 1 "$workdir.log"
}

run_oml_train() {  # case run
  local config=$root/bench/oml_configs/$1.yaml logs=$out/$1 name=oml-train-$2
  rm -rf "${logs:?}/$name"
  local start end
  start=$(date +%s.%N)
  "$oml_train" --config "$config" --progress quiet --set "dataset_root=$(dataset_of "$1")" \
    --set "logs_root=$logs" --set "run_name=$name" "${set_args[@]+"${set_args[@]}"}" > "$logs/$name.log" 2>&1 ||
    { echo "versus_oml: oml-train failed on $1 (log: $logs/$name.log)" >&2; tail -20 "$logs/$name.log" >&2; exit 1; }
  end=$(date +%s.%N)
  "$python" - "$logs/$name" "$start" "$end" <<'EOF'
import json, sys
run, start, end = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
steps = sum(1 for line in open(f"{run}/train.jsonl") if line.strip())
metrics = [json.loads(line) for line in open(f"{run}/metrics.jsonl") if line.strip()]
print(json.dumps({"program": "oml-train", "wall_s": round(end - start, 2), "steps": steps,
                  "cmc1": metrics[-1]["metrics"]["OVERALL/cmc/1"]}))
EOF
}

for case in $cases; do
  mkdir -p "$out/$case"
  batch=$(batch_of "$root/bench/oml_configs/$case.yaml")
  for run in $(seq 1 "$runs"); do
    # Odd runs start with OML, even runs with oml-train: drift of the machine hits both alike.
    order="oml oml-train"
    [ $((run % 2)) -eq 0 ] && order="oml-train oml"
    for program in $order; do
      echo "[$(date +%H:%M:%S)] $case run $run: $program (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
      if [ "$program" = oml ]; then line=$(run_oml "$case" "$run"); else line=$(run_oml_train "$case" "$run"); fi
      "$python" -c 'import json, sys; r = json.loads(sys.argv[1]); r.update(case=sys.argv[2], run=int(sys.argv[3]), batch=int(sys.argv[4])); r["images_per_s"] = round(r["steps"] * r["batch"] / r["wall_s"], 1); print(json.dumps(r))' \
        "$line" "$case" "$run" "$batch" | tee -a "$results" >&2
    done
  done
done

# The table: every run, then per case the ratio of the wall times (oml-train / OML).
"$python" - "$results" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print("| config | program | run | wall s | steps | images/s | cmc@1 |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['case']} | {r['program']} | {r['run']} | {r['wall_s']:.1f} | {r['steps']} | "
          f"{r['images_per_s']:.1f} | {r['cmc1']:.4f} |")
print()
for case in dict.fromkeys(r["case"] for r in rows):
    walls = {p: [r["wall_s"] for r in rows if r["case"] == case and r["program"] == p] for p in ("oml", "oml-train")}
    cmc = {p: [r["cmc1"] for r in rows if r["case"] == case and r["program"] == p] for p in ("oml", "oml-train")}
    if walls["oml"] and walls["oml-train"]:
        ratio = (sum(walls["oml-train"]) / len(walls["oml-train"])) / (sum(walls["oml"]) / len(walls["oml"]))
        print(f"{case}: oml-train / OML wall time {ratio:.2f}x; cmc@1 OML {min(cmc['oml']):.4f}-{max(cmc['oml']):.4f}, "
              f"oml-train {min(cmc['oml-train']):.4f}-{max(cmc['oml-train']):.4f}")
EOF
