"""The Python side of bench/losses.cpp: per-step time (forward + backward of the loss alone) of
pytorch-metric-learning's ContrastiveLoss, MultiSimilarityLoss, SupConLoss, NTXentLoss,
CircleLoss, ProxyAnchorLoss, ProxyNCALoss, SoftTripleLoss, CosFaceLoss and SubCenterArcFaceLoss
with their defaults, MultiSimilarityLoss with its MultiSimilarityMiner and ContrastiveLoss with
CosineSimilarity, and of OML's TripletLoss, TripletLossPlain, ArcFaceLoss and ArcFaceLossWithMLP
(OML's code as tests/python/oml_losses_reference.py holds it), and OML 4.0's own
TripletLossWithMiner with its AllTripletsMiner and HardTripletsMiner (when the package is
installed, as scripts/setup.sh --with-tests does), on
the same shapes (NUM_CLASSES classes for the losses with class weights, whose gradient the
backward computes too; the triplet losses on the batch's first 3 (batch // 3) rows). Run it beside
bench_losses in one session.

    python bench/losses_python.py [threads] [batch] [dim] [steps]   (0 = all cores, 160, 128, 50)
"""
import statistics
import sys
import time
from pathlib import Path

import torch
from pytorch_metric_learning import distances, losses, miners

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "python"))
import oml_losses_reference as oml  # noqa: E402  (OML's loss classes)

try:  # OML 4.0's own TripletLossWithMiner and miners, where the package is installed
    from oml.losses.triplet import TripletLossWithMiner
    from oml.miners.inbatch_all_tri import AllTripletsMiner
    from oml.miners.inbatch_hard_tri import HardTripletsMiner
except ImportError:
    TripletLossWithMiner = None

NUM_CLASSES = 100  # also in bench/losses.cpp


def main():
    args = [int(a) for a in sys.argv[1:]] + [0, 160, 128, 50][len(sys.argv) - 1:]
    threads, batch, dim, steps = args[:4]
    if threads > 0:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    labels = torch.arange(batch // 10).repeat_interleave(10)
    base = torch.randn(len(labels), dim)
    print(f"batch {len(labels)} x {dim}, {torch.get_num_threads()} intra-op threads, "
          f"median of {steps} steps (forward + backward)")
    sizes = {"num_classes": NUM_CLASSES, "embedding_size": dim}
    for case in [("contrastive", losses.ContrastiveLoss()),
                       ("multi_similarity", losses.MultiSimilarityLoss()),
                       ("supcon", losses.SupConLoss()), ("ntxent", losses.NTXentLoss()),
                       ("circle", losses.CircleLoss()),
                       ("proxy_anchor", losses.ProxyAnchorLoss(**sizes)),
                       ("proxy_nca", losses.ProxyNCALoss(**sizes)),
                       ("soft_triple", losses.SoftTripleLoss(**sizes)),
                       ("cosface", losses.CosFaceLoss(**sizes)),
                       ("sub_center_arcface", losses.SubCenterArcFaceLoss(**sizes)),
                       ("multi_similarity+miner", losses.MultiSimilarityLoss(), miners.MultiSimilarityMiner()),
                       ("contrastive cosine", losses.ContrastiveLoss(
                           pos_margin=1, neg_margin=0, distance=distances.CosineSimilarity())),
                       ("oml triplet", oml.TripletLoss(margin=0.1)),
                       ("oml triplet_plain", oml.TripletLossPlain(margin=0.1)),
                       ("oml arcface", oml.ArcFaceLoss(in_features=dim, num_classes=NUM_CLASSES)),
                       ("oml mlp_arcface", oml.ArcFaceLossWithMLP(in_features=dim, num_classes=NUM_CLASSES,
                                                                  mlp_features=[256, 128]))] + ([
                       # OML's CARS config: soft margin, every triplet; then the hard miner.
                       ("tri_miner all_triplets", TripletLossWithMiner(margin=None, miner=AllTripletsMiner())),
                       ("tri_miner hard", TripletLossWithMiner(margin=None, miner=HardTripletsMiner()))]
                       if TripletLossWithMiner is not None else []):
        loss, miner = (case[1], case[2]) if len(case) == 3 else (case[1], None)
        name = case[0]
        triplet_rows = 3 * (len(labels) // 3)
        times = []
        for step in range(-3, steps):
            embeddings = base.clone().requires_grad_(True)
            start = time.perf_counter()
            if name == "oml triplet":  # [anchors; positives; negatives]
                n = triplet_rows // 3
                loss(embeddings[:n], embeddings[n:2 * n], embeddings[2 * n:3 * n]).backward()
            elif name == "oml triplet_plain":
                loss(embeddings[:triplet_rows]).backward()
            elif miner is None:
                loss(embeddings, labels).backward()
            else:  # the miner's time counts, as in a training step
                loss(embeddings, labels, miner(embeddings, labels)).backward()
            if step >= 0:
                times.append((time.perf_counter() - start) * 1000)
        print(f"  {name:<22} {statistics.median(times):8.3f} ms/step")


if __name__ == "__main__":
    main()
