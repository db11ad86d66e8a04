"""bf16 autocast against fp32 in Python PyTorch, the counterpart of bench_precision.

    python bench/precision_python.py [threads] [rounds] [steps] [side] [arch] [modes] [batch]

arch: resnet18 (default), resnet50, a ViT of tests/python/vit_reference.py (vits16: the network
the parity tests hold equal to oml-cpp's `vit`) or ecapa_tdnn (OML's ECAPATDNNExtractor with random
weights, the network the parity tests hold equal to oml-cpp's `ecapa_tdnn`; it takes waveforms
[batch, 1, side]: side is then samples per clip, and its figures clips/s); modes: all (default: 32
and bf16), 32 or bf16;
batch: default 32, a multiple of 4. OML_BENCH_DEVICE=cuda runs on cuda:0 (as bench_precision
does; autocast on "cuda", the clock read after a synchronize). OML_BENCH_COMPILE=1 runs the model
through torch.compile (default mode): each mode's warm-up step pays its compilation.
OML_BENCH_CHANNELS_LAST=1 puts the model and the batch in the channels_last memory format, as
PyTorch's performance guide advises for convolutional networks (bench_precision's `last` modes).
OML_BENCH_TRACE=FILE writes torch.profiler's Chrome trace of the last mode's timed steps, as
bench_precision does with the same variable (bench/trace_ops.py reads both).
OML_BENCH_CUDNN_BENCHMARK=1 sets torch.backends.cudnn.benchmark (Lightning's benchmark=True), as
bench_precision does with the same variable.

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
from pathlib import Path

import torch
import torch.nn.functional as F
import torchvision


DEVICE = torch.device("cuda:0" if os.environ.get("OML_BENCH_DEVICE") == "cuda" else "cpu")
CHANNELS_LAST = os.environ.get("OML_BENCH_CHANNELS_LAST") == "1"


def synchronize():
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def hard_triplet_loss(embeddings, labels):
    x = embeddings.float()
    dist = torch.cdist(x, x)
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool, device=x.device)
    hardest_positive = dist.masked_fill(~same | eye, float("-inf")).amax(dim=1)
    hardest_negative = dist.masked_fill(same, float("inf")).amin(dim=1)
    return F.softplus(hardest_positive - hardest_negative).mean()


def items_per_second(model, audio, bf16, batch, side, steps):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    shape = (batch, 1, side) if audio else (batch, 3, side, side)
    images = torch.randn(*shape, device=DEVICE)
    if CHANNELS_LAST:
        images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.arange(batch // 4, device=DEVICE).repeat_interleave(4)
    model.train()

    def step():
        optimizer.zero_grad()
        with torch.autocast(DEVICE.type, dtype=torch.bfloat16, enabled=bf16):
            embeddings = model(images)
        loss = hard_triplet_loss(embeddings, labels)
        loss.backward()
        optimizer.step()

    step()  # warm-up (allocations, oneDNN primitive creation, CUDA kernels' first load)
    synchronize()
    trace = os.environ.get("OML_BENCH_TRACE")
    profiler = None
    if trace:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if DEVICE.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        profiler = torch.profiler.profile(activities=activities)
        profiler.__enter__()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize()
    seconds = time.perf_counter() - start
    if profiler is not None:
        profiler.__exit__(None, None, None)
        profiler.export_chrome_trace(trace)  # each mode overwrites it: the last one stays
    return batch * steps / seconds


def main():
    args = sys.argv[1:]
    threads = int(args[0]) if args and int(args[0]) > 0 else (os.cpu_count() or 1)
    rounds = int(args[1]) if len(args) > 1 else 3
    steps = int(args[2]) if len(args) > 2 else 5
    side = int(args[3]) if len(args) > 3 else 64
    arch = args[4] if len(args) > 4 else "resnet18"
    modes = args[5] if len(args) > 5 else "all"
    assert modes in ("all", "32", "bf16"), f"modes must be all, 32 or bf16, got {modes}"
    batch = int(args[6]) if len(args) > 6 else 32
    assert batch >= 4 and batch % 4 == 0, f"batch must be a positive multiple of 4, got {batch}"
    torch.set_num_threads(threads)
    if os.environ.get("OML_BENCH_CUDNN_BENCHMARK") == "1":
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    audio = arch == "ecapa_tdnn"
    if arch in ("resnet18", "resnet50"):
        model = getattr(torchvision.models, arch)()
        model.fc = torch.nn.Identity()
    elif audio:
        from oml.models.audio.ecapa_tdnn.extractor import ECAPATDNNExtractor

        model = ECAPATDNNExtractor(weights=None, arch="ecapa_tdnn_taoruijie")
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "python"))
        from vit_reference import VisionTransformer  # noqa: E402

        model = VisionTransformer(arch)
    model.to(DEVICE)
    if CHANNELS_LAST:
        model.to(memory_format=torch.channels_last)
    compiled = os.environ.get("OML_BENCH_COMPILE") == "1"
    if compiled:
        model = torch.compile(model)
    unit = "clips/s" if audio else "images/s"
    size = f"{side} samples" if audio else f"{side}x{side}"
    print(f"python {torch.__version__}, threads: {threads}, device: {DEVICE}, {arch}, {size}, batch {batch}, "
          f"{steps} steps x {rounds} rounds{', torch.compile' if compiled else ''}"
          f"{', channels_last' if CHANNELS_LAST else ''}"
          f"{', cuDNN benchmark' if torch.backends.cudnn.benchmark else ''}")
    results = {"32": [], "bf16": []} if modes == "all" else {modes: []}
    for r in range(rounds):
        for name in results:
            v = items_per_second(model, audio, name == "bf16", batch, side, steps)
            results[name].append(v)
            print(f"round {r + 1}  python {name:5s} {v:7.1f} {unit}", flush=True)
    print(f"median over {rounds} rounds:")
    for name, values in results.items():
        m = statistics.median(values)
        ratio = f" ({m / statistics.median(results['32']):.2f}x precision 32)" if "32" in results else ""
        print(f"  python {name:5s} {m:7.1f} {unit}{ratio}")


if __name__ == "__main__":
    main()
