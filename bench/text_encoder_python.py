"""BERT training step in Python with transformers, the counterpart of bench_text_encoder.

    python bench/text_encoder_python.py [threads] [precision] [layers] [batch] [length] [steps] [attention]

Same defaults, shapes and batch as bench/text_encoder.cpp: transformers' BertModel (BERT-base's
config with `layers` layers, random weights, no pooler), train mode, PyTorch eager execution,
forward under torch.autocast("cpu", torch.bfloat16) for bf16, mean pooling over the attention
mask, loss = mean(embedding^2), backward, gradients cleared between steps. `attention` is
transformers' attn_implementation: sdpa (its default, as oml-cpp) or eager (matmul + softmax).
"""
import os
import sys
import time

import torch
import transformers


def bench_text_batch(batch, length, vocab):
    ids = torch.zeros(batch, length, dtype=torch.long)
    mask = torch.zeros(batch, length, dtype=torch.long)
    for r in range(batch):
        n = length - r * length // (2 * batch)
        for j in range(n):
            ids[r, j] = (7 * r + 13 * j) % (vocab - 3) + 3
            mask[r, j] = 1
    return ids, mask, torch.zeros_like(ids)


def main():
    args = sys.argv[1:]
    threads = int(args[0]) if args and int(args[0]) > 0 else (os.cpu_count() or 1)
    precision = args[1] if len(args) > 1 else "32"
    layers = int(args[2]) if len(args) > 2 else 12
    batch = int(args[3]) if len(args) > 3 else 4
    length = int(args[4]) if len(args) > 4 else 64
    steps = int(args[5]) if len(args) > 5 else 3
    attention = args[6] if len(args) > 6 else "sdpa"
    assert precision in ("32", "bf16"), f"precision must be 32 or bf16, got {precision}"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = transformers.BertConfig(num_hidden_layers=layers)
    config._attn_implementation = attention
    model = transformers.BertModel(config, add_pooling_layer=False).train()
    ids, mask, types = bench_text_batch(batch, length, config.vocab_size)

    def step():
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            hidden = model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
            m = mask.unsqueeze(-1).to(hidden.dtype)
            embedding = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
            loss = embedding.pow(2).mean()
        loss.backward()

    step()  # warm-up
    start = time.perf_counter()
    for _ in range(steps):
        step()
    seconds = time.perf_counter() - start
    print(f"transformers {transformers.__version__} bert {layers} layers {precision} forward+backward ({attention}), "
          f"batch {batch}x{length}, {threads} threads: {seconds / steps:.3f} s/step")


if __name__ == "__main__":
    main()
