#!/usr/bin/env bash
# Installs every Debian package oml-cpp needs to build, test and run.
# Idempotent and non-interactive: packages already present are left alone.
set -euo pipefail
# Usage: scripts/setup.sh [--with-tests]
#   --with-tests  also installs what only the test suite needs (listed in test_packages).

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libgloo-dev
  libyaml-cpp-dev libboost-program-options-dev
  catch2 libopencv-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  zlib1g-dev  # oml-convert reads the gzip'd Fashion-MNIST IDX files
  libprotobuf-dev protobuf-compiler  # TensorBoard event files (core/src/report/tensorboard_event.proto)
  dataset-fashion-mnist
  # LibTorch on Debian links the generic libblas.so.3; the reference BLAS is ~25x slower than
  # OpenBLAS here (6.5 vs 156 GFLOP/s for a 2048^2 matmul). Installing this package switches
  # the libblas.so.3 alternative to OpenBLAS.
  libopenblas0-pthread
  # The approximate retrieval backends faiss_ivf, faiss_hnsw, faiss_ivf_pq (CPU); optional in the build.
  libfaiss-dev
)

# Only the test suite needs these.
test_packages=(
  # tests/core/pytorch_interop_tests.cpp: round trip of weights and checkpoints with PyTorch itself
  python3-torch python3-torchvision
  # tests/integration/report_tests.cpp: renders report.html headless and checks the screenshot
  chromium
  # scripts/check_format.sh (run by .ci/run before the build): the formatter .clang-format is written for
  clang-format-14
  # bench/ann_retrieval_faiss.py: Faiss's Python API, the peer of bench_ann_retrieval
  # (python3-faiss does not pull numpy in by itself)
  python3-faiss python3-numpy
)
if [ "${1:-}" = "--with-tests" ]; then
  packages+=("${test_packages[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
