#!/usr/bin/env bash
# oml-serve against its Python peer (bench/serve_python.py), side by side in one run, and
# oml-search's throughput (docs/benchmarks.md#serving).
#
#   bash bench/serve_throughput.sh [CHECKPOINT]
#
# - the model: CHECKPOINT, or the default job's conv_net trained briefly here (its speed, not its
#   accuracy, is measured);
# - the gallery: Fashion-MNIST's 60,000 training images through it (oml-index build), once with
#   `exact` and once with `faiss_ivf` (target_recall 0.95 at k = 10);
# - per backend, per input (a 128-d embedding as JSON, or a 28x28 PNG as the body) and per
#   concurrency (1, 8, 32 clients, keep-alive; -l: answers of a batched forward pass differ in
#   their last digits, so in length): `ab -n N` against oml-serve, then against the peer
#   on the same gallery (exact: IndexFlatL2; faiss_ivf: IndexIVFFlat with oml-cpp's nlist and
#   tuned nprobe); requests/s, p50 and p99 latency;
# - oml-search: 10,000 query embeddings against the 60k gallery and against 1M clustered
#   clustered embeddings (bench/clustered_embeddings.py's law), exact and faiss_ivf: wall time and
#   peak RSS.
# Needs: a build (scripts/build.sh), data/fashion_mnist (scripts/run_default.sh converts it), ab
# (apache2-utils) and the venv's faiss-cpu (scripts/setup.sh --with-tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=$root/build/pipelines
PY=${OML_PYTHON:-/opt/oml-cpp/venv/bin/python}
W=${SERVE_BENCH_DIR:-/tmp/oml_serve_bench}
N=${SERVE_BENCH_REQUESTS:-2000}
mkdir -p "$W"
cd "$root"

ckpt=${1:-}
if [ -z "$ckpt" ]; then
  ckpt=$W/model/m/checkpoints/best.ckpt
  if [ ! -f "$ckpt" ]; then
    rm -rf "$W/model"
    "$B/oml-train" --config configs/fashion_mnist/train_extractor.yaml --set max_epochs=1 \
      --set limit_train_batches=50 --set scheduling.scheduler.args.warmup_steps=5 \
      --set logs_root="$W/model" --set run_name=m --progress quiet > "$W/train.log" 2>&1
  fi
fi

# The gallery: the training split (60,000 rows), paths absolute.
if [ ! -f "$W/gallery.csv" ]; then
  { head -1 data/fashion_mnist/df.csv
    grep ',train,' data/fashion_mnist/df.csv | sed "s#,images/#,$root/data/fashion_mnist/images/#"
  } > "$W/gallery.csv"
  { head -1 data/fashion_mnist/df.csv
    grep ',validation,' data/fashion_mnist/df.csv | sed "s#,images/#,$root/data/fashion_mnist/images/#"
  } > "$W/queries.csv"
fi
for backend in exact faiss_ivf; do
  if [ ! -f "$W/idx_$backend/CURRENT" ]; then
    rm -rf "$W/idx_$backend"
    "$B/oml-index" build --config configs/fashion_mnist/predict.yaml --set weights="$ckpt" \
      --set dataset_root="$W" --set dataframe_name=gallery.csv --set retrieval_backend.name=$backend \
      --out "$W/idx_$backend" --progress quiet 2>&1 | tail -1
  fi
done
if [ ! -f "$W/queries/embeddings.npy" ]; then
  "$B/oml-predict" --config configs/fashion_mnist/predict.yaml --set weights="$ckpt" --set dataset_root="$W" \
    --set dataframe_name=queries.csv --set save_dir="$W/queries" --progress quiet > /dev/null 2>&1
fi
image=$(sed -n 2p "$W/queries.csv" | cut -d, -f2)
"$PY" -c "
import json, numpy as np
e = np.load('$W/queries/embeddings.npy')[0]
json.dump({'embedding': [float(x) for x in e], 'k': 10}, open('$W/query.json', 'w'))"

