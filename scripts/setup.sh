#!/usr/bin/env bash
# Installs everything oml-cpp needs to build, test and run: Debian packages, and the pinned torch
# wheel (whose LibTorch is the default one to build against) in one virtual environment.
# Idempotent and non-interactive: what is already present is left alone.
set -euo pipefail
# Usage: scripts/setup.sh [--with-tests] [--libtorch wheel|debian|both]
#   --with-tests  also installs what only the test suite needs (test_packages below).
#   --libtorch    which LibTorch to build against: the torch wheel's (default), Debian 12's 1.13
#                 (libtorch-dev), or both (what CI builds).
# OML_VENV (default /opt/oml-cpp/venv) is the virtual environment; the wheels are pinned in
# scripts/requirements.txt (and, with --with-tests, scripts/requirements-tests.txt and
# scripts/requirements-oml.txt).
with_tests=0
libtorch=wheel
while [ $# -gt 0 ]; do
  case "$1" in
    --with-tests) with_tests=1 ;;
    --libtorch) libtorch=${2:?--libtorch needs wheel, debian or both}; shift ;;
    *) echo "setup: unknown argument '$1' (usage: setup.sh [--with-tests] [--libtorch wheel|debian|both])" >&2; exit 2 ;;
  esac
  shift
done
case "$libtorch" in wheel|debian|both) ;; *) echo "setup: --libtorch takes wheel, debian or both, not '$libtorch'" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${OML_VENV:-/opt/oml-cpp/venv}

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  # the virtual environment of the torch wheel (LibTorch 2.x, and the tests' Python reference)
  python3-venv
  # Gloo's headers: LibTorch's c10d headers include them (docs/building.md#libtorch)
  libgloo-dev
  # Boost.Program_options (the commands' options); its dependency libboost1.74-dev brings the
  # header-only Boost.Beast and Boost.Asio that oml-serve is built on
  libyaml-cpp-dev libboost-program-options-dev
  catch2 libopencv-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  zlib1g-dev  # oml-convert reads the gzip'd Fashion-MNIST IDX files
  libjpeg-dev  # libjpeg (libjpeg-turbo), which OpenCV decodes with: JPEGs are decoded through it directly
  libprotobuf-dev protobuf-compiler  # TensorBoard event files (core/src/report/tensorboard_event.proto)
  libcurl4-openssl-dev  # the mlflow logger's REST client (core/src/report/mlflow_rest_store.cpp)
  libssl-dev  # libcrypto: SHA-256 (model files, oml-serve's bearer tokens) and base64 (oml-serve's images)
  libmatio-dev  # MATLAB .mat annotations for oml-convert (CARS196; core/src/data/convert/mat_file.cpp)
  # the text tokenizers' Unicode data and tokenizer.json's regular expressions (core/src/text/)
  libicu-dev
  libsndfile1-dev  # audio files (WAV, FLAC, ...) for audio datasets (core/src/data/audio.cpp)
  dataset-fashion-mnist
  # Debian's LibTorch links the generic libblas.so.3; the reference BLAS is ~25x slower than
  # OpenBLAS here (6.5 vs 156 GFLOP/s for a 2048^2 matmul). Installing this package switches
  # the libblas.so.3 alternative to OpenBLAS (Faiss uses it with either LibTorch).
  libopenblas0-pthread
  # The approximate retrieval backends faiss_ivf, faiss_hnsw, faiss_ivf_pq (CPU); optional in the build.
  libfaiss-dev
)
if [ "$libtorch" != wheel ]; then
  packages+=(libtorch-dev)  # Debian 12's LibTorch 1.13 (CPU), for scripts/build.sh --libtorch debian
fi

# Only the test suite needs these.
test_packages=(
  # tests/integration/report_tests.cpp: renders report.html headless and checks the screenshot
  chromium
  # scripts/check_format.sh (run by .ci/run before the build): the formatter .clang-format is written for
  clang-format-14
  # bench/ann_retrieval_faiss.py: Faiss's Python API, the peer of bench_ann_retrieval
  # (python3-faiss does not pull numpy in by itself)
  python3-faiss python3-numpy
  # tests/integration/serving_tests.cpp and bench/serve_throughput.sh: a real HTTP client (curl)
  # and a bounded load generator (ab) against oml-serve
  curl apache2-utils
)
if [ "$with_tests" = 1 ]; then
  packages+=("${test_packages[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} Debian packages already installed"
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The torch wheel is a CUDA build: its CMake package enables the CUDA language, so configuring
# against it needs nvcc (the CUDA 13 toolkit), even for a CPU-only run.
if [ "$libtorch" != debian ] && ! command -v nvcc > /dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: the default LibTorch (the torch wheel, a CUDA 13 build) needs the CUDA 13 toolkit" \
       "(nvcc) to configure; install it, or build against Debian's LibTorch 1.13:" \
       "scripts/setup.sh --libtorch debian && scripts/build.sh --libtorch debian" >&2
  exit 2
fi

# The wheels: the default LibTorch, and the tests' reference PyTorch for either build (a
# --libtorch debian setup without --with-tests needs none of them).
requirements="$root/scripts/requirements.txt"
stamp="$venv/.oml-requirements"
if [ "$libtorch" = debian ] && [ "$with_tests" = 0 ]; then
  echo "setup: --libtorch debian: the torch wheels are not needed (only the tests use them)"
elif [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$requirements" "$stamp"; then
  echo "setup: $venv has the pinned wheels ($(tr '\n' ' ' < "$requirements"))"
else
  echo "setup: installing the pinned wheels into $venv"
  $SUDO mkdir -p "$(dirname "$venv")"
  [ -x "$venv/bin/python" ] || $SUDO /usr/bin/python3 -m venv "$venv"
  $SUDO "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  $SUDO cp "$requirements" "$stamp"
fi

# The tests' Python references (pytorch-metric-learning, ...), on top of the pinned torch.
tests_requirements="$root/scripts/requirements-tests.txt"
tests_stamp="$venv/.oml-requirements-tests"
if [ "$with_tests" = 1 ]; then
  if [ -f "$tests_stamp" ] && cmp -s "$tests_requirements" "$tests_stamp"; then
    echo "setup: $venv has the tests' pinned references"
  else
    echo "setup: installing the tests' pinned references into $venv"
    $SUDO "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$tests_requirements"
    $SUDO cp "$tests_requirements" "$tests_stamp"
  fi
  # OML 4.0's package: the benchmark's peer (its pipeline) and the reference of the tests that
  # compare with OML's own classes. --no-deps, because it declares numpy<2 and runs on the pinned
  # numpy 2 (scripts/requirements-oml.txt lists what it needs).
  oml_requirements="$root/scripts/requirements-oml.txt"
  oml_stamp="$venv/.oml-requirements-oml"
  if [ -f "$oml_stamp" ] && cmp -s "$oml_requirements" "$oml_stamp"; then
    echo "setup: $venv has OML's pipeline (the benchmark's peer)"
  else
    echo "setup: installing OML's pipeline (the benchmark's peer) into $venv"
    $SUDO "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$oml_requirements"
    $SUDO cp "$oml_requirements" "$oml_stamp"
  fi
fi
