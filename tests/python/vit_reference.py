"""PyTorch side of the ViT parity tests (tests/core/vit_interop_tests.cpp).

OML itself is not installable here, so this file builds the networks OML's ViTExtractor wraps --
DINO's VisionTransformer and DINOv2's DinoVisionTransformer, with their parameter names and
forward passes -- from torch primitives, and OML's way of finding the backbone in a checkpoint.

    vit_reference.py export DIR ARCH   random weights for ARCH (vits16 | vits14_reg | ...) saved as
                                       a plain state dict (DIR/ARCH.pth, an OrderedDict as
                                       torch.save writes it) and as a Lightning-style checkpoint
                                       (DIR/ARCH_lightning.ckpt), input batches and the embeddings
                                       for them (DIR/ARCH_<input>.pt, see INPUTS)
    vit_reference.py check DIR ARCH    loads DIR/oml_ARCH.ckpt (written by oml-cpp) as OML's
                                       ViTExtractor(weights=...) does -- criterion removed, prefix
                                       found by the trial key norm.bias, strict=True -- and
                                       compares its embeddings of DIR/ARCH_input_224.pt with
                                       DIR/oml_ARCH_out.pt; exit 1 on mismatch
"""
import argparse
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

# name: (embed_dim, depth, heads, patch, dinov2, register tokens)
ARCHS = {
    "vits8": (384, 12, 6, 8, False, 0),
    "vits16": (384, 12, 6, 16, False, 0),
    "vitb8": (768, 12, 12, 8, False, 0),
    "vitb16": (768, 12, 12, 16, False, 0),
    "vits14": (384, 12, 6, 14, True, 0),
    "vitb14": (768, 12, 12, 14, True, 0),
    "vitl14": (1024, 24, 16, 14, True, 0),
    "vits14_reg": (384, 12, 6, 14, True, 4),
    "vitb14_reg": (768, 12, 12, 14, True, 4),
    "vitl14_reg": (1024, 24, 16, 14, True, 4),
}

# input name -> (H, W): the pre-training grid of DINO (224 px) and sizes that need the position
# embedding interpolated (other size, not square).
INPUTS = {
    False: {"input_224": (224, 224), "input_160x192": (160, 192)},
    True: {"input_224": (224, 224), "input_126x182": (126, 182)},
}


class LayerScale(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * self.gamma


class Attention(nn.Module):
    def __init__(self, dim, heads, dinov2):
        super().__init__()
        self.heads, self.dinov2 = heads, dinov2
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        scale = (c // self.heads) ** -0.5
        # DINO scales the logits, DINOv2 the queries (its non-fused path).
        attn = (q * scale) @ k.transpose(-2, -1) if self.dinov2 else (q @ k.transpose(-2, -1)) * scale
        return self.proj((attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, c))


class Mlp(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads, dinov2):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads, dinov2)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim)
        if dinov2:
            self.ls1, self.ls2 = LayerScale(dim), LayerScale(dim)
        else:
            self.ls1 = self.ls2 = nn.Identity()

    def forward(self, x):
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


class PatchEmbed(nn.Module):
    def __init__(self, dim, patch):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)


class VisionTransformer(nn.Module):
    def __init__(self, arch):
        super().__init__()
        dim, depth, heads, patch, dinov2, registers = ARCHS[arch]
        self.patch, self.dinov2 = patch, dinov2
        # DINOv2's `_reg` hub models interpolate to the exact grid, antialiased, without offset.
        self.offset, self.antialias = (0.0, True) if registers else (0.1, False)
        grid = (518 if dinov2 else 224) // patch
        self.patch_embed = PatchEmbed(dim, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, grid * grid + 1, dim))
        self.register_tokens = nn.Parameter(torch.zeros(1, registers, dim)) if registers else None
        self.blocks = nn.ModuleList([Block(dim, heads, dinov2) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        if dinov2:
            self.mask_token = nn.Parameter(torch.zeros(1, dim))

    def pos_encoding(self, n_patches, h, w):
        n = self.pos_embed.shape[1] - 1
        if n_patches == n and h == w:
            return self.pos_embed
        dim = self.pos_embed.shape[-1]
        m = int(math.sqrt(n))
        grid = self.pos_embed[:, 1:].reshape(1, m, m, dim).permute(0, 3, 1, 2)
        h0, w0 = h // self.patch, w // self.patch
        if self.offset:
            size_or_scale = {"scale_factor": ((h0 + self.offset) / math.sqrt(n), (w0 + self.offset) / math.sqrt(n))}
        else:
            size_or_scale = {"size": (h0, w0)}
        grid = F.interpolate(grid, mode="bicubic", antialias=self.antialias, **size_or_scale)
        assert grid.shape[-2:] == (h0, w0), grid.shape
        return torch.cat((self.pos_embed[:, :1], grid.permute(0, 2, 3, 1).reshape(1, -1, dim)), dim=1)

    def forward(self, x):
        b, _, h, w = x.shape
        if self.dinov2:
            assert h % self.patch == 0 and w % self.patch == 0
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(b, -1, -1), x), dim=1)
        x = x + self.pos_encoding(x.shape[1] - 1, h, w)
        if self.register_tokens is not None:
            x = torch.cat((x[:, :1], self.register_tokens.expand(b, -1, -1), x[:, 1:]), dim=1)
        for block in self.blocks:
            x = block(x)
        return self.norm(x)[:, 0]


