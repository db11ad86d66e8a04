"""PyTorch-eager peer of oml-cpp's default training job, configs/fashion_mnist/train_extractor.yaml:
the same data, model, loss, sampler, optimizer, schedule and validation metrics written in plain
PyTorch, so that its wall time and cmc@1 can be set beside oml-train's.

    /opt/oml-cpp/venv/bin/python bench/default_job_python.py [--data-dir DIR] [--epochs 24]
        [--valid-period 8] [--threads N] [--epoch-size 100]

What it replicates (the C++ source it follows in brackets):
- data: the 60,000 Fashion-MNIST training images train, the 10,000 test images validate (every
  one a query and a gallery item), labels 0..9 as in the IDX files [data/convert/fashion_mnist.cpp];
- transform `norm`: grey replicated to RGB, x / 255 normalised with ImageNet's mean and std,
  3 x 28 x 28 [data/image.cpp, data/transform.cpp, data/transform_parts.cpp];
- sampler `balance` 10 x 16, 100 batches an epoch: a freshly shuffled pool of labels per epoch,
  refilled and reshuffled when fewer than 10 remain (here: before every batch, there being 10
  labels), 16 distinct items per label, drawn anew for every batch [plugins/samplers];
- extractor `conv_net` [16, 32, 64] -> 128: per stage 2 x (conv3x3 no bias, BatchNorm, ReLU),
  max-pool 2 between stages, global average pool, linear; default init, no normalisation of the
  output [models/conv_net.cpp];
- criterion `arcface` m 0.5, s 30, class weights [10, 128] Xavier-uniform, trained
  [losses/arcface.cpp];
- Adam lr 1e-3 (one group for the model, one for the loss), cosine annealing stepped after every
  optimizer step: linear warm-up from 0.1 x lr over 100 steps, then a cosine to 0 over the
  remaining epochs x epoch_size - 100 steps [optim/schedulers.cpp, optim/register.cpp];
- seed 42 for the initialisation; validation after every 8th and the last epoch: OVERALL cmc@1,
  cmc@5, precision@5 and map@5 with OML's definitions (docs/metrics.md), Euclidean distance, the
  query itself excluded, ties broken by gallery position.

Where it differs from oml-cpp:
- random streams: torch's and numpy's generators instead of oml-cpp's (derive_seed +
  mt19937_64), so the initial weights and the batches are not bit-identical, only alike in law;
- data: the IDX arrays are held in memory as uint8 and normalised per batch in the training
  process; oml-cpp decodes cached PNGs in a loader worker (num_workers 1);
- distances are computed in float64 by the expansion |q|^2 + |g|^2 - 2 q.g, not oml-cpp's float32
  candidate selection re-ranked with exact float64 distances (the same lists but for rounding);
- a run shorter than the warm-up (--epochs x --epoch-size <= 100) is refused by oml-cpp; here it
  stays in warm-up throughout, so that short test runs work.

Output: one line per validation, then one JSON line with wall_s (the whole script, torch import
and data reading included), train_s (the training steps only: sampling, normalisation, forward,
backward, optimizer and scheduler steps; no validation), epochs, the last validation's metrics,
the torch version and the thread count. Nothing is written to disk.
"""

import argparse
import gzip
import json
import math
import os
import time

START = time.perf_counter()

SEED = 42
N_LABELS, N_INSTANCES = 10, 16
CHANNELS, FEAT_DIM = (16, 32, 64), 128
ARCFACE_M, ARCFACE_S = 0.5, 30.0
LR, WARMUP_STEPS, WARMUP_START_FACTOR = 1e-3, 100, 0.1
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
BS_VAL = 128  # oml-cpp's default bs_val
QUERY_CHUNK = 2000  # bounds the distance block to 2,000 x 10,000 float64 (160 MB)
CMC_K, PRECISION_K, MAP_K = (1, 5), 5, 5


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=24)
    p.add_argument("--valid-period", type=int, default=8)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--epoch-size", type=int, default=100, help="batches per epoch")
    return p.parse_args()


ARGS = parse_args()
# OpenMP reads OMP_NUM_THREADS once, when torch loads it: set it before the import.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402


# ---- data ----------------------------------------------------------------------------------------


def read_idx(path, magic, header_size):
    with gzip.open(path, "rb") as f:
        data = f.read()
    found = int.from_bytes(data[:4], "big")
    if found != magic:
        raise ValueError(f"{path}: magic number {found}, expected {magic}")
    return np.frombuffer(data, dtype=np.uint8, offset=header_size)


