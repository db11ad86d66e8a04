"""HF `tokenizers`' side of bench_text_tokenizer (docs/benchmarks.md), and the data both use.

    python3 text_tokenizer_python.py DIR [LINES]

Trains the three test tokenizers of tests/python/tokenizers_reference.py into DIR (once: WordPiece
with a BERT pipeline, byte-level BPE with a RoBERTa pipeline, an XLM-R Unigram), writes DIR/lines.txt
(LINES lines, default 20,000, JSON strings one per line: the reference's mix of licence text and
generated multilingual lines), then encodes the lines with each tokenizer on one thread, per line
(`encode`) and as one `encode_batch`, and prints tokens per second of CPU time.
"""

import json
import os
import random
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its pool: one thread, as ours
os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "python"))
import tokenizers_reference as reference  # noqa: E402

KINDS = ["wordpiece", "bpe", "unigram"]


def prepare(out_dir, n):
    os.makedirs(out_dir, exist_ok=True)
    for kind in KINDS:
        if not os.path.exists(os.path.join(out_dir, f"{kind}.tokenizer.json")):
            subprocess.run([sys.executable, os.path.join(here, "..", "tests", "python", "tokenizers_reference.py"),
                            kind, out_dir], check=True)
    rng = random.Random(7)
    lines = reference.texts(rng, reference.corpus_lines(), n)
    with open(os.path.join(out_dir, "lines.txt"), "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    return lines


def main():
    out_dir = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    lines = prepare(out_dir, n)
    print(f"HF tokenizers (Rust, via Python), 1 thread, {len(lines)} lines, {sum(map(len, lines))} characters")
    for kind in KINDS:
        tok = Tokenizer.from_file(os.path.join(out_dir, f"{kind}.tokenizer.json"))
        tok.encode_batch(lines[:500])  # warm up
        start = time.process_time()
        tokens = sum(len(tok.encode(line)) for line in lines)
        per_line = time.process_time() - start
        start = time.process_time()
        batch_tokens = sum(len(e) for e in tok.encode_batch(lines))
        batch = time.process_time() - start
        assert batch_tokens == tokens
        print(f"  {kind:10s} {tokens:9d} tokens   encode per line: {tokens / per_line / 1e3:8.0f} k tokens/s"
              f"   encode_batch: {tokens / batch / 1e3:8.0f} k tokens/s")


if __name__ == "__main__":
    main()
