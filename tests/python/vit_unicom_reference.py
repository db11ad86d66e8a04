"""PyTorch side of the vit_unicom parity tests (tests/core/vit_unicom_tests.cpp).

`import oml.models.vit_unicom` runs oml/models/__init__.py, which needs all of OML's dependencies,
so this file carries the network OML's ViTUnicomExtractor wraps --
oml/models/vit_unicom/external/vision_transformer.py (UNICOM's VisionTransformer) -- and OML's way
of reading weights into it, both from OML 4.0.0.

    vit_unicom_reference.py export DIR ARCH   random weights for ARCH (vitb32_unicom | ...) as
                                              UNICOM publishes them (DIR/ARCH.pt, float16) and as
                                              OML's Lightning checkpoint (DIR/ARCH_lightning.ckpt),
                                              a batch of two images and the embeddings OML gives
    vit_unicom_reference.py check DIR ARCH    loads DIR/oml_ARCH.ckpt (written by oml-cpp) as
                                              ViTUnicomExtractor(weights=...) does and compares
                                              its embeddings of DIR/ARCH_input.pt with
                                              DIR/oml_ARCH_out.pt; exit 1 on a mismatch
"""
import argparse
import math
import sys
from pathlib import Path

import torch
from torch import nn

# UNICOM's build_model: name -> (input_size, patch_size, dim, embedding_size, depth, num_heads)
ARCHS = {
    "vitb32_unicom": (224, 32, 768, 512, 12, 12),
    "vitb16_unicom": (224, 16, 768, 768, 12, 12),
    "vitl14_unicom": (224, 14, 1024, 768, 24, 16),
    "vitl14_336px_unicom": (336, 14, 1024, 768, 24, 16),
}


# ---- oml/models/vit_unicom/external/vision_transformer.py (evaluation: no drop path) ---------
class Mlp(nn.Module):
    def __init__(self, dim, dim_hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim_hidden)
        self.act = nn.ReLU6()
        self.fc2 = nn.Linear(dim_hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, L, D = x.shape
        qkv = self.qkv(x).reshape(B, L, 3, self.num_heads, D // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0].float(), qkv[1].float(), qkv[2].float()
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, L, D))


class Block(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads)
        self.mlp = Mlp(dim, dim * 4)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchEmbedding(nn.Module):
    def __init__(self, input_size, patch_size, dim):
        super().__init__()
        self.num_patches = (input_size // patch_size) ** 2
        self.proj = nn.Conv2d(3, dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class VisionTransformer(nn.Module):
    def __init__(self, input_size, patch_size, dim, embedding_size, depth, num_heads):
        super().__init__()
        self.dim = dim
        self.patch_embed = PatchEmbedding(input_size, patch_size, dim)
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches, dim))
        self.blocks = nn.ModuleList([Block(dim, num_heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.feature = nn.Sequential(
            nn.Linear(dim * self.patch_embed.num_patches, dim, False),
            nn.BatchNorm1d(dim, eps=2e-5),
            nn.Linear(dim, embedding_size, False),
            nn.BatchNorm1d(embedding_size, eps=2e-5),
        )

    def forward(self, x):
        B = x.shape[0]
        x = self.patch_embed(x) + self.pos_embed
        for func in self.blocks:
            x = func(x)
        x = self.norm(x.float())
        return self.feature(torch.reshape(x, (B, self.patch_embed.num_patches * self.dim)))


# ---- OML's ViTUnicomExtractor.__init__ for a path (oml/models/utils.py) ----------------------
def remove_criterion(state_dict):
    for key in ["criterion.weight", "speaker_loss.weight"]:
        state_dict.pop(key, None)
    return state_dict


def remove_prefix_from_state_dict(state_dict, trial_key):
    keys = [k for k in state_dict if trial_key in k]
    assert keys, f"There are no keys starting from {trial_key}: {list(state_dict)}"
    prefix = keys[0][: keys[0].index(trial_key)]
    others = [k for k in state_dict if not k.startswith(prefix)]
    assert not others, f"There are keys not starting from the found prefix {prefix}: {others}"
    return {k[len(prefix) :]: v for k, v in state_dict.items()}


def oml_model(arch, weights):
    """ViTUnicomExtractor(weights, arch, normalise_features=False).model in eval mode."""
    model = VisionTransformer(*ARCHS[arch]).eval()
    ckpt = torch.load(weights, map_location="cpu", weights_only=False)
    state_dict = ckpt["state_dict"] if "state_dict" in ckpt else ckpt
    state_dict = remove_prefix_from_state_dict(remove_criterion(dict(state_dict)), trial_key="norm.bias")
    model.load_state_dict(state_dict, strict=True)
    return model


def randomise(model):
    # Far from the initialisation, so that every tensor matters: norms and BatchNorm statistics too.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ("norm" in name and name.endswith("weight")) or name in ("feature.1.weight", "feature.3.weight"):
                p.uniform_(0.5, 1.5)
            elif p.dim() >= 2:
                p.normal_(0, 1.0 / math.sqrt(p[0].numel()))
            else:
                p.normal_(0, 0.2)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.normal_(0, 0.5)
            elif name.endswith("running_var"):
                b.uniform_(0.5, 2.0)
            elif name.endswith("num_batches_tracked"):
                b.fill_(100)


def export(out: Path, arch: str):
    torch.manual_seed(0)
    model = VisionTransformer(*ARCHS[arch]).eval()
    randomise(model)
    # UNICOM publishes float16 state dicts (FP16-ViT-B-32.pt, ...); OML loads them into float32.
    published = {k: v.half() if v.is_floating_point() else v for k, v in model.state_dict().items()}
    torch.save(published, out / f"{arch}.pt")
    model.load_state_dict(published)
    lightning = {
        "epoch": 2,
        "global_step": 50,
        "state_dict": {
            **{"model.model." + k: v for k, v in model.state_dict().items()},
            "criterion.weight": torch.randn(10, ARCHS[arch][3]),
        },
        "hyper_parameters": argparse.Namespace(arch=arch),
    }
    torch.save(lightning, out / f"{arch}_lightning.ckpt")
    size = ARCHS[arch][0]
    images = torch.randn(2, 3, size, size)
    torch.save(images, out / f"{arch}_input.pt")
    with torch.no_grad():
        expected = model(images)
        for name in [f"{arch}.pt", f"{arch}_lightning.ckpt"]:
            assert (oml_model(arch, out / name)(images) - expected).abs().max() == 0, name
    torch.save(expected, out / f"{arch}_expected.pt")
    torch.save(expected / torch.linalg.norm(expected, 2, dim=1, keepdim=True), out / f"{arch}_expected_normalised.pt")


def check(out: Path, arch: str):
    model = oml_model(arch, out / f"oml_{arch}.ckpt")
    images = torch.load(out / f"{arch}_input.pt")
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
