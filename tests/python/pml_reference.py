"""pytorch-metric-learning side of the loss parity tests (tests/core/pml_losses_tests.cpp).

    pml_reference.py export DIR   writes, for every case below, the batch (embeddings and labels)
                                  and PML's loss and gradient w.r.t. the embeddings for it:
                                  DIR/<case>_{embeddings,labels,loss,grad}.pt

A case is a loss with its args (the same args oml-cpp reads from `criterion.args`) and a seed.
Batches are P x K with a few labels of one item (anchors without a positive) mixed in.
"""
import argparse
import sys
from pathlib import Path

import torch
from pytorch_metric_learning import losses

CASES = {
    "contrastive": (losses.ContrastiveLoss, {}),
    "contrastive_margins": (losses.ContrastiveLoss, {"pos_margin": 0.25, "neg_margin": 0.8}),
    "multi_similarity": (losses.MultiSimilarityLoss, {}),
    "multi_similarity_args": (losses.MultiSimilarityLoss, {"alpha": 3.0, "beta": 40.0, "base": 0.4}),
    "supcon": (losses.SupConLoss, {}),
    "supcon_temperature": (losses.SupConLoss, {"temperature": 0.5}),
    "ntxent": (losses.NTXentLoss, {}),
    "ntxent_temperature": (losses.NTXentLoss, {"temperature": 0.2}),
}
SEEDS = [0, 1, 2]


def batch(seed: int):
    generator = torch.Generator().manual_seed(seed)
    p, k, dim = 6, 4, 16
    labels = torch.arange(p).repeat_interleave(k)
    labels = torch.cat([labels, torch.tensor([100, 101, 102])])  # three items without a positive
    labels = labels[torch.randperm(len(labels), generator=generator)]
    # A near-duplicate (normalised distance ~0.15), so that a pair falls inside the margins; not
    # closer: both sides compute distances as |a|^2 + |b|^2 - 2ab (cdist's mm path), whose
    # cancellation at tiny distances differs between BLAS libraries by more than the tolerance.
    embeddings = torch.randn(len(labels), dim, generator=generator) * 2
    embeddings[1] = embeddings[0] + 0.3 * torch.randn(dim, generator=generator)
    return embeddings, labels


def export(out: Path):
    for name, (loss_class, args) in CASES.items():
        for seed in SEEDS:
            embeddings, labels = batch(seed)
            embeddings = embeddings.clone().requires_grad_(True)
            loss = loss_class(**args)(embeddings, labels)
            loss.backward()
            case = f"{name}_{seed}"
            torch.save(embeddings.detach(), out / f"{case}_embeddings.pt")
            torch.save(labels, out / f"{case}_labels.pt")
            torch.save(loss.detach().reshape(1), out / f"{case}_loss.pt")
            torch.save(embeddings.grad, out / f"{case}_grad.pt")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["export"])
    parser.add_argument("dir", type=Path)
    args = parser.parse_args()
    export(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
