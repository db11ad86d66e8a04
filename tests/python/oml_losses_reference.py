"""OML side of the parity tests of OML's own losses (tests/core/oml_losses_tests.cpp).

    oml_losses_reference.py export DIR   writes, for every case below and seeds 0, 1, 2, the batch
                                         and OML's loss and gradient w.r.t. the embeddings:
                                         DIR/<case>_<seed>_{embeddings,labels,loss,grad}.pt; for a
                                         loss with weights of its own also its initial state dict
                                         (OML's names) and the gradient of each weight:
                                         DIR/<case>_<seed>_{state,state_grad}.pt, and for the cases
                                         with categories DIR/<case>_<seed>_categories.pt (the
                                         category index of each label, as OML numbers them)
    oml_losses_reference.py export_surrogate DIR
                                         the same files (no weights) for SURROGATE_CASES, from the
                                         installed OML 4.0 package's SurrogatePrecision

`export` does not import OML's package (its vit_clip and pipeline modules pull in dependencies
the tests do not pin), so the classes below are OML's own code, copied from open-metric-learning (commit 6be182e, 2025-11-27):
oml/losses/triplet.py (TripletLoss, TripletLossPlain, get_tri_ids_in_plain),
oml/losses/arcface.py (ArcFaceLoss, ArcFaceLossWithMLP), oml/functional/label_smoothing.py,
oml/functional/losses.py (get_reduced) and oml/utils/misc_torch.py (elementwise_dist); only the
logging is left out. The args of each case are OML's constructor args, which oml-cpp reads from
`criterion.args` (the C++ test writes them as YAML). `export_surrogate` imports only
oml.losses.surrogate_precision from the package scripts/requirements-oml.txt installs.
"""
import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torchvision.ops import MLP

# ---- OML's code ------------------------------------------------------------------------------