port=18431
wait_up() {
  for _ in $(seq 300); do
    if curl -s -o /dev/null -X POST -d @"$W/query.json" "http://127.0.0.1:$port/search"; then return 0; fi
    sleep 0.2
  done
  echo "server did not start" >&2; return 1
}
# "server backend input clients req/s p50_ms p99_ms"
measure() {
  local name=$1 backend=$2
  for input in embedding image; do
    for c in 1 8 32; do
      if [ $input = embedding ]; then
        out=$(ab -k -l -q -n "$N" -c $c -T application/json -p "$W/query.json" "http://127.0.0.1:$port/search" 2>&1 || true)
      else
        out=$(ab -k -l -q -n "$N" -c $c -T image/png -p "$image" "http://127.0.0.1:$port/search?k=10" 2>&1 || true)
      fi
      failed=$(echo "$out" | awk '/Failed requests/ {print $3}')
      rps=$(echo "$out" | awk '/Requests per second/ {print $4}')
      p50=$(echo "$out" | awk '$1 == "50%" {print $2}')
      p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
      printf "%-10s %-10s %-10s %3d %9s %7s %7s  failed=%s\n" "$name" "$backend" $input $c "$rps" "$p50" "$p99" "$failed"
    done
  done
}

echo "# server backend input clients requests/s p50_ms p99_ms (ab -k -n $N; $(nproc) cores; $(date -u +%FT%TZ))"
for backend in exact faiss_ivf; do
  "$B/oml-serve" --index "$W/idx_$backend" --port $port --progress quiet > "$W/serve.log" 2>&1 &
  pid=$!
  wait_up
  measure oml-serve $backend
  kill -TERM $pid; wait $pid || true

  nlist=0; nprobe=1
  if [ $backend = faiss_ivf ]; then
    read -r nlist nprobe < <("$PY" -c "
import json; m = json.load(open('$W/idx_faiss_ivf/' + open('$W/idx_faiss_ivf/CURRENT').read().strip() + '/manifest.json'))
b = m['backend'].split(); print(dict(x.split('=') for x in b[1:])['nlist'], m['search_parameters']['nprobe'])")
  fi
  "$PY" bench/serve_python.py --index "$W/idx_$backend" --weights "$ckpt" --port $port --backend $backend \
    --nlist "$nlist" --nprobe "$nprobe" > "$W/peer.log" 2>&1 &
  pid=$!
  wait_up
  measure python $backend
  kill $pid; wait $pid 2>/dev/null || true
done

echo "# oml-search: 10,000 query embeddings (wall s, peak RSS MB)"
"$PY" -c "
import numpy as np
np.save('$W/q10k.npy', np.load('$W/queries/embeddings.npy')[:10000].astype(np.float32))"
search() {
  local index=$1 queries=$2 label=$3
  rm -rf "$W/out"
  /usr/bin/time -f "%e %M" -o "$W/time.txt" "$B/oml-search" --index "$index" --embeddings "$queries" \
    --top-k 10 --out "$W/out" --progress quiet > /dev/null 2>&1
  read -r s kb < "$W/time.txt"
  printf "%-34s %8s s %8d MB\n" "$label" "$s" $((kb / 1024))
}
for backend in exact faiss_ivf; do search "$W/idx_$backend" "$W/q10k.npy" "60k gallery, $backend"; done
if [ "${SERVE_BENCH_SKIP_1M:-0}" = 1 ]; then exit 0; fi
if [ ! -f "$W/emb1000000.npy" ]; then
  # bench/clustered_embeddings.py's law (labels U{0..N/5-1}, centre N(0, I) + 1.5 N(0, I)), with numpy
  "$PY" -c "
import numpy as np
r = np.random.default_rng(0); n, d = 1000000, 128
labels = r.integers(0, n // 5, n); centres = r.standard_normal((n // 5, d), dtype=np.float32)
np.save('$W/emb1000000.npy', centres[labels] + 1.5 * r.standard_normal((n, d), dtype=np.float32))"
fi
"$PY" -c "
import numpy as np
e = np.load('$W/emb1000000.npy', mmap_mode='r')
np.save('$W/q1m.npy', (np.asarray(e[:10000]) + 0.5 * np.random.default_rng(1).standard_normal((10000, 128))).astype(np.float32))"
for backend in exact faiss_ivf; do
  if [ ! -f "$W/idx1m_$backend/CURRENT" ]; then
    rm -rf "$W/idx1m_$backend"
    /usr/bin/time -f "%e %M" -o "$W/time.txt" "$B/oml-index" build --embeddings "$W/emb1000000.npy" \
      --set retrieval_backend.name=$backend --out "$W/idx1m_$backend" --progress quiet > "$W/build1m.log" 2>&1
    read -r s kb < "$W/time.txt"
    printf "%-34s %8s s %8d MB   %s\n" "1M build, $backend" "$s" $((kb / 1024)) "$(tail -1 "$W/build1m.log")"
  fi
  search "$W/idx1m_$backend" "$W/q1m.npy" "1M gallery, $backend"
done
