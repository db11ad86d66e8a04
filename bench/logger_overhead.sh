#!/usr/bin/env bash
# Per-step cost of the run's logger on the default job (configs/fashion_mnist/train_extractor.yaml):
# the same training steps with logger none, tensorboard (the default), wandb (an offline run), mlflow into a file store
# (OML's configs/logger/mlflow.yaml: file:./ml-runs in the run directory) and mlflow to a local
# `mlflow server` (SQLite store, proxied artifacts; started here), alternating over rounds (these
# machines drift by ±20 % over minutes: compare medians of alternating rounds).
#
#   bench/logger_overhead.sh [--data DIR] [--steps S] [--rounds R]
#
# --data   an OML-format Fashion-MNIST folder (converted here into build/bench_data when absent)
# The step time is train.jsonl's: global batch / samples_per_s, the wall time between consecutive
# steps, which includes the previous step's recording (train.jsonl, the logger); the first 3 steps
# are warm-up (the default job's global batch is 160). Training rows only, so no validation runs;
# the lr warm-up is cut to half the run when the run is shorter than its 100 steps. The mlflow CLI is the one of
# scripts/requirements-tests.txt ($OML_VENV, default /opt/oml-cpp/venv).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${OML_BUILD_DIR:-$root/build}
venv=${OML_VENV:-/opt/oml-cpp/venv}
data=$build/bench_data/fashion_mnist
steps=200
rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --data) data=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "logger_overhead.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
warmup=3
config=$root/configs/fashion_mnist/train_extractor.yaml

if [ ! -f "$data/df.csv" ]; then
  "$build/pipelines/oml-convert" fashion-mnist --src /usr/share/datasets/fashion-mnist --dst "$data"
fi
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "split") c = i; print; next } $c == "train"' \
  "$data/df.csv" > "$data/df_train_only.csv"

logs=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -9 -- "-$server_pid" 2>/dev/null || true; fi
  rm -rf "$logs"
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # so that the EXIT trap stops the server

# A local tracking server on a free port, in a session of its own (killed as a group at the end).
port=$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# (No job control here: setsid then runs in the background job's own process, so $! is the server.)
MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false setsid "$venv/bin/mlflow" server --host 127.0.0.1 --port "$port" \
  --workers 1 --backend-store-uri "sqlite:///$logs/mlflow.db" --artifacts-destination "$logs/artifacts" \
  --serve-artifacts > "$logs/server.log" 2>&1 < /dev/null &
server_pid=$!
disown "$server_pid" 2>/dev/null || true  # its kill at the end is ours: no "Killed" report from bash
for _ in $(seq 1200); do curl -s -o /dev/null "http://127.0.0.1:$port/health" && break; sleep 0.1; done
curl -s -o /dev/null "http://127.0.0.1:$port/health" || { echo "logger_overhead.sh: mlflow server did not start:" >&2; tail -5 "$logs/server.log" >&2; exit 1; }

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Mean ms per step of one run after warm-up.
run() {
  local name=$1 logger=$2
  "$build/pipelines/oml-train" --config "$config" --progress quiet \
    --set "dataset_root=$data" --set dataframe_name=df_train_only.csv \
    --set "logs_root=$logs" --set "run_name=$name" --set "logger=$logger" \
    --set max_epochs=1 --set "sampler.args.epoch_size=$((steps + warmup))" \
    --set "scheduling.scheduler.args.warmup_steps=$(( (steps + warmup) / 2 < 100 ? (steps + warmup) / 2 : 100 ))" \
    >"$logs/$name.log" 2>&1 ||
    { echo "logger_overhead.sh: oml-train failed ($logger):" >&2; tail -5 "$logs/$name.log" >&2; exit 1; }
  if grep -q '^warning' "$logs/$name.log"; then
    echo "logger_overhead.sh: $logger warned:" >&2; grep '^warning' "$logs/$name.log" >&2; exit 1
  fi
  grep -o '"samples_per_s":[0-9.e+-]*' "$logs/$name/train.jsonl" | cut -d: -f2 | tail -n +$((warmup + 1)) |
    awk '{ t += 160 / $1; n++ } END { printf "%.2f\n", 1000 * t / n }'
}

names=(none tensorboard wandb mlflow_file mlflow_server)
loggers=("null" "{name: tensorboard}" "{name: wandb, args: {project: bench}}"
         "{name: mlflow, args: {experiment_name: bench, tracking_uri: 'file:./ml-runs'}}"
         "{name: mlflow, args: {experiment_name: bench, tracking_uri: 'http://127.0.0.1:$port'}}")
declare -A figures=()
for r in $(seq 1 "$rounds"); do
  for i in "${!names[@]}"; do
    v=$(run "r${r}_${names[$i]}" "${loggers[$i]}"); figures[${names[$i]}]+="$v "
    echo "round $r: ${names[$i]}  $v ms/step"
  done
done
echo "median over $rounds rounds of $steps steps (after $warmup warm-up steps), ms per step:"
base=$(printf '%s\n' ${figures[tensorboard]} | median)
for name in "${names[@]}"; do
  m=$(printf '%s\n' ${figures[$name]} | median)
  echo "  $name: $m ($(awk -v a="$m" -v b="$base" 'BEGIN { printf "%+.2f %%", 100 * (a - b) / b }') vs tensorboard)"
done
