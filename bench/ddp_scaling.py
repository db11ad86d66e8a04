#!/usr/bin/env python3
"""Projected data-parallel step rates past one machine (docs/ddp.md#scaling-past-one-machine).

Ring all-reduce cost model, per step and per rank (the busiest link):
    T_comm = 2 (W-1)/W * S / B  +  k * 2 (W-1) * alpha
S the gradient bytes (parameters x 4 for float32, x 2 with bf16/fp16 compression), B the link
bandwidth in bytes/s, k the number of buckets (25 MB of float32 each), alpha the latency of one
message. oml-cpp's compressed exchange (all-to-all + all-gather) sends the same bytes and the same
number of messages per bucket as a ring.
A step then takes
    T_step = T_forward + T_backward + max(0, T_comm - h * T_backward) + T_optimizer
h the share of backward that can hide communication (buckets fill during backward; the first
is only ready part-way through), measured by bench/slow_link.sh.

    python3 bench/ddp_scaling.py --forward 0.033 --backward 0.067 --optimizer 0 --hidden-share 0.65

prints, for resnet18 / resnet50 / ViT-S/16, bytes per step and projected steps/s at 10, 25 and
100 Gbit/s for 8..64 ranks with and without compression. Pure arithmetic: no measurement here.
"""
import argparse
import math

MODELS = {  # trainable parameters of the extractor (no classifier head)
    "resnet18": 11_176_512,
    "resnet50": 23_508_032,
    "ViT-S/16": 21_665_664,
}
BUCKET_BYTES = 25 * 1024 * 1024


def comm_seconds(params, bytes_per_value, world, gbit, alpha):
    size = params * bytes_per_value
    buckets = math.ceil(params * 4 / BUCKET_BYTES)  # buckets are sized in float32 bytes
    return 2 * (world - 1) / world * size / (gbit * 1e9 / 8) + buckets * 2 * (world - 1) * alpha


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--forward", type=float, default=0.033, help="seconds of forward + loss per step")
    parser.add_argument("--backward", type=float, default=0.067, help="seconds of backward per step")
    parser.add_argument("--optimizer", type=float, default=0.0, help="seconds of the optimizer step")
    parser.add_argument("--hidden-share", type=float, default=0.65, help="share of backward that hides communication")
    parser.add_argument("--alpha-us", type=float, default=50.0, help="latency of one message, microseconds")
    parser.add_argument("--ranks", default="8,16,32,64")
    parser.add_argument("--gbits", default="10,25,100")
    a = parser.parse_args()
    ranks = [int(x) for x in a.ranks.split(",")]
    gbits = [float(x) for x in a.gbits.split(",")]
    alpha = a.alpha_us * 1e-6
    compute = a.forward + a.backward + a.optimizer
    print(f"compute {compute * 1e3:.0f} ms/step (backward {a.backward * 1e3:.0f} ms, hidden share {a.hidden_share:.2f}),"
          f" alpha {a.alpha_us:.0f} us; ceiling without communication {1 / compute:.2f} steps/s")
    print("| model | float32 MB/step | bf16 MB/step | link | " +
          " | ".join(f"{w} ranks none / bf16" for w in ranks) + " |")
    print("|---|---|---|---|" + "---|" * len(ranks))
    for name, params in MODELS.items():
        for g in gbits:
            cells = []
            for w in ranks:
                rates = []
                for bytes_per_value in (4, 2):
                    t = comm_seconds(params, bytes_per_value, w, g, alpha)
                    exposed = max(0.0, t - a.hidden_share * a.backward)
                    rates.append(1 / (compute + exposed))
                cells.append(f"{rates[0]:.2f} / {rates[1]:.2f}")
            print(f"| {name} | {params * 4 / 1e6:.1f} | {params * 2 / 1e6:.1f} | {g:g} Gbit/s | " + " | ".join(cells) + " |")
    print()
    print("link rate from which the all-reduce hides entirely behind backward (Gbit/s), none / bf16:")
    for name, params in MODELS.items():
        cells = []
        for w in ranks:
            rates = []
            for bytes_per_value in (4, 2):
                window = a.hidden_share * a.backward - math.ceil(params * 4 / BUCKET_BYTES) * 2 * (w - 1) * alpha
                rates.append(2 * (w - 1) / w * params * bytes_per_value * 8 / window / 1e9 if window > 0 else math.inf)
            cells.append(f"{rates[0]:.1f} / {rates[1]:.1f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    print("all-reduce time per step alone (ms), none / bf16:")
    for name, params in MODELS.items():
        for g in gbits:
            cells = [f"{comm_seconds(params, 4, w, g, alpha) * 1e3:.1f} / {comm_seconds(params, 2, w, g, alpha) * 1e3:.1f}"
                     for w in ranks]
            print(f"| {name} | {g:g} Gbit/s | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
