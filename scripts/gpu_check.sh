#!/usr/bin/env bash
# The GPU check, for a machine with one NVIDIA GPU whose Python has a CUDA build of torch (e.g.
# torch 2.11.0+cu130, the version scripts/requirements.txt pins). It builds oml-cpp against THAT
# Python's LibTorch into build-gpu/ (with the GPU tests registered), then runs:
#   1. the GPU test set (ctest -L gpu, tests/gpu/gpu_tests.cpp): a training step on cuda:0 equal to
#      the CPU step, bf16/fp16 autocast with the gradient scaler's CUDA kernels (an Inf step is
#      skipped and the scale halves), a one-rank NCCL group, two Gloo ranks sharing the GPU
#      (sync_dicts and gradient sync of CUDA tensors equal to the CPU's);
#   2. the default job (configs/fashion_mnist/train_extractor.yaml) on accelerator: cuda: its wall
#      time and cmc@1;
#   3. the training step of resnet18, ViT-S/16 and resnet50, oml-cpp (bench_precision) beside
#      PyTorch eager and torch.compile (bench/precision_python.py) on the same GPU, alternating
#      (bench/step_table.sh; at most OML_GPU_BENCH_S seconds, 300 by default).
# It prints a table at the end; docs/benchmarks.md#gpu-check says where its figures go.
set -euo pipefail
# Usage: scripts/gpu_check.sh [--python PY] [--skip-build] [--steps N]
#   --python      the Python whose torch to build against and compare with (default: python3)
#   --skip-build  reuse build-gpu/ as it is
#   --steps       training steps per throughput round (default 20)
python=python3
skip_build=0
steps=20
while [ $# -gt 0 ]; do
  case "$1" in
    --python) python=${2:?--python needs a path}; shift ;;
    --skip-build) skip_build=1 ;;
    --steps) steps=${2:?--steps needs a number}; shift ;;
    *) echo "gpu_check: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${OML_BUILD_DIR:-$root/build-gpu}
cd "$root"

if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "gpu_check: $python has no CUDA torch or sees no GPU; this check needs both" >&2
  exit 2
fi
"$python" -c 'import torch; print("gpu_check: torch", torch.__version__, "CUDA", torch.version.cuda, "on", torch.cuda.get_device_name(0))'
prefix=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')

if [ "$skip_build" = 0 ]; then
  # The Debian packages (a machine without a package mirror must have them already).
  bash scripts/setup.sh --libtorch debian > /dev/null 2>&1 ||
    echo "gpu_check: scripts/setup.sh could not install Debian's packages here; building with what is installed"
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DOML_PYTHON="$(command -v "$python")" -DOML_GPU_TESTS=ON -DOML_BUILD_BENCH=ON
  cmake --build "$build_dir" -j "$(nproc)" --target oml_gpu_tests oml_commands bench_precision
fi

results=$(mktemp -d)
status=0
echo "== 1. GPU tests"
(cd "$build_dir" && ctest -L gpu --output-on-failure) || status=1

echo "== 2. the default job on accelerator: cuda"
data=data/fashion_mnist
if [ ! -f "$data/df.csv" ]; then
  "$build_dir/pipelines/oml-convert" fashion-mnist --src /usr/share/datasets/fashion-mnist --dst "$data"
fi
job_start=$(date +%s.%N)
"$build_dir/pipelines/oml-train" --config configs/fashion_mnist/train_extractor.yaml --set accelerator=cuda \
  --set logs_root="$results/logs" --progress lines > "$results/default_job.log" 2>&1 || status=1
job_seconds=$(echo "$(date +%s.%N) - $job_start" | bc)
cmc1=$(grep -o '"OVERALL/cmc/1": *[0-9.]*' "$results"/logs/*/metrics.jsonl 2>/dev/null | tail -1 | grep -o '[0-9.]*$' || echo "?")

echo "== 3. the training step: oml-cpp, PyTorch eager and torch.compile on the GPU"
bash bench/step_table.sh --device cuda --bench "$build_dir/bench/bench_precision" --python "$python" \
  --rounds 2 --steps "$steps" --cases "resnet18 vits16 resnet50" --budget-s "${OML_GPU_BENCH_S:-300}" |
  tee "$results/step_table.txt"

echo
echo "gpu_check summary ($("$python" -c 'import torch; print(torch.cuda.get_device_name(0))'))"
echo "  GPU tests:            $([ $status = 0 ] && echo passed || echo FAILED)"
echo "  default job (cuda):   ${job_seconds%.*} s, cmc@1 $cmc1"
echo "  training step:        the table in $results/step_table.txt"
echo "  logs: $results"
exit $status
