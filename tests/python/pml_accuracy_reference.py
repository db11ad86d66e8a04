"""pytorch-metric-learning side of the AccuracyCalculator metric parity tests
(tests/core/pml_metrics_tests.cpp).

    pml_accuracy_reference.py export DIR   writes, for every case below, the validation rows and
                                           PML's values for them: DIR/<case>_{embeddings,labels,
                                           is_query,is_gallery,values}.pt, and for the cases with
                                           categories DIR/<case>_categories.pt (a category id per
                                           row) and DIR/<case>_category_values.pt ([C, 6]); and
                                           scikit-learn's NMI and AMI of random labellings:
                                           DIR/mutual_info_<i>_{labels,clusters,values}.pt.

Values are in the order of METRICS. PML runs as a user runs it: AccuracyCalculator with
k="max_bin_count" (its advice for MAP@R), Faiss's exact k-NN (IndexFlatL2) and Faiss's k-means.
The script asserts, for every case, that k=None (PML's default: the whole reference) gives the
same values except mean_reciprocal_rank, which is cut at max R in both PML (max_bin_count) and
oml-cpp.

Cases (each with three seeds):
  random      Gaussian embeddings, every row a query and a gallery item (PML: reference=None,
              ref_includes_query), labels of 1 to 9 rows, some of one row (PML's lone queries).
  ties        clustered rows on a half-integer grid, so that float32 distances are exact and
              equal distances are real ties (many duplicate rows of other labels too), resolved
              by gallery position on both sides.
  split       separate queries and gallery (ref_includes_query=False), a query label absent
              from the gallery.
  cosine      as random and split, retrieved by cosine similarity (PML's knn_func =
              CustomKNN(CosineSimilarity())); oml-cpp validates them with
              `retrieval_backend.distance: cosine`.
  dot         likewise by the raw inner product (CustomKNN(DotProductSimilarity(
              normalize_embeddings=False)): PML's default normalises, which is cosine's order),
              where an item need not be its own nearest (PML drops it wherever it ranks);
              `retrieval_backend.distance: dot`.
  categories  as random, with three categories: per category, PML on that category's queries
              against the whole gallery (the gallery reordered so that they come first, as
              ref_includes_query needs; no ties, so the order changes no list) with k = the
              run's max R, and k-means on that category's queries alone.
"""
import argparse
import logging
import sys
from pathlib import Path

import torch
from sklearn.metrics import adjusted_mutual_info_score, normalized_mutual_info_score
from pytorch_metric_learning.distances import CosineSimilarity, DotProductSimilarity
from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
from pytorch_metric_learning.utils.inference import CustomKNN

METRICS = [
    "precision_at_1",
    "r_precision",
    "mean_average_precision_at_r",
    "mean_reciprocal_rank",
    "NMI",
    "AMI",
]
SEEDS = [0, 1, 2]
CPU = torch.device("cpu")


def labels_of(generator, n, num_labels):
    # Labels with 1..9 rows each; label 0 .. num_labels-1, shuffled.
    labels = torch.randint(0, num_labels, (n,), generator=generator)
    labels[:3] = torch.tensor([num_labels, num_labels + 1, num_labels + 2])  # three lone queries
    return labels[torch.randperm(n, generator=generator)]


def random_case(seed):
    generator = torch.Generator().manual_seed(seed)
    n, dim = 240, 8
    labels = labels_of(generator, n, 40)
    embeddings = torch.randn(n, dim, generator=generator)
    embeddings += 1.5 * torch.randn(50, dim, generator=generator)[labels % 50]  # some structure
    return embeddings, labels


def ties_case(seed):
    generator = torch.Generator().manual_seed(seed)
    n, dim, clusters = 200, 4, 8
    centres = torch.randint(-6, 7, (clusters, dim), generator=generator).float()
    cluster = torch.randint(0, clusters, (n,), generator=generator)
    offsets = torch.randint(-1, 2, (n, dim), generator=generator).float()
    embeddings = (centres[cluster] + offsets) * 0.5
    # Labels follow the clusters, with a quarter of the rows relabelled at random (relevant and
    # irrelevant items at equal distances) and a few lone labels.
    labels = cluster.clone()
    noisy = torch.rand(n, generator=generator) < 0.25
    labels[noisy] = torch.randint(0, clusters, (int(noisy.sum()),), generator=generator)
    labels[:3] = torch.tensor([clusters, clusters + 1, clusters + 2])
    return embeddings, labels


def calculator(k="max_bin_count", knn_func=None):
    return AccuracyCalculator(include=tuple(METRICS), k=k, device=CPU, knn_func=knn_func)


def values_of(result):
    return torch.tensor([result[m] for m in METRICS], dtype=torch.float64)


def check_k_none(result, query, query_labels, reference=None, reference_labels=None, ref_includes_query=False):
    # k=None (the whole reference) agrees on everything but mrr: R never exceeds max_bin_count.
    whole = calculator(k=None).get_accuracy(query, query_labels, reference, reference_labels, ref_includes_query)
    for metric in METRICS:
        if metric == "mean_reciprocal_rank":
            continue
        assert abs(whole[metric] - result[metric]) < 1e-12, (metric, whole[metric], result[metric])