def get_reduced(tensor: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return tensor.mean()
    elif reduction == "sum":
        return tensor.sum()
    elif reduction == "none":
        return tensor
    else:
        raise ValueError(f"Unexpected type of reduction: {reduction}")


def elementwise_dist(x1: Tensor, x2: Tensor, p: int = 2) -> Tensor:
    assert len(x1.shape) == len(x2.shape) == 2
    assert x1.shape == x2.shape
    if len(x1.shape) == 2:
        x1 = x1.unsqueeze(1)
        x2 = x2.unsqueeze(1)
    return torch.cdist(x1=x1, x2=x2, p=p).view(len(x1))


class TripletLoss(nn.Module):
    def __init__(self, margin: Optional[float], reduction: str = "mean", need_logs: bool = False):
        assert reduction in ("mean", "sum", "none")
        assert (margin is None) or (margin > 0)
        super().__init__()
        self.margin = margin
        self.reduction = reduction

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        assert anchor.shape == positive.shape == negative.shape
        positive_dist = elementwise_dist(x1=anchor, x2=positive, p=2)
        negative_dist = elementwise_dist(x1=anchor, x2=negative, p=2)
        if self.margin is None:
            loss = torch.log1p(torch.exp(positive_dist - negative_dist))
        else:
            loss = torch.relu(self.margin + positive_dist - negative_dist)
        return get_reduced(loss, reduction=self.reduction)


def get_tri_ids_in_plain(n: int):
    assert n % 3 == 0
    return list(range(0, n, 3)), list(range(1, n, 3)), list(range(2, n, 3))


class TripletLossPlain(nn.Module):
    def __init__(self, margin: Optional[float], reduction: str = "mean", need_logs: bool = False):
        assert reduction in ("mean", "sum", "none")
        assert (margin is None) or (margin > 0)
        super().__init__()
        self.criterion = TripletLoss(margin=margin, reduction=reduction, need_logs=need_logs)

    def forward(self, features: Tensor) -> Tensor:
        n = len(features)
        assert n % 3 == 0
        anchor_ii, positive_ii, negative_ii = get_tri_ids_in_plain(n)
        return self.criterion(features[anchor_ii], features[positive_ii], features[negative_ii])


@torch.no_grad()
def label_smoothing(y, num_classes, epsilon=0.2, categories=None):
    assert epsilon < 1, "`epsilon` must be less than 1."
    ohe = F.one_hot(y, num_classes).float()
    if categories is not None:
        ohe *= 1 - epsilon
        same_category_mask = categories[y].tile(num_classes, 1).t() == categories
        return torch.where(same_category_mask, epsilon / same_category_mask.sum(-1).view(-1, 1), 0) + ohe
    else:
        ohe *= 1 - epsilon
        ohe += epsilon / num_classes
        return ohe


class ArcFaceLoss(nn.Module):
    def __init__(
        self,
        in_features: int,
        num_classes: int,
        m: float = 0.5,
        s: float = 64,
        smoothing_epsilon: float = 0,
        label2category: Optional[Dict[Any, Any]] = None,
        reduction: str = "mean",
    ):
        super().__init__()
        assert smoothing_epsilon is None or 0 <= smoothing_epsilon < 1
        self.criterion = nn.CrossEntropyLoss(reduction=reduction)
        self.num_classes = num_classes
        if label2category is not None:
            mapper = {l: i for i, l in enumerate(sorted(list(set(label2category.values()))))}
            label2category = {k: mapper[v] for k, v in label2category.items()}
            self.label2category = torch.arange(num_classes).apply_(label2category.get)
        else:
            self.label2category = None
        self.smoothing_epsilon = smoothing_epsilon
        self.weight = nn.Parameter(torch.FloatTensor(num_classes, in_features))
        nn.init.xavier_uniform_(self.weight)
        self.rescale = s
        self.m = m
        self.cos_m = np.cos(m)
        self.sin_m = np.sin(m)
        self.th = -self.cos_m
        self.mm = self.sin_m * m

    def fc(self, x: Tensor) -> Tensor:
        return F.linear(F.normalize(x, p=2), F.normalize(self.weight, p=2))

    def smooth_labels(self, y: Tensor) -> Tensor:
        if self.label2category is not None:
            self.label2category = self.label2category.to(self.weight.device)
        return label_smoothing(y, self.num_classes, self.smoothing_epsilon, self.label2category)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        assert torch.all(y < self.num_classes)
        cos = self.fc(x)
        sin = torch.sqrt(1.0 - torch.pow(cos, 2))
        cos_w_margin = cos * self.cos_m - sin * self.sin_m
        cos_w_margin = torch.where(cos > self.th, cos_w_margin, cos - self.mm)
        ohe = F.one_hot(y, self.num_classes)
        logit = torch.where(ohe.bool(), cos_w_margin, cos) * self.rescale
        if self.smoothing_epsilon:
            y = self.smooth_labels(y)
        return self.criterion(logit, y)


class ArcFaceLossWithMLP(nn.Module):
    def __init__(
        self,
        in_features: int,
        num_classes: int,
        mlp_features: List[int],
        m: float = 0.5,
        s: float = 64,
        smoothing_epsilon: float = 0,
        label2category: Optional[Dict[Any, Any]] = None,
        reduction: str = "mean",
    ):
        super().__init__()
        self.mlp = MLP(in_features, mlp_features)
        self.arcface = ArcFaceLoss(
            mlp_features[-1],
            num_classes=num_classes,
            label2category=label2category,
            smoothing_epsilon=smoothing_epsilon,
            m=m,
            s=s,
            reduction=reduction,
        )

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return self.arcface(self.mlp(x), y)


# ---- the cases -------------------------------------------------------------------------------

NUM_CLASSES, DIM, TRIPLETS = 10, 16, 8
SEEDS = [0, 1, 2]
# Categories of the labels 0..9 (OML's label2category); numbered in sorted order: a 0, b 1, c 2.
LABEL2CATEGORY = {0: "b", 1: "b", 2: "a", 3: "c", 4: "c", 5: "c", 6: "a", 7: "b", 8: "c", 9: "c"}

TRIPLET_CASES = {
    "triplet": (TripletLoss, "blocks", {"margin": 0.2}),
    "triplet_soft": (TripletLoss, "blocks", {"margin": None}),
    "triplet_sum": (TripletLoss, "blocks", {"margin": 1.0, "reduction": "sum"}),
    "triplet_plain": (TripletLossPlain, "plain", {"margin": 0.2}),
    "triplet_plain_soft": (TripletLossPlain, "plain", {"margin": None}),
    "triplet_plain_sum": (TripletLossPlain, "plain", {"margin": 1.0, "reduction": "sum"}),
}
ARCFACE_SIZES = {"in_features": DIM, "num_classes": NUM_CLASSES}
WEIGHTED_CASES = {
    "arcface": (ArcFaceLoss, {}),
    "arcface_args": (ArcFaceLoss, {"m": 0.4, "s": 30.0, "smoothing_epsilon": 0.1, "reduction": "sum"}),
    "arcface_categories": (ArcFaceLoss, {"smoothing_epsilon": 0.2, "label2category": LABEL2CATEGORY}),
    "mlp_arcface": (ArcFaceLossWithMLP, {"mlp_features": [32, 24]}),
    "mlp_arcface_one_layer": (ArcFaceLossWithMLP, {"mlp_features": [12], "m": 0.4, "s": 30.0}),
    "mlp_arcface_categories": (
        ArcFaceLossWithMLP,
        {"mlp_features": [20, 20, 8], "smoothing_epsilon": 0.3, "label2category": LABEL2CATEGORY},
    ),
}


def triplet_batch(seed: int, layout: str):
    """TRIPLETS triplets of 16-d embeddings with labels that fit them; triplet 0's positive is its
    anchor (a zero distance) and its negative is close (an active triplet)."""
    generator = torch.Generator().manual_seed(seed)
    anchors = torch.randn(TRIPLETS, DIM, generator=generator)
    positives = anchors + torch.randn(TRIPLETS, DIM, generator=generator)
    negatives = anchors + torch.randn(TRIPLETS, DIM, generator=generator) * 1.2
    positives[0] = anchors[0]
    negatives[0] = anchors[0] + 0.02 * negatives[0]  # so that triplet 0 is active
    a_labels = torch.randperm(TRIPLETS, generator=generator) * 2
    n_labels = a_labels + 1
    if layout == "blocks":
        embeddings = torch.cat([anchors, positives, negatives])
        labels = torch.cat([a_labels, a_labels, n_labels])
    else:
        embeddings = torch.stack([anchors, positives, negatives], 1).reshape(-1, DIM)
        labels = torch.stack([a_labels, a_labels, n_labels], 1).reshape(-1)
    return embeddings, labels


def class_batch(seed: int):
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, NUM_CLASSES - 1, (24,), generator=generator)  # class 9 has no item
    embeddings = torch.randn(len(labels), DIM, generator=generator) * 2
    return embeddings, labels


