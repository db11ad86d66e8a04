"""bf16 autocast against fp32 in Python PyTorch, the counterpart of bench_precision.

    python3 bench/precision_python.py [threads] [rounds] [steps] [side]

The same training step as bench/precision.cpp's NCHW modes: torchvision's resnet18 without its
classifier (512-d embeddings), synthetic 3 x side x side batches of 32 (8 labels x 4), a soft-margin
triplet loss over the hardest positive and negative of each anchor (OML's
TripletLossWithMiner(need_logs=False) with HardTripletsMiner, computed in float32 as oml-cpp's
losses are), backward, Adam; forward and loss under torch.autocast("cpu", torch.bfloat16) for
bf16. One warm-up step per mode and round, modes alternating, median images/s over the rounds.
"""
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
import torchvision


def hard_triplet_loss(embeddings, labels):
    x = embeddings.float()
    dist = torch.cdist(x, x)
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool)
    hardest_positive = dist.masked_fill(~same | eye, float("-inf")).amax(dim=1)
    hardest_negative = dist.masked_fill(same, float("inf")).amin(dim=1)
    return F.softplus(hardest_positive - hardest_negative).mean()


def images_per_second(model, bf16, batch, side, steps):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    images = torch.randn(batch, 3, side, side)
    labels = torch.arange(batch // 4).repeat_interleave(4)
    model.train()

    def step():
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            embeddings = model(images)
        loss = hard_triplet_loss(embeddings, labels)
        loss.backward()
        optimizer.step()

    step()  # warm-up (allocations, oneDNN primitive creation)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return batch * steps / (time.perf_counter() - start)


def main():
    args = sys.argv[1:]
    threads = int(args[0]) if args and int(args[0]) > 0 else (os.cpu_count() or 1)
    rounds = int(args[1]) if len(args) > 1 else 3
    steps = int(args[2]) if len(args) > 2 else 5
    side = int(args[3]) if len(args) > 3 else 64
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = torchvision.models.resnet18()
    model.fc = torch.nn.Identity()
    print(f"python {torch.__version__}, threads: {threads}, resnet18, {side}x{side}, batch 32, "
          f"{steps} steps x {rounds} rounds")
    results = {"32": [], "bf16": []}
    for r in range(rounds):
        for name in results:
            v = images_per_second(model, name == "bf16", 32, side, steps)
            results[name].append(v)
            print(f"round {r + 1}  python {name:5s} {v:7.1f} images/s", flush=True)
    fp32 = statistics.median(results["32"])
    print(f"median over {rounds} rounds:")
    for name, values in results.items():
        m = statistics.median(values)
        print(f"  python {name:5s} {m:7.1f} images/s ({m / fp32:.2f}x precision 32)")


if __name__ == "__main__":
    main()
