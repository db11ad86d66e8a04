"""Python side of the OML zoo round trip (tests/integration/vit_zoo_tests.cpp).

    vit_zoo_reference.py zoo DIR
        random vits16 weights saved as OML publishes its fine-tuned SOP model would be loaded:
        a Lightning checkpoint of OML's ExtractorModule (keys `model.model.*`, the criterion's
        `criterion.weight`, epoch, optimizer states ...) at DIR/zoo/vits16_sop.ckpt, and
        photo-like images (JPEG and PNG, several sizes) in DIR/images
    vit_zoo_reference.py embed WEIGHTS IMAGES OUT
        the embeddings OML's ViTExtractor(weights=WEIGHTS, arch="vits16", normalise_features=True)
        gives for the images of the folder IMAGES (sorted by name, read with PIL as RGB) after
        OML's norm_resize_hypvit_torch(224, 224) -- as OML's SOP validation config has them --
        saved as OUT (a [N, 384] float32 tensor)

The network and OML's checkpoint handling come from vit_reference.py, the images and the
torchvision pipeline from transforms_reference.py (both beside this file).
"""
import sys
from pathlib import Path

import torch
from PIL import Image

from transforms_reference import photo_like, pipelines
from vit_reference import VisionTransformer, randomise, remove_criterion, remove_prefix

# (file name, width, height)
IMAGES = [("a_640x480.jpg", 640, 480), ("b_333x500.png", 333, 500), ("c_300x300.jpg", 300, 300),
          ("d_250x180.png", 250, 180)]


def zoo(out: Path):
    torch.manual_seed(3)
    model = VisionTransformer("vits16").eval()
    randomise(model)
    (out / "zoo").mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "epoch": 12,
            "global_step": 5000,
            "pytorch-lightning_version": "2.1.0",
            "state_dict": {**{"model.model." + k: v for k, v in model.state_dict().items()},
                           "criterion.weight": torch.randn(16, 384)},
            "optimizer_states": [{"state": {}, "param_groups": [{"lr": 1e-5}]}],
            "lr_schedulers": [],
        },
        out / "zoo" / "vits16_sop.ckpt",
    )
    (out / "images").mkdir(exist_ok=True)
    for seed, (name, width, height) in enumerate(IMAGES):
        photo_like(width, height, seed).save(out / "images" / name)


def embed(weights: Path, images: Path, out: Path):
    ckpt = torch.load(weights, map_location="cpu")
    state_dict = ckpt["state_dict"] if "state_dict" in ckpt else ckpt
    model = VisionTransformer("vits16").eval()
    model.load_state_dict(remove_prefix(remove_criterion(dict(state_dict)), trial_key="norm.bias"), strict=True)
    transform = pipelines()["norm_resize_hypvit_torch"]
    batch = torch.stack([transform(Image.open(p).convert("RGB")) for p in sorted(images.iterdir())])
    with torch.no_grad():
        embeddings = model(batch)
    torch.save(embeddings / embeddings.norm(dim=1, keepdim=True), out)


def main():
    if sys.argv[1] == "zoo":
        zoo(Path(sys.argv[2]))
    else:
        embed(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
