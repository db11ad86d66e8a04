"""The Python side of bench_loader's JPEG rows: OML 4.0's own image dataset and transforms in
torch's DataLoader, over the folder of JPEGs bench_loader keeps with --keep-jpegs.

    python bench/loader_python.py DIR [--transforms augs_torch,norm_resize_torch] [--workers 1,2]
                                      [--batch 32] [--im-size 224]

DIR holds df.csv (OML's columns) and the JPEGs. Each row: OML's ImageLabeledDataset with the
transform from OML's registry (`get_transforms(name, im_size=...)`) and the image reader OML
picks for it (`get_im_reader_for_transforms`: PIL for the torchvision ones, OpenCV for the
albumentations ones), in DataLoader(num_workers=W, batch_size=B), one warm-up pass (the OS file
cache, the workers' imports) and one timed pass, workers started anew for each pass as
persistent_workers=False does. images/s is wall-clock; images per CPU-second divides by this
process's CPU time plus its finished worker processes', as bench_loader divides by its own.
"""
import argparse
import resource
import time
from pathlib import Path

import pandas as pd
import torch
from oml.datasets.images import ImageLabeledDataset
from oml.registry.transforms import get_transforms
from oml.transforms.images.utils import get_im_reader_for_transforms
from torch.utils.data import DataLoader


def cpu_seconds():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def one_pass(dataset, workers, batch):
    loader = DataLoader(dataset, batch_size=batch, num_workers=workers, shuffle=False)
    images = 0
    for item in loader:
        images += item["input_tensors"].shape[0]
    return images


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir", type=Path)
    parser.add_argument("--transforms", default="augs_torch,norm_resize_torch")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--im-size", type=int, default=224)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as bench_loader: the workers are the parallelism
    df = pd.read_csv(args.dir / "df.csv")
    print(f"| path | transform | batch | workers | images/s | images per CPU-second |  (torch {torch.__version__})")
    print("|---|---|---|---|---|---|")
    for name in args.transforms.split(","):
        transform = get_transforms(name, im_size=args.im_size)
        dataset = ImageLabeledDataset(df, dataset_root=args.dir, transform=transform,
                                      f_imread=get_im_reader_for_transforms(transform))
        for workers in (int(w) for w in args.workers.split(",")):
            one_pass(dataset, workers, args.batch)  # warm-up
            cpu_start, start = cpu_seconds(), time.perf_counter()
            images = one_pass(dataset, workers, args.batch)
            wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
            print(f"| 500x375 JPEG (OML 4.0 + DataLoader) | {name} {args.im_size} | {args.batch} | {workers} | "
                  f"{images / wall:.0f} | {images / cpu:.0f} |", flush=True)


if __name__ == "__main__":
    main()
