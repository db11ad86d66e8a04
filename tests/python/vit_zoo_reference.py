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
    vit_zoo_reference.py mlp_export DIR
        OML's ExtractorWithMLP(ViTExtractor(arch="vits16"), mlp_features) with random weights, for
        mlp_features [384] (the zoo model's shape) as OML's Lightning checkpoint of it
        (DIR/zoo/vits16_224_mlp_384_inshop.ckpt, keys `model.extractor.model.*` and
        `model.projection.0.*`) and [256, 128] as a plain state dict (DIR/mlp_256_128.pth); an
        input batch (DIR/mlp_input.pt) and each model's output for it (DIR/mlp_384_expected.pt,
        DIR/mlp_256_128_expected.pt)
    vit_zoo_reference.py mlp_check DIR
        loads DIR/oml_mlp_256_128.ckpt (written by oml-cpp) as OML's ExtractorWithMLP(weights=...)
        does -- criterion removed, prefix found by the trial key `extractor.`, strict=True -- and
        compares its output for DIR/mlp_input.pt with DIR/oml_mlp_256_128_out.pt; exit 1 on mismatch

The network and OML's checkpoint handling come from vit_reference.py, the images and the
torchvision pipeline from transforms_reference.py (both beside this file).
"""
import sys
from pathlib import Path

import torch
from PIL import Image
from torch import nn
from torchvision.ops import MLP

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


class ViTExtractor(nn.Module):
    """OML's ViTExtractor with normalise_features=False: the network in `.model`."""

    def __init__(self):
        super().__init__()
        self.model = VisionTransformer("vits16")

    def forward(self, x):
        return self.model(x)


class ExtractorWithMLP(nn.Module):
    """OML's ExtractorWithMLP: names `extractor.*` and torchvision's MLP as `projection`."""

    def __init__(self, mlp_features):
        super().__init__()
        self.extractor = ViTExtractor()
        self.projection = MLP(384, mlp_features)

    def forward(self, x):
        return self.projection(self.extractor(x))


def mlp_export(out: Path):
    torch.manual_seed(4)
    images = torch.randn(2, 3, 64, 96)
    torch.save(images, out / "mlp_input.pt")
    (out / "zoo").mkdir(parents=True, exist_ok=True)
    for features, name in (([384], "mlp_384"), ([256, 128], "mlp_256_128")):
        model = ExtractorWithMLP(features).eval()
        randomise(model.extractor.model)
        with torch.no_grad():
            torch.save(model(images), out / f"{name}_expected.pt")
        if name == "mlp_384":
            torch.save({"epoch": 3, "global_step": 900,
                        "state_dict": {**{"model." + k: v for k, v in model.state_dict().items()},
                                       "criterion.weight": torch.randn(8, 384)}},
                       out / "zoo" / "vits16_224_mlp_384_inshop.ckpt")
        else:
            torch.save(model.state_dict(), out / f"{name}.pth")


def mlp_check(out: Path):
    ckpt = torch.load(out / "oml_mlp_256_128.ckpt", map_location="cpu")
    state_dict = ckpt.get("state_dict", ckpt)
    model = ExtractorWithMLP([256, 128]).eval()
    model.load_state_dict(remove_prefix(remove_criterion(dict(state_dict)), trial_key="extractor."), strict=True)
    with torch.no_grad():
        diff = (model(torch.load(out / "mlp_input.pt")) - torch.load(out / "oml_mlp_256_128_out.pt")).abs().max().item()
    print(f"extractor_with_mlp: max abs diff Python vs oml-cpp: {diff:.3g}")
    return 0 if diff <= 1e-4 else 1


def main():
    if sys.argv[1] == "zoo":
        zoo(Path(sys.argv[2]))
    elif sys.argv[1] == "embed":
        embed(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    elif sys.argv[1] == "mlp_export":
        mlp_export(Path(sys.argv[2]))
    else:
        return mlp_check(Path(sys.argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
