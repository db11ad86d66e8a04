"""PyTorch side of the oml-cpp <-> torchvision round-trip test (tests/core/pytorch_interop_tests.cpp).

    torchvision_interop.py export DIR   writes torchvision resnet18 weights (as torch.save writes a
                                        state dict: an OrderedDict), a Lightning-style checkpoint, an
                                        input batch and torchvision's outputs for it
    torchvision_interop.py check DIR    loads DIR/oml.ckpt (written by oml-cpp) into torchvision's
                                        resnet18 with strict=True and compares its outputs with
                                        DIR/oml_outputs.pt (written by oml-cpp); exit 1 on mismatch
    torchvision_interop.py load_all DIR loads every file in DIR (written by oml-cpp) with torch.load's
                                        default (weights_only=True since PyTorch 2.6), with
                                        weights_only=True and with weights_only=False, and checks the
                                        three give the same values; prints what each file holds
"""
import argparse
import sys
from pathlib import Path

import torch
import torchvision


def make_resnet18():
    model = torchvision.models.resnet18()
    return model.eval()


def export(out: Path):
    torch.manual_seed(0)
    model = make_resnet18()
    with torch.no_grad():  # non-trivial BatchNorm statistics, so that buffers matter
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 1.5)
                module.num_batches_tracked.fill_(7)
    images = torch.randn(2, 3, 64, 64)
    torch.save(model.state_dict(), out / "tv_resnet18.pth")
    lightning = {
        "epoch": 3,
        "global_step": 120,
        "state_dict": {"model." + k: v for k, v in model.state_dict().items()},
        "hyper_parameters": argparse.Namespace(lr=0.1),
    }
    torch.save(lightning, out / "lightning.ckpt")
    torch.save(images, out / "input.pt")
    with torch.no_grad():
        torch.save(model(images), out / "expected_logits.pt")
        model.fc = torch.nn.Identity()
        torch.save(model(images), out / "expected_features.pt")


def check(out: Path):
    ckpt = torch.load(out / "oml.ckpt")
    assert ckpt["format"] == "oml-cpp-checkpoint", ckpt.keys()
    assert ckpt["epoch"] == 2 and ckpt["step"] == 40, (ckpt["epoch"], ckpt["step"])
    model = make_resnet18()
    model.load_state_dict(ckpt["state_dict"], strict=True)
    images = torch.load(out / "input.pt")
    expected = torch.load(out / "oml_outputs.pt")
    with torch.no_grad():
        logits = model(images)
    diff = (logits - expected).abs().max().item()
    print(f"max abs diff torchvision vs oml-cpp: {diff:.3g}")
    return 0 if diff <= 1e-4 else 1


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def load_all(folder: Path):
    files = sorted(p for p in folder.iterdir() if p.suffix in (".pt", ".pth", ".ckpt"))
    assert files, f"no files in {folder}"
    for path in files:
        default = torch.load(path)
        safe = torch.load(path, weights_only=True)
        full = torch.load(path, weights_only=False)
        assert same(default, safe) and same(safe, full), path
        kind = type(default).__name__ + (f" of {len(default)}" if hasattr(default, "__len__") else "")
        print(f"{path.name}: {kind}, loads with weights_only=True and False")
    ckpt = torch.load(folder / "last.ckpt")
    assert ckpt["format"] == "oml-cpp-checkpoint" and ckpt["epoch"] == 4, ckpt.keys()
    assert ckpt["resume"]["sampler"]["consumed"] == 1 << 40, ckpt["resume"]["sampler"]
    dtypes = torch.load(folder / "dtypes.pt")
    assert dtypes["tuple"] == (1, "a", None) and dtypes["big"] == -(1 << 50), dtypes
    assert torch.equal(dtypes["strided"], torch.arange(12.0).reshape(3, 4).t())
    assert dtypes["BFloat16"].dtype == torch.bfloat16 and dtypes["Bool"].dtype == torch.bool
    model = make_resnet18()
    model.fc = torch.nn.Identity()
    model.load_state_dict(torch.load(folder / "state_dict.pth"), strict=True)
    return 0


def main():
    command, folder = sys.argv[1], Path(sys.argv[2])
    if command == "export":
        export(folder)
        return 0
    if command == "load_all":
        return load_all(folder)
    return check(folder)


if __name__ == "__main__":
    sys.exit(main())
