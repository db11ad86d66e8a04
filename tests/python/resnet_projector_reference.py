"""OML side of the resnet50_projector test (tests/core/resnet_projector_tests.cpp).

    resnet_projector_reference.py export DIR   builds OML's resnet50_projector (torchvision's
                                               resnet50 with OML's projection head) with random
                                               weights and random BatchNorm statistics, and writes:
      DIR/extractor.pth     the state dict of OML's ResnetExtractor (`model.conv1.weight`, ...,
                            `model.fc.0.weight`), as torch.save(extractor.state_dict()) writes it
      DIR/lightning.ckpt    the same weights in a checkpoint as OML's training pipeline writes it
                            (`model.model.*` beside the criterion's `criterion.weight`)
      DIR/moco.pth.tar      the same weights as MoCo v2's published training checkpoint holds them
                            (query encoder `module.encoder_q.*`, key encoder entries, queue)
      DIR/input.pt          a batch of images
      DIR/expected_<case>.pt  what OML's ResnetExtractor, built with <case>'s args and the weights
                            loaded from extractor.pth by OML's own loading code, outputs for it

OML's package cannot be imported here, so the code below is OML's own, copied from
open-metric-learning (commit 6be182e, 2025-11-27): oml/models/resnet/extractor.py
(resnet50_projector, ResnetExtractor without its downloads and GradCAM), oml/models/resnet/pooling.py
(GEM), oml/models/utils.py (remove_criterion_in_state_dict, find_prefix_in_state_dict,
remove_prefix_from_state_dict) and oml/utils/misc_torch.py (normalise).
"""
import argparse
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from torch import nn
from torchvision.models import resnet50

# ---- OML's code ------------------------------------------------------------------------------


class GEM(nn.Module):
    def __init__(self, p: float, eps: float = 1e-6):
        super().__init__()
        self.p = p
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.clip(x, min=self.eps, max=np.inf)
        x = torch.pow(x, self.p)
        bs, feat_dim, h, w = x.shape
        x = x.view(bs, feat_dim, h * w)
        x = x.mean(axis=-1)
        x = torch.pow(x, (1.0 / self.p))
        return x


def normalise(x: torch.Tensor, p: int = 2) -> torch.Tensor:
    assert x.ndim == 2
    xn = torch.linalg.norm(x, p, dim=1).detach()
    x = x.div(xn.unsqueeze(1))
    return x


def remove_criterion_in_state_dict(state_dict):
    if "criterion.weight" in state_dict:
        del state_dict["criterion.weight"]
    if "speaker_loss.weight" in state_dict:
        del state_dict["speaker_loss.weight"]
    return state_dict


def find_prefix_in_state_dict(state_dict, trial_key: str) -> str:
    keys_starting_with_trial_key = [k for k in state_dict.keys() if trial_key in k]
    assert keys_starting_with_trial_key
    k0 = keys_starting_with_trial_key[0]
    prefix = k0[: k0.index(trial_key)]
    keys_not_starting_with_prefix = list(filter(lambda x: not x.startswith(prefix), state_dict.keys()))
    assert not keys_not_starting_with_prefix
    return prefix


def remove_prefix_from_state_dict(state_dict, trial_key: str):
    prefix = find_prefix_in_state_dict(state_dict, trial_key)
    if prefix == "":
        return state_dict
    for k in list(state_dict.keys()):
        if k.startswith(prefix):
            state_dict[k[len(prefix) :]] = state_dict[k]
            del state_dict[k]
    return state_dict


def resnet50_projector() -> nn.Module:
    model = resnet50(weights=None, num_classes=128)
    model.fc = nn.Sequential(
        nn.Linear(model.fc.weight.shape[1], model.fc.weight.shape[1]),
        nn.ReLU(),
        model.fc,
    )
    return model


class ResnetExtractor(nn.Module):
    constructors = {"resnet50_projector": resnet50_projector}

    def __init__(self, weights, arch: str, gem_p: Optional[float], remove_fc: bool, normalise_features: bool):
        super().__init__()
        self.arch = arch
        self.gem_p = gem_p
        self.remove_fc = remove_fc
        self.normalise_features = normalise_features
        constructor = self.constructors[self.arch]
        self.model = constructor()
        if gem_p is not None:
            self.model.avgpool = GEM(p=gem_p)
        if weights is None:
            if self.remove_fc:
                self.model.fc = nn.Identity()
            return
        state_dict = torch.load(weights, map_location="cpu", weights_only=False)
        state_dict = state_dict["state_dict"] if "state_dict" in state_dict.keys() else state_dict
        state_dict = remove_criterion_in_state_dict(state_dict)
        state_dict = remove_prefix_from_state_dict(state_dict, "layer4.")
        if self.remove_fc:
            state_dict.pop("fc.weight", None)
            state_dict.pop("fc.bias", None)
            if arch != "resnet50_projector":
                self.model.fc = nn.Identity()
        self.model.load_state_dict(state_dict, strict=True)
        if self.remove_fc:
            self.model.fc = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.model(x)
        if self.normalise_features:
            x = normalise(x)
        return x


# ---- the cases -------------------------------------------------------------------------------

# name -> ResnetExtractor's args besides weights and arch (the C++ test writes the same as YAML)
CASES = {
    "head": {"gem_p": None, "remove_fc": False, "normalise_features": False},
    "head_gem_normalised": {"gem_p": 3.0, "remove_fc": False, "normalise_features": True},
    "oml_config": {"gem_p": 5.0, "remove_fc": True, "normalise_features": False},  # OML's extractor/resnet
}


def export(out: Path):
    torch.manual_seed(0)
    extractor = ResnetExtractor(None, "resnet50_projector", gem_p=None, remove_fc=False, normalise_features=False)
    with torch.no_grad():  # non-trivial BatchNorm statistics, so that buffers matter
        for module in extractor.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
                module.weight.uniform_(0.2, 0.5)
                module.bias.uniform_(-0.2, 0.2)
                module.num_batches_tracked.fill_(11)
    state = extractor.state_dict()
    torch.save(state, out / "extractor.pth")
    lightning = {
        "epoch": 3,
        "global_step": 120,
        "state_dict": {**{"model." + k: v for k, v in state.items()}, "criterion.weight": torch.randn(5, 128)},
    }
    torch.save(lightning, out / "lightning.ckpt")
    plain = extractor.model.state_dict()
    moco = {
        "epoch": 800,
        "arch": "resnet50",
        "state_dict": {
            **{"module.encoder_q." + k: v for k, v in plain.items()},
            # (MoCo's key encoder is a copy of the whole network; two of its entries show the layout)
            **{"module.encoder_k." + k: plain[k] + 1 for k in ["conv1.weight", "fc.2.bias"]},
            "module.queue": torch.randn(128, 16),
            "module.queue_ptr": torch.zeros(1, dtype=torch.long),
        },
    }
    torch.save(moco, out / "moco.pth.tar")
    images = torch.randn(2, 3, 64, 64)
    torch.save(images, out / "input.pt")
    for name, args in CASES.items():
        model = ResnetExtractor(out / "extractor.pth", "resnet50_projector", **args).eval()
        with torch.no_grad():
            torch.save(model(images), out / f"expected_{name}.pt")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["export"])
    parser.add_argument("dir", type=Path)
    args = parser.parse_args()
    export(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
