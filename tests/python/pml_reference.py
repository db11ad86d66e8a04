"""pytorch-metric-learning side of the loss parity tests (tests/core/pml_losses_tests.cpp).

    pml_reference.py export DIR   writes, for every case below, the batch (embeddings and labels)
                                  and PML's loss and gradient w.r.t. the embeddings for it:
                                  DIR/<case>_{embeddings,labels,loss,grad}.pt; with a miner, the
                                  pairs it selected: DIR/<case>_mined.pt; for a loss with
                                  weights of its own (proxies, class weights) also the weights PML
                                  initialised and their gradient: DIR/<case>_{weights,weights_grad}.pt

A case is a loss with its args (the same args oml-cpp reads from `criterion.args`, where
`distance` / `normalize_embeddings` name PML's distance object and `miner` a PML miner whose
output is passed to the loss) and a seed.
Batches are P x K with a few labels of one item (anchors without a positive) mixed in; for the
losses with class weights the labels are 0..8 of NUM_CLASSES = 10 (class 9 has no item).
"""
import argparse
import sys
from pathlib import Path

import torch
from pytorch_metric_learning import distances, losses, miners

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
    # Other distances (PML's margin() and is_inverted) and the multi-similarity miner.
    "contrastive_cosine": (losses.ContrastiveLoss, {"distance": "cosine", "pos_margin": 0.9, "neg_margin": 0.1}),
    "contrastive_raw": (
        losses.ContrastiveLoss,
        {"distance": "euclidean", "normalize_embeddings": False, "neg_margin": 8.0},
    ),
    "contrastive_miner": (
        losses.ContrastiveLoss,
        {"miner": {"name": "multi_similarity", "args": {"epsilon": 0.2, "distance": "euclidean"}}},
    ),
    "multi_similarity_miner": (losses.MultiSimilarityLoss, {"miner": {"name": "multi_similarity"}}),
    "multi_similarity_squared": (
        losses.MultiSimilarityLoss,
        {"distance": "squared_euclidean", "base": 1.0, "alpha": 1.0, "beta": 4.0},
    ),
    "supcon_euclidean": (losses.SupConLoss, {"distance": "euclidean"}),
    "supcon_miner": (losses.SupConLoss, {"miner": {"name": "multi_similarity", "args": {"epsilon": 0.3}}}),
    "ntxent_dot": (losses.NTXentLoss, {"distance": "dot", "normalize_embeddings": False, "temperature": 10.0}),
    "ntxent_miner": (losses.NTXentLoss, {"miner": {"name": "multi_similarity"}}),
    "circle_miner": (losses.CircleLoss, {"miner": {"name": "multi_similarity", "args": {"epsilon": 0.5}}}),
}
# Losses with weights of their own: (class, args, the weights' attribute).
WEIGHTED_CASES = {
    "proxy_anchor": (losses.ProxyAnchorLoss, {}, "proxies"),
    "proxy_anchor_args": (losses.ProxyAnchorLoss, {"margin": 0.2, "alpha": 16.0}, "proxies"),
    "proxy_nca": (losses.ProxyNCALoss, {}, "proxies"),
    "proxy_nca_scale": (losses.ProxyNCALoss, {"softmax_scale": 8.0}, "proxies"),
    "proxy_anchor_euclidean": (losses.ProxyAnchorLoss, {"distance": "euclidean", "alpha": 8.0}, "proxies"),
    "proxy_nca_cosine": (losses.ProxyNCALoss, {"distance": "cosine", "softmax_scale": 4.0}, "proxies"),
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

DISTANCES = {
    "euclidean": lambda normalize: distances.LpDistance(normalize_embeddings=normalize),
    "squared_euclidean": lambda normalize: distances.LpDistance(normalize_embeddings=normalize, power=2),
    "cosine": lambda normalize: distances.CosineSimilarity(),
    "dot": lambda normalize: distances.DotProductSimilarity(normalize_embeddings=normalize),
}


def pml_args(args: dict) -> dict:
    """The keyword args of PML's class for oml-cpp's args: `distance` / `normalize_embeddings`
    become PML's distance object; `miner` is left out (see pml_miner)."""
    out = {k: v for k, v in args.items() if k not in ("distance", "normalize_embeddings", "miner")}
    if "distance" in args:
        out["distance"] = DISTANCES[args["distance"]](args.get("normalize_embeddings", True))
    return out


def pml_miner(args: dict):
    """PML's miner for oml-cpp's `miner: {name, args}`, or None."""
    spec = args.get("miner")
    if spec is None:
        return None
    assert spec["name"] == "multi_similarity"
    return miners.MultiSimilarityMiner(**pml_args(spec.get("args", {})))


def compute(loss_fn, args: dict, embeddings, labels, mined_file: Path):
    """The loss; with a miner, its pairs are also saved as [2, B, B] bool masks (positive, negative)."""
    miner = pml_miner(args)
    if miner is None:
        return loss_fn(embeddings, labels)
    indices = miner(embeddings, labels)
    masks = torch.zeros(2, len(labels), len(labels), dtype=torch.bool)
    masks[0, indices[0], indices[1]] = True
    masks[1, indices[2], indices[3]] = True
    torch.save(masks, mined_file)
    return loss_fn(embeddings, labels, indices)


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
            case = f"{name}_{seed}"
            loss = compute(loss_class(**pml_args(args)), args, embeddings, labels, out / f"{case}_mined.pt")
            loss.backward()
            torch.save(embeddings.detach(), out / f"{case}_embeddings.pt")
            torch.save(labels, out / f"{case}_labels.pt")
            torch.save(loss.detach().reshape(1), out / f"{case}_loss.pt")
            torch.save(embeddings.grad, out / f"{case}_grad.pt")
    for name, (loss_class, args, weights_name) in WEIGHTED_CASES.items():
        for seed in SEEDS:
            embeddings, labels = batch(seed, classes=True)
            embeddings = embeddings.clone().requires_grad_(True)
            torch.manual_seed(seed)  # PML's own initialisation of the weights, which oml-cpp loads
            loss_fn = loss_class(**SIZES, **pml_args(args))
            weights = getattr(loss_fn, weights_name)
            initial = weights.detach().clone()
            case = f"{name}_{seed}"
            loss = compute(loss_fn, args, embeddings, labels, out / f"{case}_mined.pt")
            loss.backward()
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
