#!/usr/bin/env bash
# Where a command's resident set goes, phase by phase (docs/benchmarks.md#approximate-k-nn-faiss-backends).
# Runs the command, samples /proc/<pid>/status every INTERVAL seconds (RssAnon: heap and other
# private memory; RssFile: pages of mapped files, a memory-mapped gallery's included; RssShmem),
# and stamps each line the command writes with the seconds since its start, so a peak can be
# put next to the log line of the phase it happened in.
#
#   bench/rss_phases.sh OUT_PREFIX [INTERVAL] -- COMMAND [ARG]...
#
# writes OUT_PREFIX.samples.tsv (seconds, RssAnon, RssFile, RssShmem in MB) and OUT_PREFIX.log
# (the command's stdout and stderr, stamped), then prints the peak of each column and the
# sample at which RssAnon + RssFile peaked.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 OUT_PREFIX [INTERVAL] -- COMMAND [ARG]..." >&2
  exit 2
fi
prefix=$1
shift
interval=0.2
if [ "$1" != "--" ]; then
  interval=$1
  shift
fi
[ "$1" = "--" ] || { echo "$0: expected -- before the command" >&2; exit 2; }
shift

start=$(date +%s.%N)
elapsed() { awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - s }'; }

# The command writes into a pipe that stamps its lines; its own pid is what is sampled.
fifo=$(mktemp -u "${TMPDIR:-/tmp}/rss_phases.XXXXXX")
mkfifo "$fifo"
trap 'rm -f "$fifo"' EXIT
"$@" >"$fifo" 2>&1 &
pid=$!
while IFS= read -r line; do printf '%s\t%s\n' "$(elapsed)" "$line"; done <"$fifo" >"$prefix.log" &
stamper=$!

printf 'seconds\tanon_mb\tfile_mb\tshmem_mb\n' >"$prefix.samples.tsv"
while [ -r "/proc/$pid/status" ]; do
  row=$(awk '/^RssAnon:/ { a = $2 } /^RssFile:/ { f = $2 } /^RssShmem:/ { s = $2 }
             END { if (a != "") printf "%.1f\t%.1f\t%.1f", a / 1024, f / 1024, s / 1024 }' \
        "/proc/$pid/status" 2>/dev/null || true)
  [ -n "$row" ] && printf '%s\t%s\n' "$(elapsed)" "$row" >>"$prefix.samples.tsv"
  sleep "$interval"
done
status=0
wait "$pid" || status=$?
wait "$stamper" || true

awk -F'\t' 'NR > 1 {
  if ($2 > anon) anon = $2; if ($3 > file) file = $3; if ($4 > shm) shm = $4
  if ($2 + $3 > total) { total = $2 + $3; at = $1; ta = $2; tf = $3 }
} END {
  printf "peak RssAnon %.0f MB, peak RssFile %.0f MB, peak RssShmem %.0f MB; ", anon, file, shm
  printf "peak RssAnon+RssFile %.0f MB at %.1f s (anon %.0f, file %.0f)\n", total, at, ta, tf
}' "$prefix.samples.tsv"
exit "$status"
