"""pytorch-metric-learning side of the loss parity tests (tests/core/pml_losses_tests.cpp).

    pml_reference.py export DIR   writes, for every case below, the batch (embeddings and labels)
                                  and PML's loss and gradient w.r.t. the embeddings for it:
                                  DIR/<case>_{embeddings,labels,loss,grad}.pt; for a loss with
                                  weights of its own (proxies, class weights) also the weights PML
                                  initialised and their gradient: DIR/<case>_{weights,weights_grad}.pt

A case is a loss with its args (the same args oml-cpp reads from `criterion.args`) and a seed.
Batches are P x K with a few labels of one item (anchors without a positive) mixed in; for the
losses with class weights the labels are 0..8 of NUM_CLASSES = 10 (class 9 has no item).
"""
import argparse
import sys
from pathlib import Path

import torch
from pytorch_metric_learning import losses

NUM_CLASSES, DIM = 10, 16
SIZES = {"num_classes": NUM_CLASSES, "embedding_size": DIM}

CASES = {
    "contrastive": (losses.ContrastiveLoss, {}),
    "contrastive_margins": (losses.ContrastiveLoss, {"pos_margin": 0.25, "neg_margin": 0.8}),
    "multi_similarity": (losses.MultiSimilarityLoss, {}),
    "multi_similarity_args": (losses.MultiSimilarityLoss, {"alpha": 3.0, "beta": 40.0, "base": 0.4}),
    "supcon": (losses.SupConLoss, {}),
    "supcon_temperature": (losses.SupConLoss, {"temperature": 0.5}),
    "ntxent": (losses.NTXentLoss, {}),
    "ntxent_temperature": (losses.NTXentLoss, {"temperature": 0.2}),
    "circle": (losses.CircleLoss, {}),
    "circle_args": (losses.CircleLoss, {"m": 0.25, "gamma": 128.0}),
}
# Losses with weights of their own: (class, args, the weights' attribute).
WEIGHTED_CASES = {
    "proxy_anchor": (losses.ProxyAnchorLoss, {}, "proxies"),
    "proxy_anchor_args": (losses.ProxyAnchorLoss, {"margin": 0.2, "alpha": 16.0}, "proxies"),
    "proxy_nca": (losses.ProxyNCALoss, {}, "proxies"),
    "proxy_nca_scale": (losses.ProxyNCALoss, {"softmax_scale": 8.0}, "proxies"),
    "cosface": (losses.CosFaceLoss, {}, "W"),
    "cosface_args": (losses.CosFaceLoss, {"margin": 0.2, "scale": 30.0}, "W"),
    "sub_center_arcface": (losses.SubCenterArcFaceLoss, {}, "W"),
    "sub_center_arcface_args": (
        losses.SubCenterArcFaceLoss,
        {"margin": 20.0, "scale": 30.0, "sub_centers": 2},
        "W",
    ),
    "soft_triple": (losses.SoftTripleLoss, {}, "fc"),
    "soft_triple_args": (
        losses.SoftTripleLoss,
        {"centers_per_class": 4, "la": 10.0, "gamma": 0.2, "margin": 0.05},
        "fc",
    ),
}
SEEDS = [0, 1, 2]


def batch(seed: int, classes: bool = False):
    generator = torch.Generator().manual_seed(seed)
    p, k, dim = 6, 4, DIM
    labels = torch.arange(p).repeat_interleave(k)
    # Three items without a positive: labels 6..8 for the class losses, far out for the others.
    singles = [6, 7, 8] if classes else [100, 101, 102]
    labels = torch.cat([labels, torch.tensor(singles)])
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
    for name, (loss_class, args, weights_name) in WEIGHTED_CASES.items():
        for seed in SEEDS:
            embeddings, labels = batch(seed, classes=True)
            embeddings = embeddings.clone().requires_grad_(True)
            torch.manual_seed(seed)  # PML's own initialisation of the weights, which oml-cpp loads
            loss_fn = loss_class(**SIZES, **args)
            weights = getattr(loss_fn, weights_name)
            initial = weights.detach().clone()
            loss = loss_fn(embeddings, labels)
            loss.backward()
            case = f"{name}_{seed}"
            torch.save(embeddings.detach(), out / f"{case}_embeddings.pt")
            torch.save(labels, out / f"{case}_labels.pt")
            torch.save(loss.detach().reshape(1), out / f"{case}_loss.pt")
            torch.save(embeddings.grad, out / f"{case}_grad.pt")
            torch.save(initial, out / f"{case}_weights.pt")
            torch.save(weights.grad, out / f"{case}_weights_grad.pt")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["export"])
    parser.add_argument("dir", type=Path)
    args = parser.parse_args()
    export(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