def save(out, case, embeddings, labels, is_query, is_gallery, values):
    torch.save(embeddings, out / f"{case}_embeddings.pt")
    torch.save(labels, out / f"{case}_labels.pt")
    torch.save(is_query.to(torch.uint8), out / f"{case}_is_query.pt")
    torch.save(is_gallery.to(torch.uint8), out / f"{case}_is_gallery.pt")
    torch.save(values, out / f"{case}_values.pt")


def every_row_both(out, case, embeddings, labels):
    result = calculator().get_accuracy(embeddings, labels)
    check_k_none(result, embeddings, labels)
    ones = torch.ones(len(labels), dtype=torch.bool)
    save(out, case, embeddings, labels, ones, ones, values_of(result))


def split(out, case, seed):
    embeddings, labels = random_case(seed)
    num_queries = 80
    labels[0] = 1000  # a query label that the gallery does not have (a lone query)
    query, query_labels = embeddings[:num_queries], labels[:num_queries]
    reference, reference_labels = embeddings[num_queries:], labels[num_queries:]
    result = calculator().get_accuracy(query, query_labels, reference, reference_labels, False)
    check_k_none(result, query, query_labels, reference, reference_labels, False)
    is_query = torch.arange(len(labels)) < num_queries
    save(out, case, embeddings, labels, is_query, ~is_query, values_of(result))


def similarity(out, case, seed, distance):
    # Every row both, then separate queries and gallery, by a similarity (larger is closer).
    embeddings, labels = random_case(seed)
    by_similarity = calculator(knn_func=CustomKNN(distance))
    ones = torch.ones(len(labels), dtype=torch.bool)
    save(out, f"{case}_both", embeddings, labels, ones, ones,
         values_of(by_similarity.get_accuracy(embeddings, labels)))
    num_queries = 80
    query, query_labels = embeddings[:num_queries], labels[:num_queries]
    reference, reference_labels = embeddings[num_queries:], labels[num_queries:]
    result = by_similarity.get_accuracy(query, query_labels, reference, reference_labels, False)
    is_query = torch.arange(len(labels)) < num_queries
    save(out, f"{case}_split", embeddings, labels, is_query, ~is_query, values_of(result))


def categories(out, case, seed):
    embeddings, labels = random_case(seed)
    generator = torch.Generator().manual_seed(100 + seed)
    category = torch.randint(0, 3, (len(labels),), generator=generator)
    overall = calculator().get_accuracy(embeddings, labels)
    # The run's max R: every row is a query and a gallery item, so the largest label count less one.
    max_r = int(torch.unique(labels, return_counts=True)[1].max()) - 1
    per_category = []
    for c in range(3):
        inside = category == c
        order = torch.cat([torch.nonzero(inside).flatten(), torch.nonzero(~inside).flatten()])
        reference, reference_labels = embeddings[order], labels[order]
        query, query_labels = embeddings[inside], labels[inside]
        knn = AccuracyCalculator(include=tuple(METRICS[:4]), k=max_r, device=CPU).get_accuracy(
            query, query_labels, reference, reference_labels, True
        )
        clusters = AccuracyCalculator(include=tuple(METRICS[4:]), device=CPU).get_accuracy(query, query_labels)
        per_category.append(values_of({**knn, **clusters}))
    ones = torch.ones(len(labels), dtype=torch.bool)
    save(out, case, embeddings, labels, ones, ones, values_of(overall))
    torch.save(category, out / f"{case}_categories.pt")
    torch.save(torch.stack(per_category), out / f"{case}_category_values.pt")


def mutual_info(out):
    # (items, labels, clusters): few and many values, and more clusters than labels.
    shapes = [(60, 7, 5), (200, 20, 20), (500, 3, 9), (33, 30, 2), (1000, 50, 40)]
    for i, (n, num_labels, num_clusters) in enumerate(shapes):
        generator = torch.Generator().manual_seed(i)
        labels = torch.randint(0, num_labels, (n,), generator=generator)
        clusters = torch.randint(0, num_clusters, (n,), generator=generator)
        values = [normalized_mutual_info_score(labels.numpy(), clusters.numpy()),
                  adjusted_mutual_info_score(labels.numpy(), clusters.numpy())]
        torch.save(labels, out / f"mutual_info_{i}_labels.pt")
        torch.save(clusters, out / f"mutual_info_{i}_clusters.pt")
        torch.save(torch.tensor(values, dtype=torch.float64), out / f"mutual_info_{i}_values.pt")


def export(out: Path):
    mutual_info(out)
    for seed in SEEDS:
        every_row_both(out, f"random_{seed}", *random_case(seed))
        every_row_both(out, f"ties_{seed}", *ties_case(seed))
        split(out, f"split_{seed}", seed)
        categories(out, f"categories_{seed}", seed)
        similarity(out, f"cosine_{seed}", seed, CosineSimilarity())
        similarity(out, f"dot_{seed}", seed, DotProductSimilarity(normalize_embeddings=False))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["export"])
    parser.add_argument("dir", type=Path)
    args = parser.parse_args()
    logging.getLogger("PML").setLevel(logging.ERROR)
    export(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
