"""Python side of the pre-processing parity test (tests/core/transforms_parity_tests.cpp).

    transforms_reference.py export DIR

writes photo-like test images into DIR (JPEG and PNG, written by PIL: smooth gradients, noise,
hard edges, several sizes and aspect ratios, one grayscale), then, for each deterministic OML
transform name, the tensor torchvision's pipeline makes of each image (read as OML reads images
for torchvision transforms: PIL, converted to RGB), as DIR/<name>__<image stem>.pt. It also
writes random resnet18 weights (DIR/resnet18.pth) and the embeddings that network gives for the
norm_resize_hypvit_torch(256, 224) tensors of all images (DIR/embeddings.pt), and the list of
images (DIR/images.txt). The pipelines are written here from torchvision's own transforms, with
the arguments of OML's oml/transforms/images/torchvision.py.
"""
import sys
from pathlib import Path

import numpy as np
import torch
import torchvision
import torchvision.transforms as t
from PIL import Image, ImageDraw
from torchvision.transforms import InterpolationMode

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
MEAN_CLIP = (0.48145466, 0.4578275, 0.40821073)
STD_CLIP = (0.26862954, 0.26130258, 0.27577711)

# (stem, width, height, format, mode)
IMAGES = [
    ("landscape_640x480", 640, 480, "JPEG", "RGB"),
    ("portrait_333x500", 333, 500, "PNG", "RGB"),
    ("large_1000x750", 1000, 750, "JPEG", "RGB"),
    ("wide_311x57", 311, 57, "PNG", "RGB"),
    ("tall_90x201", 90, 201, "JPEG", "RGB"),
    ("small_50x37", 50, 37, "PNG", "RGB"),
    ("square_224", 224, 224, "JPEG", "RGB"),
    ("gray_300x217", 300, 217, "JPEG", "L"),
]


def photo_like(width, height, seed):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    img = np.stack(
        [
            128 + 100 * np.sin(xx / (7 + seed) + yy / 23),
            255 * xx / width,
            255 * (1 - yy / height) * (0.5 + 0.5 * np.cos((xx + yy) / 31)),
        ],
        -1,
    )
    img += rng.normal(0, 12, img.shape)
    pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(pil)
    for _ in range(6):  # hard edges: rectangles, ellipses, lines
        x0, x1 = sorted(rng.integers(0, width, 2))
        y0, y1 = sorted(rng.integers(0, height, 2))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        kind = rng.integers(0, 3)
        if kind == 0:
            draw.rectangle([x0, y0, x1, y1], fill=colour)
        elif kind == 1:
            draw.ellipse([x0, y0, x1, y1], outline=colour, width=3)
        else:
            draw.line([x0, y0, x1, y1], fill=colour, width=2)
    return pil


def pipelines():
    def resize_norm(size, interpolation=InterpolationMode.BILINEAR, mean=MEAN, std=STD):
        return t.Compose([t.Resize(size, interpolation=interpolation, antialias=True), t.ToTensor(), t.Normalize(mean, std)])

    def hypvit(im_size, crop_size, mean=MEAN, std=STD):
        return t.Compose(
            [
                t.Resize(im_size, interpolation=InterpolationMode.BICUBIC),
                t.CenterCrop(crop_size),
                t.ToTensor(),
                t.Normalize(mean=mean, std=std),
            ]
        )

    return {
        "norm_torch": t.Compose([t.ToTensor(), t.Normalize(MEAN, STD)]),
        "norm_resize_torch": resize_norm((224, 224)),
        "norm_resize_torch_96": resize_norm((96, 96)),
        "norm_resize_hypvit_torch": hypvit(224, 224),
        "norm_resize_hypvit_torch_256_224": hypvit(256, 224),
        "norm_resize_hypvit_torch_100_120": hypvit(100, 120),
        "unicom_transforms": hypvit(224, 224, MEAN_CLIP, STD_CLIP),
    }


def export(out: Path):
    names = []
    for seed, (stem, width, height, fmt, mode) in enumerate(IMAGES):
        image = photo_like(width, height, seed)
        if mode == "L":
            image = image.convert("L")
        path = out / (stem + (".jpg" if fmt == "JPEG" else ".png"))
        image.save(path, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
        names.append(path.name)
    (out / "images.txt").write_text("\n".join(names) + "\n")

    for name, pipeline in pipelines().items():
        for file in names:
            with Image.open(out / file) as im:
                tensor = pipeline(im.convert("RGB"))
            torch.save(tensor, out / f"{name}__{Path(file).stem}.pt")

    torch.manual_seed(0)
    model = torchvision.models.resnet18()
    with torch.no_grad():  # non-trivial BatchNorm statistics
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 1.5)
    torch.save(model.state_dict(), out / "resnet18.pth")
    model.fc = torch.nn.Identity()
    model.eval()
    transform = pipelines()["norm_resize_hypvit_torch_256_224"]
    batch = []
    for file in names:
        with Image.open(out / file) as im:
            batch.append(transform(im.convert("RGB")))
    with torch.no_grad():
        torch.save(model(torch.stack(batch)), out / "embeddings.pt")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "export":
        sys.exit(__doc__)
    export(Path(sys.argv[2]))
