#!/usr/bin/env bash
# The main job: installs what is needed, builds, converts Fashion-MNIST (from Debian's
# dataset-fashion-mnist package) and trains the embedded default extractor, then prints the
# validation metrics. Idempotent: packages, the build and the converted dataset are reused.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${OML_BUILD_DIR:-$root/build}
bin=$build_dir/pipelines

bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" --commands

cd "$root"
data=data/fashion_mnist
if [ ! -f "$data/df.csv" ]; then
  "$bin/oml-convert" fashion-mnist --src /usr/share/datasets/fashion-mnist --dst "$data"
else
  echo "run_default.sh: reusing the converted dataset in $data"
fi
exec "$bin/oml-train" --config configs/fashion_mnist/train_extractor.yaml "$@"