def read_split(data_dir, prefix):
    """(images uint8 [N, 28, 28], labels int64 [N]) of one official split."""
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), 2051, 16)
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), 2049, 8)
    images = torch.from_numpy(images.copy()).view(len(labels), 28, 28)
    return images, torch.from_numpy(labels.astype(np.int64))


# The `norm` transform as one affine map per RGB channel: x * 1 / (255 std) - mean / std, which is
# the map cv::Mat::convertTo applies in oml-cpp.
NORM_SCALE = torch.tensor([1.0 / (255.0 * s) for s in IMAGENET_STD]).view(1, 3, 1, 1)
NORM_SHIFT = torch.tensor([-m / s for m, s in zip(IMAGENET_MEAN, IMAGENET_STD)]).view(1, 3, 1, 1)


def normalise(images):
    """uint8 [B, 28, 28] grey -> float [B, 3, 28, 28]: oml-cpp decodes grey PNGs as RGB."""
    return images.unsqueeze(1).float() * NORM_SCALE + NORM_SHIFT


def balance_batches(labels, epoch, epoch_size):
    """The `balance` sampler's batches of one epoch: row indices, N_LABELS x N_INSTANCES each."""
    rng = np.random.default_rng([SEED, epoch])
    rows_of_label = [np.flatnonzero(labels == label) for label in np.unique(labels)]
    pool, next_label = np.arange(len(rows_of_label)), len(rows_of_label)
    for _ in range(epoch_size):
        if len(pool) - next_label < N_LABELS:
            rng.shuffle(pool)
            next_label = 0
        chosen = pool[next_label : next_label + N_LABELS]
        next_label += N_LABELS
        # Every label has thousands of items, so smart_sample's with-replacement fallback for
        # labels with fewer than N_INSTANCES items never applies.
        yield torch.from_numpy(
            np.concatenate([rng.choice(rows_of_label[label], N_INSTANCES, replace=False) for label in chosen])
        )


# ---- model and loss ------------------------------------------------------------------------------


class ConvNet(nn.Module):
    """oml-cpp's conv_net; parameter names (stages.<i>.<j>.*, proj.*) are the same."""

    def __init__(self, in_channels=3, channels=CHANNELS, feat_dim=FEAT_DIM):
        super().__init__()
        self.stages = nn.ModuleList()
        for i, out in enumerate(channels):
            layers = []
            for in_c in (in_channels, out):
                layers += [nn.Conv2d(in_c, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True)]
            # Downsample between stages only: the last stage keeps its resolution for pooling.
            if i + 1 < len(channels):
                layers.append(nn.MaxPool2d(2))
            self.stages.append(nn.Sequential(*layers))
            in_channels = out
        self.proj = nn.Linear(in_channels, feat_dim)

    def forward(self, x):
        for stage in self.stages:
            x = stage(x)
        return self.proj(x.mean((2, 3)))


class ArcFaceLoss(nn.Module):
    def __init__(self, in_features, num_classes, m=ARCFACE_M, s=ARCFACE_S):
        super().__init__()
        self.m, self.s = m, s
        self.weight = nn.Parameter(torch.empty(num_classes, in_features))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, embeddings, labels):
        cos = F.normalize(embeddings, dim=1) @ F.normalize(self.weight, dim=1).t()
        # acos has infinite slope at +-1: keep theta strictly inside (0, pi), as oml-cpp does.
        theta = torch.acos(cos.clamp(-1 + 1e-7, 1 - 1e-7))
        is_target = F.one_hot(labels, self.weight.shape[0]).bool()
        logits = self.s * torch.where(is_target, torch.cos(theta + self.m), cos)
        return F.cross_entropy(logits, labels)


def cosine_with_warmup(total_steps):
    """oml-cpp's cosine_annealing (eta_min 0) as a factor of the base lr at step t."""
    t_max = max(total_steps - WARMUP_STEPS, 1)

    def factor(t):
        if t < WARMUP_STEPS:
            return WARMUP_START_FACTOR + (1 - WARMUP_START_FACTOR) * t / WARMUP_STEPS
        return (1 + math.cos(math.pi * min(t - WARMUP_STEPS, t_max) / t_max)) / 2

    return factor


# ---- validation ----------------------------------------------------------------------------------


@torch.no_grad()
def embed(model, images):
    model.eval()
    out = torch.cat([model(normalise(images[i : i + BS_VAL])) for i in range(0, len(images), BS_VAL)])
    model.train()
    return out


