"""The peer of bench_ann_retrieval: the same data and the same IVF-Flat search through Faiss's
Python API (Debian's python3-faiss), cmc@1,5,10 and map@5 in numpy, recall@10 against an exact
search of sampled queries. Prints one JSON line (docs/benchmarks.md#approximate-k-nn-faiss-backends).

  /usr/bin/python3 bench/ann_retrieval_faiss.py --n 1000000 [--nlist 2000 --nprobe 16] [--report-recall 1000]
"""
import argparse
import json
import os
import resource
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--classes", type=int, default=None, help="default n // 5 (like SOP)")
    ap.add_argument("--noise", type=float, default=1.5)
    ap.add_argument("--nlist", type=int, default=0, help="0: oml-cpp's default, 2 sqrt(n) (at most n / 39 and 4096)")
    ap.add_argument("--nprobe", type=int, default=0, help="0: oml-cpp's default, nlist / 16 (1 to 16)")
    ap.add_argument("--report-recall", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    import faiss
    import numpy as np
    import torch

    torch.set_num_threads(a.threads)
    faiss.omp_set_num_threads(a.threads)
    # bench_ann_retrieval's (and bench_retrieval's) generator, in the same order.
    g = torch.Generator().manual_seed(0)
    c = a.classes or max(2, a.n // 5)
    labels_t = torch.randint(0, c, (a.n,), generator=g)
    x = (torch.randn(c, a.dim, generator=g)[labels_t] + a.noise * torch.randn(a.n, a.dim, generator=g)).numpy()
    labels = labels_t.numpy()
    del labels_t

    t0 = time.perf_counter()
    nlist = a.nlist or max(1, min(int(round(2 * np.sqrt(a.n))), a.n // 39, 4096))
    nprobe = a.nprobe or min(max(1, nlist // 16), 16)
    train_size = min(a.n, max(40 * nlist, 16384))
    quantizer = faiss.IndexFlatL2(a.dim)
    index = faiss.IndexIVFFlat(quantizer, a.dim, nlist)
    index.cp.min_points_per_centroid = 1
    index.cp.max_points_per_centroid = 1 << 30
    rng = np.random.default_rng(0)
    index.train(x[np.sort(rng.choice(a.n, train_size, replace=False))])
    index.add(x)
    index.nprobe = nprobe
    k = 10
    _, found = index.search(x, k + 1)
    # Every item is a query and a gallery item: drop the query itself, keep the first 10 others.
    drop = (found == np.arange(a.n)[:, None]) | (found < 0)
    order = np.argsort(drop, axis=1, kind="stable")[:, :k]
    keep = np.where(np.take_along_axis(drop, order, 1), -1, np.take_along_axis(found, order, 1))
    t_knn = time.perf_counter() - t0

    hit = (labels[np.maximum(keep, 0)] == labels[:, None]) & (keep >= 0)
    out = {}
    for kk in (1, 5, 10):
        out[f"cmc/{kk}"] = float(hit[:, :kk].any(1).mean())
    h5 = hit[:, :5].astype(np.float64)
    cum = h5.cumsum(1) / np.arange(1, 6)
    out["map/5"] = float(((cum * h5).sum(1) / np.maximum(h5.sum(1), 1)).mean())
    total = time.perf_counter() - t0

    sample = np.sort(np.random.default_rng(1).choice(a.n, min(a.report_recall, a.n), replace=False))
    flat = faiss.IndexFlatL2(a.dim)
    flat.add(x)
    _, exact = flat.search(x[sample], k + 1)
    recall = np.mean([len(set(exact[i][exact[i] != q][:k]) & set(keep[q])) / k for i, q in enumerate(sample)])
    print(json.dumps({"n": a.n, "dim": a.dim, "noise": a.noise, "nlist": nlist, "nprobe": nprobe,
                      "train_size": train_size, "knn_s": round(t_knn, 2), "total_s": round(total, 2),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                      "recall@10": round(float(recall), 4), **out}))


if __name__ == "__main__":
    main()
