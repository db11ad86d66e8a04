"""OML 4.0's SurrogatePrecision (the installed package, scripts/requirements-oml.txt), the reference
of oml-cpp's `surrogate_precision`: loss and gradient for a few batches and args.

    python tests/python/oml_surrogate_reference.py export DIR

Writes <case>_<seed>_{embeddings,labels,loss,grad}.pt for every case of CASES and seed of SEEDS.
"""
import argparse
import sys
from pathlib import Path

import torch
from oml.losses.surrogate_precision import SurrogatePrecision

from oml_losses_reference import save  # the same files as the other OML losses' references

SEEDS = [0, 1, 2]
# name: (OML's args, labels); oml-cpp's tests give the same args (plus its chunk_size).
PK = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
CASES = {
    "defaults": ({"k": 5}, PK),
    "sharp": ({"k": 3, "temperature1": 0.5, "temperature2": 0.05}, PK),
    "sum": ({"k": 2, "temperature1": 2.0, "temperature2": 0.1, "reduction": "sum"}, PK),
    # a label with one item and a k beyond the positives
    "uneven": ({"k": 4, "temperature1": 1.0, "temperature2": 0.2}, [0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 3, 4]),
}


def export(out: Path):
    for name, (args, labels) in CASES.items():
        for seed in SEEDS:
            generator = torch.Generator().manual_seed(seed)
            embeddings = torch.randn(len(labels), 16, generator=generator).requires_grad_(True)
            labels_t = torch.tensor(labels)
            loss = SurrogatePrecision(**args)(embeddings, labels_t)
            loss.backward()
            save(out, f"{name}_{seed}", embeddings, labels_t, loss)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["export"])
    parser.add_argument("dir", type=Path)
    args = parser.parse_args()
    export(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
