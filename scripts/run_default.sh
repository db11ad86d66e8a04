#!/usr/bin/env bash
# The main job: installs what is needed, builds, converts Fashion-MNIST (from Debian's
# dataset-fashion-mnist package) and trains the embedded default extractor, then prints the
# validation metrics. Idempotent: packages, the build and the converted dataset are reused.
set -euo pipefail
# Usage: scripts/run_default.sh [--libtorch wheel|debian] [oml-train option]...
#   --libtorch  the LibTorch to build against (default: the pinned torch wheel's; see build.sh)
#   the rest goes to oml-train (e.g. --set max_epochs=4)
libtorch=wheel
if [ "${1:-}" = "--libtorch" ]; then
  libtorch=${2:?--libtorch needs wheel or debian}
  shift 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(bash "$root/scripts/build.sh" --libtorch "$libtorch" --print-dir)/pipelines

bash "$root/scripts/setup.sh" --libtorch "$libtorch"
# Only the two commands the main job runs (the gallery commands, tests and benchmarks are not built).
bash "$root/scripts/build.sh" --libtorch "$libtorch" --target oml-train --target oml-convert

cd "$root"
data=data/fashion_mnist
if [ ! -f "$data/df.csv" ]; then
  "$bin/oml-convert" fashion-mnist --src /usr/share/datasets/fashion-mnist --dst "$data"
else
  echo "run_default.sh: reusing the converted dataset in $data"
fi
exec "$bin/oml-train" --config configs/fashion_mnist/train_extractor.yaml "$@"
