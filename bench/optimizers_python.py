"""torch.optim's step on the parameters of resnet18 and ViT-S/16, the peer of bench_optimizers.

One optimizer step (the update alone, on fixed random gradients) of SGD (momentum 0.9), Adam and
AdamW with foreach=False (the for-loop), foreach=True and fused=True, over torchvision's resnet18
without its fc layer and OML's ViTExtractor("vits16") with random weights: the same parameter
shapes bench/optimizers.cpp builds. Prints the median ms per step, in the same layout.

    python bench/optimizers_python.py [threads] [steps]      (defaults: 0 = all cores, 30)
"""

import statistics
import sys
import time

import torch
import torchvision
from oml.models import ViTExtractor


def median_ms_per_step(parameters, make, steps):
    params = [p.detach().clone().requires_grad_(True) for p in parameters]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opt = make(params)
    for _ in range(3):
        opt.step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        opt.step()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    if threads > 0:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    resnet = torchvision.models.resnet18()
    resnet.fc = torch.nn.Identity()
    models = [("resnet18", resnet), ("vits16", ViTExtractor(None, "vits16", normalise_features=False))]
    optimizers = {
        "sgd": lambda p, **kw: torch.optim.SGD(p, lr=1e-3, momentum=0.9, **kw),
        "adam": lambda p, **kw: torch.optim.Adam(p, lr=1e-3, **kw),
        "adamw": lambda p, **kw: torch.optim.AdamW(p, lr=1e-3, **kw),
    }
    kernels = [{"foreach": False}, {"foreach": True}, {"fused": True}]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads, median of {steps} steps")
    print(f"{'model':<9} {'optim':<6} {'for-loop':>10} {'foreach':>10} {'fused':>10}")
    for model_name, model in models:
        parameters = list(model.parameters())
        for name, make in optimizers.items():
            cells = [median_ms_per_step(parameters, lambda p: make(p, **flags), steps) for flags in kernels]
            print(f"{model_name:<9} {name:<6}" + "".join(f" {ms:10.2f}" for ms in cells) + "   ms/step", flush=True)


if __name__ == "__main__":
    main()