def save(out: Path, case: str, embeddings: Tensor, labels: Tensor, loss: Tensor):
    torch.save(embeddings.detach(), out / f"{case}_embeddings.pt")
    torch.save(labels, out / f"{case}_labels.pt")
    torch.save(loss.detach().reshape(1), out / f"{case}_loss.pt")
    torch.save(embeddings.grad, out / f"{case}_grad.pt")


def export(out: Path):
    for name, (loss_class, layout, args) in TRIPLET_CASES.items():
        for seed in SEEDS:
            embeddings, labels = triplet_batch(seed, layout)
            embeddings.requires_grad_(True)
            criterion = loss_class(**args)
            if layout == "blocks":
                n = len(embeddings) // 3
                loss = criterion(embeddings[:n], embeddings[n : 2 * n], embeddings[2 * n :])
            else:
                loss = criterion(embeddings)
            loss.backward()
            save(out, f"{name}_{seed}", embeddings, labels, loss)
    for name, (loss_class, args) in WEIGHTED_CASES.items():
        for seed in SEEDS:
            embeddings, labels = class_batch(seed)
            torch.manual_seed(seed)  # OML's own initialisation of the weights, which oml-cpp loads
            criterion = loss_class(**ARCFACE_SIZES, **args)
            if loss_class is ArcFaceLoss:
                # One item at the far side of its class's weight: theta + m > pi, OML's other branch.
                with torch.no_grad():
                    embeddings[5] = -criterion.weight[labels[5]] * 3 + 0.01 * embeddings[5]
            embeddings.requires_grad_(True)
            state = {k: v.detach().clone() for k, v in criterion.state_dict().items()}
            loss = criterion(embeddings, labels)
            loss.backward()
            case = f"{name}_{seed}"
            save(out, case, embeddings, labels, loss)
            torch.save(state, out / f"{case}_state.pt")
            torch.save({k: p.grad for k, p in criterion.named_parameters()}, out / f"{case}_state_grad.pt")
            categories = getattr(getattr(criterion, "arcface", criterion), "label2category")
            if categories is not None:
                torch.save(categories, out / f"{case}_categories.pt")


# name: (OML's args, labels) of SurrogatePrecision; oml-cpp's test gives the same args (plus its
# own chunk_size).
PK = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
SURROGATE_CASES = {
    "defaults": ({"k": 5}, PK),
    "sharp": ({"k": 3, "temperature1": 0.5, "temperature2": 0.05}, PK),
    "sum": ({"k": 2, "temperature1": 2.0, "temperature2": 0.1, "reduction": "sum"}, PK),
    # a label with one item and a k beyond the positives
    "uneven": ({"k": 4, "temperature1": 1.0, "temperature2": 0.2}, [0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 3, 4]),
}


def export_surrogate(out: Path):
    from oml.losses.surrogate_precision import SurrogatePrecision  # the installed OML 4.0

    for name, (args, labels) in SURROGATE_CASES.items():
        for seed in SEEDS:
            generator = torch.Generator().manual_seed(seed)
            embeddings = torch.randn(len(labels), DIM, generator=generator).requires_grad_(True)
            labels_t = torch.tensor(labels)
            loss = SurrogatePrecision(**args)(embeddings, labels_t)
            loss.backward()
            save(out, f"{name}_{seed}", embeddings, labels_t, loss)


def main():
    commands = {"export": export, "export_surrogate": export_surrogate}
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=list(commands))
    parser.add_argument("dir", type=Path)
    args = parser.parse_args()
    commands[args.command](args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
