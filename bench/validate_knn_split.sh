#!/usr/bin/env bash
# The k-NN phase of `oml-validate --nproc-per-node W` (one intra-op thread per rank) on N x 128
# precomputed embeddings, for two builds measured alternately (A B A B ...): docs/benchmarks.md,
# "Exact k-NN split over the ranks". A build is a command that runs its oml-validate, e.g.
#   bench/validate_knn_split.sh "env LD_LIBRARY_PATH=/tmp/main /tmp/main/oml-validate" \
#       build/pipelines/oml-validate [N=200000] [W=2] [ROUNDS=2]
# The k-NN time is read from rank 0's final k-NN progress line (queries / rate): the bar starts
# when the search starts and ends when every query's list is on rank 0. The metrics of every run
# must be identical; the script says so.
set -euo pipefail
old=$1 new=$2 n=${3:-200000} world=${4:-2} rounds=${5:-2}
here=$(cd "$(dirname "$0")" && pwd)
work=${OML_BENCH_DIR:-/tmp/oml_validate_knn_split}
mkdir -p "$work"
[ -f "$work/emb$n.npy" ] || (cd "$work" && python3 "$here/clustered_embeddings.py" "$n")
cat >"$work/v.yaml" <<YAML
dataset_root: $work
dataframe_name: df$n.csv
logs_root: $work/logs
embeddings: $work/emb$n.npy
num_threads: 1
ddp: {timeout_s: 7200}
metric_args: {cmc_top_k: [1, 5], precision_top_k: [5], map_top_k: [5]}
YAML
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
for round in $(seq "$rounds"); do
  for build in old new; do
    cmd=${!build}
    name=$build$round
    log=$work/$name.log
    rm -rf "$work/logs/$name"
    start=$(date +%s.%N)
    $cmd --config "$work/v.yaml" --nproc-per-node "$world" --set run_name="$name" >"$log" 2>&1 ||
      { tail -n 20 "$log"; exit 1; }
    total=$(echo "$(date +%s.%N) - $start" | bc)
    # "[rank 0] k-NN 200000/200000 query 1234.5 query/s 02:42"
    rate=$(grep -a 'k-NN [0-9]*/[0-9]* query' "$log" | tail -n 1 | awk '{for (i = 1; i <= NF; i++) if ($i == "query/s") print $(i - 1)}')
    printf 'round %s %-3s k-NN %8.1f s (%s query/s), whole command %6.1f s, load %s\n' "$round" "$build" \
      "$(echo "$n / $rate" | bc -l)" "$rate" "$total" "$(cut -d' ' -f1-2 /proc/loadavg)"
  done
done
first=$work/logs/old1/metrics.json
for file in "$work"/logs/{old,new}*/metrics.json; do
  cmp -s "$first" "$file" || { echo "metrics differ: $first $file"; exit 1; }
done
echo "metrics.json identical in all $((2 * rounds)) runs:"
cat "$first"
