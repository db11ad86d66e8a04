"""torchvision's side of bench_transforms (docs/benchmarks.md): CPU milliseconds per image of OML's
torchvision pipelines on the same kind of 500x375 image, one thread.  Usage: python3 transforms_python.py [N]"""
import sys
import time

import numpy as np
import torch
import torchvision.transforms as t
from PIL import Image
from torchvision.transforms import InterpolationMode

torch.set_num_threads(1)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
yy, xx = np.mgrid[0:375, 0:500].astype(np.float64)
img = np.stack([128 + 100 * np.sin(xx / 9 + yy / 23), 255 * xx / 500, 255 * (1 - yy / 375) * (0.5 + 0.5 * np.cos((xx + yy) / 31))], -1)
img = Image.fromarray(np.clip(img + np.random.default_rng(0).normal(0, 12, img.shape), 0, 255).astype(np.uint8))
norm = [t.ToTensor(), t.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))]
pipelines = {
    "norm_resize_torch(224)": t.Compose([t.Resize((224, 224), antialias=True)] + norm),
    "norm_resize_hypvit_torch(256, 224)": t.Compose(
        [t.Resize(256, interpolation=InterpolationMode.BICUBIC), t.CenterCrop(224)] + norm
    ),
    "augs_torch(224)": t.Compose([t.Resize((224, 224), antialias=True), t.RandomHorizontalFlip(), t.ColorJitter()] + norm),
    "augs_hypvit_torch(224)": t.Compose(
        [t.RandomResizedCrop(224, scale=(0.2, 1.0), interpolation=InterpolationMode.BICUBIC), t.RandomHorizontalFlip()]
        + norm
    ),
}
print(f"torchvision on a 500x375 PIL image, 1 thread, {n} images")
for name, pipeline in pipelines.items():
    for _ in range(10):
        pipeline(img)
    start = time.process_time()
    for _ in range(n):
        pipeline(img)
    print(f"  {name:40s} {(time.process_time() - start) / n * 1e3:.2f} ms CPU per image")
