"""ViT inference throughput in Python PyTorch, the counterpart of bench_vit_inference.

    python3 bench/vit_inference_python.py [threads] [arch] [batch] [batches] [size] [precision]

Same defaults and the same network (the DINO / DINOv2 implementation of
tests/python/vit_reference.py, which the parity tests hold equal to oml-cpp's), fp32 (or bf16:
torch.autocast("cpu", torch.bfloat16), as oml-predict's autocast), eval mode,
torch.no_grad(), one warm-up batch then the timed ones.
"""
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "python"))
from vit_reference import VisionTransformer  # noqa: E402


def main():
    args = sys.argv[1:]
    threads = int(args[0]) if args and int(args[0]) > 0 else (os.cpu_count() or 1)
    arch = args[1] if len(args) > 1 else "vits16"
    batch = int(args[2]) if len(args) > 2 else 16
    batches = int(args[3]) if len(args) > 3 else 4
    size = int(args[4]) if len(args) > 4 else 224
    precision = args[5] if len(args) > 5 else "32"
    assert precision in ("32", "bf16"), f"precision must be 32 or bf16, got {precision}"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = VisionTransformer(arch).eval()
    images = torch.randn(batch, 3, size, size)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        model(images)  # warm-up
        start = time.perf_counter()
        for _ in range(batches):
            model(images)
        seconds = time.perf_counter() - start
    print(
        f"python {arch} {precision} inference, {batch}x3x{size}x{size}, {threads} threads: "
        f"{batch * batches / seconds:.2f} images/s"
    )


if __name__ == "__main__":
    main()
