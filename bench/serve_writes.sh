#!/usr/bin/env bash
# What a change to a served index costs (docs/benchmarks.md#writes-to-a-served-index): the
# latency of POST /items with 1 item and with 1,000 items, and of DELETE /items/{id}, against
# galleries of 100k and 1M random 128-d embeddings (exact backend), and the bytes each change
# writes to the index folder. Side by side with another oml-serve binary (the previous version,
# which wrote a whole new version per change) when one is given.
#
#   bash bench/serve_writes.sh [--sizes "100000 1000000"] [--repeat 20] [--peer PATH/TO/oml-serve]
#
# Each size: oml-index build --embeddings, then per server binary a fresh copy of the folder,
# the server started on it (--compact-min-mb past any log the run makes, so that the figures are
# the appends; compaction is measured apart, as `oml-index compact`), `--repeat` requests of
# each kind timed by curl (time_total), their median and p90, and the bytes the server wrote to
# storage per request (/proc/PID/io write_bytes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=$root/build/pipelines
PY=${OML_PYTHON:-/opt/oml-cpp/venv/bin/python}
W=${SERVE_WRITES_DIR:-/tmp/oml_serve_writes}
sizes="100000 1000000"
repeat=20
peer=""
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes=$2; shift ;;
    --repeat) repeat=$2; shift ;;
    --peer) peer=$2; shift ;;
    *) echo "serve_writes: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$W"

# One item's and a thousand items' bodies (128-d rows far from the gallery).
"$PY" - "$W" <<'EOF'
import json, sys, numpy as np
w = sys.argv[1]
rng = np.random.default_rng(1)
def item(i):
    return {"embedding": (rng.standard_normal(128) + 5).round(6).tolist(), "path": f"new/{i}.jpg", "label": i}
json.dump(item(0), open(f"{w}/one.json", "w"))
json.dump({"items": [item(i) for i in range(1000)]}, open(f"{w}/many.json", "w"))
EOF

stats() {  # median and p90 (ms) of the seconds on stdin
  "$PY" -c 'import sys,statistics as s; v=sorted(float(x)*1000 for x in sys.stdin if x.strip()); print(f"{s.median(v):.2f} {v[int(0.9*(len(v)-1))]:.2f}")'
}

port=18731
run_server() {  # binary, folder -> starts it, waits for /health
  "$1" --index "$2" --port $port --threads 2 --workers 8 --compact-min-mb 1000000 --progress quiet \
    > "$W/serve.out" 2> "$W/serve.err" &
  server=$!
  for _ in $(seq 600); do curl -s -o /dev/null "http://127.0.0.1:$port/health" && return; sleep 0.1; done
  echo "serve_writes: the server did not start: $(cat "$W/serve.err")" >&2
  exit 1
}
run_peer_server() {  # the previous version has no --compact-min-mb
  "$1" --index "$2" --port $port --threads 2 --workers 8 --progress quiet > "$W/serve.out" 2> "$W/serve.err" &
  server=$!
  for _ in $(seq 600); do curl -s -o /dev/null "http://127.0.0.1:$port/health" && return; sleep 0.1; done
  echo "serve_writes: the peer server did not start: $(cat "$W/serve.err")" >&2
  exit 1
}

written() { awk '/^write_bytes/ {print $2}' "/proc/$server/io"; }

measure() {  # label -> one line of the table
  local label=$1
  local before after t_one t_many t_del bytes_one bytes_many bytes_del
  before=$(written)
  t_one=$(for _ in $(seq "$repeat"); do
    curl -s -o /dev/null -w '%{time_total}\n' -X POST --data-binary @"$W/one.json" "http://127.0.0.1:$port/items"
  done | stats)
  after=$(written); bytes_one=$(( (after - before) / repeat )); before=$after
  t_many=$(for _ in $(seq "$repeat"); do
    curl -s -o /dev/null -w '%{time_total}\n' -X POST --data-binary @"$W/many.json" "http://127.0.0.1:$port/items"
  done | stats)
  after=$(written); bytes_many=$(( (after - before) / repeat )); before=$after
  t_del=$(for i in $(seq "$repeat"); do
    curl -s -o /dev/null -w '%{time_total}\n' -X DELETE "http://127.0.0.1:$port/items/$((i * 7))"
  done | stats)
  after=$(written); bytes_del=$(( (after - before) / repeat ))
  printf "%-28s %-8s | %8s %8s %11s | %8s %8s %11s | %8s %8s %11s\n" "$label" "$n" \
    ${t_one% *} ${t_one#* } $bytes_one ${t_many% *} ${t_many#* } $bytes_many ${t_del% *} ${t_del#* } $bytes_del
}

printf "%-28s %-8s | %-30s | %-30s | %-30s\n" "server" "gallery" "POST 1 item: p50 p90 ms, bytes" \
  "POST 1000 items: p50 p90 ms, bytes" "DELETE: p50 p90 ms, bytes"
for n in $sizes; do
  if [ ! -f "$W/index_$n/CURRENT" ]; then
    rm -rf "$W/index_$n" "$W/g_$n.npy"
    "$PY" -c "import numpy as np; np.save('$W/g_$n.npy', np.random.default_rng(0).standard_normal(($n, 128)).astype('float32'))"
    "$B/oml-index" build --embeddings "$W/g_$n.npy" --out "$W/index_$n" --progress quiet > /dev/null
  fi
  rm -rf "$W/run"; cp -r "$W/index_$n" "$W/run"
  run_server "$B/oml-serve" "$W/run"
  measure "oml-serve (change log)"
  kill -TERM $server; wait $server || true
  start=$(date +%s.%N)
  "$B/oml-index" compact --index "$W/run" --progress quiet > /dev/null
  printf "  oml-index compact of the log above: %.2f s\n" "$(echo "$(date +%s.%N) - $start" | bc)"
  if [ -n "$peer" ]; then
    rm -rf "$W/run"; cp -r "$W/index_$n" "$W/run"
    run_peer_server "$peer" "$W/run"
    measure "peer (full rewrite)"
    kill -TERM $server; wait $server || true
  fi
done
rm -rf "$W/run"
