#!/usr/bin/env bash
# resnet18 data-parallel training on 2 "machines" over a slow link: two network namespaces joined
# by a veth pair (192.0.2.1 and 192.0.2.2, the documentation range: nothing leaves them), the
# link limited by `tc qdisc tbf` on both ends (this kernel has tbf, not netem), one bench_ddp
# rank per namespace started with --nnodes 2 --node-rank i --master-addr 192.0.2.1 and
# GLOO_SOCKET_IFNAME=eth0, as on real machines. For each rate, the gradient compressions are
# alternated inside one run (none, bf16, none, bf16, ...) and bench_ddp prints steps/s, the
# split of a step (forward, backward, wait in GradientSync::finish, optimizer) and the share of
# the all-reduce hidden behind backward.
#
#   sudo bench/slow_link.sh [--rates "unlimited 1gbit 100mbit"] [--compressions none,bf16]
#                           [--batch 16] [--side 64] [--steps 5] [--rounds 3] [--threads 1]
#
# Needs root (ip netns, tc). The namespaces are named omlsl-<pid>-a/b and deleted on every exit
# (also Ctrl-C); ones left by a killed run (its pid gone) are deleted at the next start.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${OML_BUILD_DIR:-$root/build}
bench=$build/bench/bench_ddp
rates="unlimited 1gbit 100mbit"
compressions=none,bf16
batch=16
side=64
steps=5
rounds=3
threads=1
while [ $# -gt 0 ]; do
  case "$1" in
    --rates) rates=$2; shift 2 ;;
    --compressions) compressions=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --side) side=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "slow_link.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$bench" ] || { echo "slow_link.sh: $bench not built (ninja -C $build bench_ddp)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "slow_link.sh: needs root for ip netns and tc" >&2; exit 2; }

# Namespaces of runs that were killed before their cleanup ran.
for ns in $(ip netns list | grep -o '^omlsl-[0-9]*-[ab]' || true); do
  pid=${ns#omlsl-}; pid=${pid%%-*}
  [ -d "/proc/$pid" ] && continue
  for p in $(ip netns pids "$ns"); do kill -9 "$p" || true; done
  ip netns del "$ns" || true
done

hosts=(omlsl-$$-a omlsl-$$-b)
cleanup() {
  for ns in "${hosts[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "${hosts[0]}"
ip netns add "${hosts[1]}"
ip link add eth0 netns "${hosts[0]}" type veth peer name eth0 netns "${hosts[1]}"
for i in 0 1; do
  ip -n "${hosts[$i]}" addr add "192.0.2.$((i + 1))/24" dev eth0
  ip -n "${hosts[$i]}" link set eth0 up
  ip -n "${hosts[$i]}" link set lo up
done

# tbf on the egress of both ends limits both directions. The bucket holds 10 ms of traffic
# (at least 64 KiB, so that a segmentation-offloaded packet fits); the queue 100 ms.
limit_link() {
  local rate=$1
  for ns in "${hosts[@]}"; do
    tc -n "$ns" qdisc del dev eth0 root 2>/dev/null || true
    [ "$rate" = unlimited ] && continue
    local bits
    bits=$(echo "$rate" | awk '{v=$1+0; u=tolower($1); sub(/^[0-9.]+/, "", u);
      m = (u=="gbit") ? 1e9 : (u=="mbit") ? 1e6 : (u=="kbit") ? 1e3 : 1; printf "%d", v*m}')
    local burst=$((bits / 8 / 100))
    [ "$burst" -lt 65536 ] && burst=65536
    tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 100ms
  done
}

echo "slow_link: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
for rate in $rates; do
  limit_link "$rate"
  echo "=== link $rate ($(tc -n "${hosts[0]}" qdisc show dev eth0 | head -1))"
  port=$((29500 + RANDOM % 1000))
  args=(--nnodes 2 --nproc-per-node 1 --master-addr 192.0.2.1 --master-port "$port" --what resnet18
        --batch "$batch" --side "$side" --steps "$steps" --rounds "$rounds" --threads "$threads"
        --compressions "$compressions")
  ip netns exec "${hosts[1]}" env GLOO_SOCKET_IFNAME=eth0 OPENBLAS_NUM_THREADS=1 \
    "$bench" --node-rank 1 "${args[@]}" >/dev/null &
  node1=$!
  status=0
  ip netns exec "${hosts[0]}" env GLOO_SOCKET_IFNAME=eth0 OPENBLAS_NUM_THREADS=1 \
    "$bench" --node-rank 0 "${args[@]}" || status=$?
  wait "$node1" || status=$?
  [ "$status" = 0 ] || { echo "slow_link: the run at $rate failed (exit $status)" >&2; exit 1; }
done