def nearest(dist, k):
    """Positions of the k smallest entries of each row, ordered by (distance, position)."""
    values, positions = torch.topk(dist, k, dim=1, largest=False)
    # topk picks arbitrarily among entries tied with the k-th value: rows where such a tie
    # straddles the cut are ranked again in full, by a stable sort (rare: duplicate images).
    kth = values[:, -1:]
    straddling = ((dist == kth).sum(1) > (values == kth).sum(1)).nonzero().flatten()
    if len(straddling):
        positions[straddling] = torch.sort(dist[straddling], dim=1, stable=True).indices[:, :k]
        values[straddling] = dist[straddling].gather(1, positions[straddling])
    # Within the k, equal distances in position order: sort by position, then stably by distance.
    by_position = positions.sort(dim=1).indices
    values, positions = values.gather(1, by_position), positions.gather(1, by_position)
    return positions.gather(1, values.sort(dim=1, stable=True).indices)


def retrieval_metrics(embeddings, labels):
    """OVERALL cmc@k, precision@k and map@k (docs/metrics.md); every row is a query and a gallery item."""
    emb = embeddings.double()
    sq_norms = (emb * emb).sum(1)
    n_gt = torch.bincount(labels)[labels] - 1  # the query itself is never retrieved
    k = max(*CMC_K, PRECISION_K, MAP_K)
    hits = []
    for start in range(0, len(emb), QUERY_CHUNK):
        q = emb[start : start + QUERY_CHUNK]
        rows = torch.arange(len(q))
        # Squared distances rank as distances do.
        dist = sq_norms[start : start + len(q), None] + sq_norms[None, :] - 2 * q @ emb.t()
        dist[rows, start + rows] = math.inf
        hits.append(labels[nearest(dist, k)] == labels[start : start + len(q), None])
    g = torch.cat(hits).double()
    cumulative = g.cumsum(1)
    metrics = {f"OVERALL/cmc/{c}": (cumulative[:, c - 1] > 0).double().mean().item() for c in CMC_K}
    metrics[f"OVERALL/precision/{PRECISION_K}"] = (
        (cumulative[:, PRECISION_K - 1] / n_gt.clamp(max=PRECISION_K).double()).nan_to_num(0.0).mean().item()
    )
    ranks = torch.arange(1, MAP_K + 1, dtype=torch.float64)
    h = cumulative[:, MAP_K - 1]
    ap = (g[:, :MAP_K] * cumulative[:, :MAP_K] / ranks).sum(1) / h
    metrics[f"OVERALL/map/{MAP_K}"] = ap.nan_to_num(0.0).mean().item()  # 0 when nothing relevant: h = 0
    return metrics


# ---- training ------------------------------------------------------------------------------------


def train_epoch(model, criterion, optimizer, scheduler, images, labels, epoch, epoch_size):
    for batch in balance_batches(labels.numpy(), epoch, epoch_size):
        loss = criterion(model(normalise(images[batch])), labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()


def main():
    torch.set_num_threads(ARGS.threads)
    train_images, train_labels = read_split(ARGS.data_dir, "train")
    val_images, val_labels = read_split(ARGS.data_dir, "t10k")

    torch.manual_seed(SEED)
    model = ConvNet()
    criterion = ArcFaceLoss(FEAT_DIM, num_classes=len(train_labels.unique()))
    optimizer = torch.optim.Adam([{"params": model.parameters()}, {"params": criterion.parameters()}], lr=LR)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine_with_warmup(ARGS.epochs * ARGS.epoch_size))

    train_s, metrics = 0.0, {}
    for epoch in range(ARGS.epochs):
        start = time.perf_counter()
        train_epoch(model, criterion, optimizer, scheduler, train_images, train_labels, epoch, ARGS.epoch_size)
        train_s += time.perf_counter() - start
        if (epoch + 1) % ARGS.valid_period == 0 or epoch + 1 == ARGS.epochs:
            metrics = retrieval_metrics(embed(model, val_images), val_labels)
            print(f"validation after epoch {epoch + 1}: " + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))

    summary = {"wall_s": round(time.perf_counter() - START, 3), "train_s": round(train_s, 3), "epochs": ARGS.epochs}
    summary.update({key.split("/", 1)[1].replace("/", "@"): value for key, value in metrics.items()})
    summary.update({"torch": torch.__version__, "threads": ARGS.threads})
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