def multi_scale(model, x):
    # OML's ViTExtractor._multi_scale
    v = torch.zeros(len(x), model.norm.bias.numel())
    for s in [1.0, 1 / 2 ** (1 / 2), 1 / 2]:
        inp = x.clone() if s == 1 else F.interpolate(x, scale_factor=s, mode="bilinear", align_corners=False)
        v += model(inp)
    return v / 3


def randomise(model):
    # Far from the initialisation, so that every tensor matters: norms, LayerScale and tokens too.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm1.weight") or name.endswith("norm2.weight") or name == "norm.weight":
                p.uniform_(0.5, 1.5)
            elif name.endswith("gamma"):
                p.uniform_(0.2, 1.0)
            elif p.dim() >= 2 and "token" not in name and name != "pos_embed":
                p.normal_(0, 1.0 / math.sqrt(p[0].numel()))
            else:
                p.normal_(0, 0.2)


# OML's oml/models/utils.py, as ViTExtractor applies it to a checkpoint.
def remove_criterion(state_dict):
    for key in ["criterion.weight", "speaker_loss.weight"]:
        state_dict.pop(key, None)
    return state_dict


def remove_prefix(state_dict, trial_key):
    keys = [k for k in state_dict if trial_key in k]
    assert keys, f"There are no keys starting from {trial_key}: {list(state_dict)}"
    prefix = keys[0][: keys[0].index(trial_key)]
    others = [k for k in state_dict if not k.startswith(prefix)]
    assert not others, f"There are keys not starting from the found prefix {prefix}: {others}"
    return {k[len(prefix):]: v for k, v in state_dict.items()}


def export(out: Path, arch: str):
    torch.manual_seed(0)
    model = VisionTransformer(arch).eval()
    randomise(model)
    torch.save(model.state_dict(), out / f"{arch}.pth")
    dim = model.norm.bias.numel()
    prefix = "model.model." if arch == "vits16" else "model."  # OML's ExtractorModule / a bare one
    lightning = {
        "epoch": 7,
        "global_step": 1400,
        "pytorch-lightning_version": "2.1.0",
        "state_dict": {
            **{prefix + k: v for k, v in model.state_dict().items()},
            "criterion.weight": torch.randn(10, dim),
            "criterion.x": torch.randn(3),
        },
        "optimizer_states": [{"state": {0: {"step": torch.tensor(3.0)}}, "param_groups": [{"lr": 1e-5}]}],
        "lr_schedulers": [],
        "hyper_parameters": argparse.Namespace(arch=arch, lr=1e-5),
    }
    torch.save(lightning, out / f"{arch}_lightning.ckpt")
    with torch.no_grad():
        for name, (h, w) in INPUTS[ARCHS[arch][4]].items():
            images = torch.randn(2, 3, h, w)
            torch.save(images, out / f"{arch}_{name}.pt")
            torch.save(model(images).clone(), out / f"{arch}_{name}_expected.pt")
            if name == "input_224" and not ARCHS[arch][4]:
                ms = multi_scale(model, images)
                torch.save(ms / ms.norm(dim=1, keepdim=True), out / f"{arch}_{name}_multiscale_normalised.pt")


def check(out: Path, arch: str):
    ckpt = torch.load(out / f"oml_{arch}.ckpt", map_location="cpu")
    state_dict = ckpt["state_dict"] if "state_dict" in ckpt else ckpt
    state_dict = remove_prefix(remove_criterion(dict(state_dict)), trial_key="norm.bias")
    model = VisionTransformer(arch).eval()
    model.load_state_dict(state_dict, strict=True)
    images = torch.load(out / f"{arch}_input_224.pt")
    expected = torch.load(out / f"oml_{arch}_out.pt")
    with torch.no_grad():
        diff = (model(images) - expected).abs().max().item()
    print(f"{arch}: max abs diff Python vs oml-cpp: {diff:.3g}")
    return 0 if diff <= 1e-4 else 1


def main():
    command, folder, arch = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    if command == "export":
        export(folder, arch)
        return 0
    return check(folder, arch)


if __name__ == "__main__":
    sys.exit(main())
