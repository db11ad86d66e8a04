"""Attention on this CPU, forward and backward, per ViT layer: ATen's flash kernel in float32 (given
float32, and given bfloat16 with casts in and out, as oml-cpp runs it under bf16) and in bfloat16,
and attention written out (bmm, softmax, bmm; OML's own DINO ViTs) in bfloat16, for the zoo's ViT
shapes and a few shorter sequences (where the rule's key limit falls). oml-cpp's attention picks
among them under bf16 autocast on a CPU (oml::models::detail::cpu_attention,
core/src/models/attention.h); this prints what each costs here.

    /opt/oml-cpp/venv/bin/python bench/attention_cpu.py [--threads N] [--repeats R] [--forward-only]

Prints the CPU's capabilities as PyTorch reads them, a [4096, 384] x [384, 1536] linear layer in
both dtypes (how fast this CPU's bf16 GEMMs are), and a table in ms (the median of R repeats).
--forward-only times the forward pass alone without a gradient (inference: the rule's `backward`
false).
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

HEAD_DIM = 64  # every zoo ViT's
# batch, tokens, heads, what: ViT-S/16 (6 heads) at 224 and 384 px, ViT-S/14 at 518 px; CLIP
# ViT-B/32 and ViT-B/16 (12 heads) at 224 px; DINOv2 ViT-S/14 with registers at 224 px (256 + 1 +
# 4 tokens).
SIZES = [
    (32, 50, 12, "ViT-B/32 224 px"),
    (32, 65, 6, "ViT-S/16 128 px"),
    (32, 101, 6, "ViT-S/16 160 px"),
    (32, 145, 6, "ViT-S/16 192 px"),
    (32, 197, 6, "ViT-S/16 224 px"),
    (32, 197, 12, "ViT-B/16 224 px"),
    (32, 261, 6, "ViT-S/14 reg 224 px"),
    (8, 577, 6, "ViT-S/16 384 px"),
    (2, 1370, 6, "ViT-S/14 518 px"),
]


def median_ms(fn, repeats):
    fn()  # warm-up: kernels' one-time packing and allocation
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def written_out(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1) * (q.size(-1) ** -0.5), dim=-1)
    return weights @ v


def flash_in_float(q, k, v):
    return F.scaled_dot_product_attention(q.float(), k.float(), v.float()).to(q.dtype)


def step(attend, batch, tokens, heads, dtype, forward_only=False):
    torch.manual_seed(0)
    shape = (batch, heads, tokens, HEAD_DIM)
    q, k, v = (torch.randn(shape, dtype=dtype, requires_grad=not forward_only) for _ in range(3))
    grad = torch.randn(shape, dtype=dtype)

    def infer():
        with torch.no_grad():
            attend(q, k, v)

    if forward_only:
        return infer

    def run():
        out = attend(q, k, v)
        out.backward(grad)
        for t in (q, k, v):
            t.grad = None

    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: PyTorch's default)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--forward-only", action="store_true", help="the forward pass alone, without a gradient")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    caps = torch.backends.cpu.get_cpu_capability()
    extra = {}
    if hasattr(torch.cpu, "get_capabilities"):
        got = torch.cpu.get_capabilities()
        extra = {key: got.get(key) for key in ("avx512_bf16", "amx_bf16", "amx_tile") if key in got}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, capability {caps}, {extra}")

    x32 = torch.randn(4096, 384)
    w32 = torch.randn(1536, 384)
    for dtype in (torch.float32, torch.bfloat16):
        x, w = x32.to(dtype), w32.to(dtype)
        print(f"linear [4096, 384] x [384, 1536] {str(dtype)[6:]}: {median_ms(lambda: F.linear(x, w), args.repeats):.1f} ms")

    print()
    print("| B x heads x N | flash fp32 | flash fp32, bf16 cast in and out | flash bf16 | written out, bf16 |")
    print("|---|---|---|---|---|")
    fwd = args.forward_only
    for batch, tokens, heads, label in SIZES:
        row = [
            median_ms(step(F.scaled_dot_product_attention, batch, tokens, heads, torch.float32, fwd), args.repeats),
            median_ms(step(flash_in_float, batch, tokens, heads, torch.bfloat16, fwd), args.repeats),
            median_ms(step(F.scaled_dot_product_attention, batch, tokens, heads, torch.bfloat16, fwd), args.repeats),
            median_ms(step(written_out, batch, tokens, heads, torch.bfloat16, fwd), args.repeats),
        ]
        print(f"| {batch} x {heads} x {tokens} ({label}) | " + " | ".join(f"{ms:.0f} ms" for ms in row) + " |")


if __name__ == "__main__":
    main()
