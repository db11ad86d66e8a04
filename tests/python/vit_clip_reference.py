"""PyTorch side of the vit_clip parity tests (tests/core/vit_clip_tests.cpp).

OML's package cannot be imported here without its dependencies (`import oml.models.vit_clip`
runs oml/models/__init__.py, which pulls in gdown, transformers, ...), so this file carries the
network OML's ViTCLIPExtractor wraps -- oml/models/vit_clip/external/model.py, OpenAI's CLIP
VisionTransformer with torch.nn.MultiheadAttention and QuickGELU -- and OML's way of reading
weights into it (ViTCLIPExtractor.__init__ and take_visual_part_of_vit_clip), both from OML 4.0.0.

    vit_clip_reference.py export DIR ARCH [FORMS]
                                            random weights for ARCH (vitb16_224 | vitb32_224 | ...)
                                            saved in the forms OML reads (FORMS: `all`, the
                                            default, or `some`: the plain state dict and the
                                            TorchScript archive only; see export()), a batch of
                                            two images and the embeddings OML gives for it
    vit_clip_reference.py check DIR ARCH    loads DIR/oml_ARCH.ckpt (written by oml-cpp) as
                                            ViTCLIPExtractor(weights=...) does and compares its
                                            embeddings of DIR/ARCH_input.pt with
                                            DIR/oml_ARCH_out.pt; exit 1 on a mismatch
"""
import argparse
import math
import sys
from collections import OrderedDict
from pathlib import Path

import torch
from torch import nn

# OML's ViTCLIPExtractor.constructors: name -> (input_resolution, patch_size, width, layers,
# heads, output_dim).
ARCHS = {
    "vitb16_224": (224, 16, 768, 12, 12, 512),
    "vitb32_224": (224, 32, 768, 12, 12, 512),
    "vitl14_224": (224, 14, 1024, 24, 16, 768),
    "vitl14_336": (336, 14, 1024, 24, 16, 768),
}


# ---- oml/models/vit_clip/external/model.py -------------------------------------------------
class LayerNorm(nn.LayerNorm):
    def forward(self, x):
        orig_type = x.dtype
        return super().forward(x.type(torch.float32)).type(orig_type)


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_head)
        self.ln_1 = LayerNorm(d_model)
        self.mlp = nn.Sequential(
            OrderedDict(
                [
                    ("c_fc", nn.Linear(d_model, d_model * 4)),
                    ("gelu", QuickGELU()),
                    ("c_proj", nn.Linear(d_model * 4, d_model)),
                ]
            )
        )
        self.ln_2 = LayerNorm(d_model)

    # OML's model.py asks for no attention weights; export() traces with them (see there).
    need_weights = False

    def forward(self, x):
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=self.need_weights)[0]
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, width, layers, heads):
        super().__init__()
        self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width, heads) for _ in range(layers)])

    def forward(self, x):
        return self.resblocks(x)


class VisionTransformer(nn.Module):
    def __init__(self, input_resolution, patch_size, width, layers, heads, output_dim):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=patch_size, stride=patch_size, bias=False)
        scale = width**-0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn((input_resolution // patch_size) ** 2 + 1, width))
        self.ln_pre = LayerNorm(width)
        self.transformer = Transformer(width, layers, heads)
        self.ln_post = LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, output_dim))

    def forward(self, x):
        x = self.conv1(x)
        x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
        cls = self.class_embedding.to(x.dtype) + torch.zeros(x.shape[0], 1, x.shape[-1], dtype=x.dtype)
        x = torch.cat([cls, x], dim=1) + self.positional_embedding.to(x.dtype)
        x = self.ln_pre(x)
        x = self.transformer(x.permute(1, 0, 2)).permute(1, 0, 2)  # NLD -> LND -> NLD
        return self.ln_post(x[:, 0, :]) @ self.proj


# ---- a whole CLIP model, as OpenAI and Sber publish it: image tower + a text tower -------------
class Clip(nn.Module):
    """CLIP's attribute names; the text tower is small here but its names collide with the image
    tower's once `visual.` is taken away (`transformer.resblocks.0...`, `positional_embedding`)."""

    def __init__(self, arch):
        super().__init__()
        self.visual = VisionTransformer(*ARCHS[arch])
        self.transformer = Transformer(64, 2, 4)
        self.token_embedding = nn.Embedding(100, 64)
        self.positional_embedding = nn.Parameter(torch.randn(77, 64))
        self.ln_final = LayerNorm(64)
        self.text_projection = nn.Parameter(torch.randn(64, ARCHS[arch][5]))
        self.logit_scale = nn.Parameter(torch.tensor(4.6))

    def forward(self, image):
        return self.visual(image)


# ---- OML's ViTCLIPExtractor.__init__ (oml/models/vit_clip/extractor.py, oml/models/utils.py) ----
def remove_criterion(state_dict):
    for key in ["criterion.weight", "speaker_loss.weight"]:
        state_dict.pop(key, None)
    return state_dict


def take_visual_part_of_vit_clip(state_dict, needed_keys):
    for k in list(state_dict):
        if "visual" in k:
            state_dict[k[k.find("visual") + len("visual") + 1 :]] = state_dict.pop(k)
    return {k: v for k, v in state_dict.items() if k in needed_keys}


def remove_prefix_from_state_dict(state_dict, trial_key):
    keys = [k for k in state_dict if trial_key in k]
    assert keys, f"There are no keys starting from {trial_key}: {list(state_dict)}"
    prefix = keys[0][: keys[0].index(trial_key)]
    others = [k for k in state_dict if not k.startswith(prefix)]
    assert not others, f"There are keys not starting from the found prefix {prefix}: {others}"
    return {k[len(prefix) :]: v for k, v in state_dict.items()}


def oml_extractor(arch, weights, jitted):
    """ViTCLIPExtractor(weights, arch).visual, weights read as OML reads them."""
    visual = VisionTransformer(*ARCHS[arch]).eval()
    if jitted:  # OML's zoo entries with is_jitted (OpenAI's files)
        state_dict = torch.jit.load(Path(weights), map_location="cpu").visual.state_dict()
    else:
        state_dict = torch.load(Path(weights), map_location="cpu", weights_only=False)
        state_dict = state_dict.get("state_dict", state_dict)
        state_dict = remove_criterion(dict(state_dict))
        state_dict = take_visual_part_of_vit_clip(state_dict, needed_keys=visual.state_dict().keys())
        state_dict = remove_prefix_from_state_dict(state_dict, trial_key="conv1.weight")
    visual.load_state_dict(state_dict=state_dict, strict=True)
    return visual


def normalise(x):
    return x / torch.linalg.norm(x, 2, dim=1, keepdim=True)


def randomise(model):
    # Far from the initialisation, so that every tensor matters (norms and biases too).
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln_" in name and name.endswith(".weight"):
                p.uniform_(0.5, 1.5)
            elif name.endswith("positional_embedding") or name.endswith("class_embedding"):
                p.normal_(0, 0.5)
            elif name.endswith("proj") and p.dim() == 2:  # the final projection [width, output_dim]
                p.normal_(0, 1.0 / math.sqrt(p.shape[0]))
            elif p.dim() >= 2:
                p.normal_(0, 1.0 / math.sqrt(p[0].numel()))
            else:
                p.normal_(0, 0.2)


def half_like_openai(module):
    # CLIP's convert_weights: convolutions, linear layers, attention projections and the
    # projections in float16; LayerNorms and the embeddings stay float32.
    for name, p in module.named_parameters():
        if not ("ln_" in name or "embedding" in name or name.endswith("logit_scale")):
            p.data = p.data.half()


def export(out: Path, arch: str, all_forms: bool):
    torch.manual_seed(0)
    clip = Clip(arch).eval()
    randomise(clip)
    visual = clip.visual
    resolution = ARCHS[arch][0]
    images = torch.randn(2, 3, resolution, resolution)
    torch.save(images, out / f"{arch}_input.pt")

    # What torch.save(extractor.visual.state_dict()) writes.
    torch.save(visual.state_dict(), out / f"{arch}.pth")
    forms = [f"{arch}.pth"]
    if all_forms:
        forms += [f"{arch}_lightning.ckpt", f"{arch}_clip.pth"]
    # OML's Lightning checkpoint: ExtractorModule keeps the extractor as `model`, whose network
    # is `visual`; ArcFace's weight beside it.
    lightning = {
        "epoch": 3,
        "global_step": 120,
        "pytorch-lightning_version": "2.1.0",
        "state_dict": {
            **{"model.visual." + k: v for k, v in visual.state_dict().items()},
            "criterion.weight": torch.randn(10, ARCHS[arch][5]),
        },
        "hyper_parameters": argparse.Namespace(arch=arch, lr=1e-5),
    }
    if all_forms:
        torch.save(lightning, out / f"{arch}_lightning.ckpt")
        # A whole CLIP state dict (Sber's ruCLIP files): text tower included.
        torch.save(clip.state_dict(), out / f"{arch}_clip.pth")

    with torch.no_grad():
        for name in forms:
            got = oml_extractor(arch, out / name, jitted=False)(images)
            assert (got - visual(images)).abs().max() == 0, name
        expected = visual(images)
        torch.save(expected, out / f"{arch}_expected.pt")
        torch.save(normalise(expected), out / f"{arch}_expected_normalised.pt")

        # OpenAI's files: a TorchScript archive of the whole model, traced, in float16. OpenAI
        # traced with PyTorch 1.7, whose attention is bmm + softmax; PyTorch >= 2.0 traces
        # need_weights=False as aten::scaled_dot_product_attention, an operator LibTorch 1.13 cannot
        # load. Tracing with the weights asked for records 1.7's operators (same values).
        for block in clip.modules():
            if isinstance(block, ResidualAttentionBlock):
                block.need_weights = True
        traced = torch.jit.trace(clip, (images[:1],))
        for block in clip.modules():
            if isinstance(block, ResidualAttentionBlock):
                block.need_weights = False
        half_like_openai(traced)
        torch.jit.save(traced, out / f"{arch}_jit.pt")
        jit_visual = oml_extractor(arch, out / f"{arch}_jit.pt", jitted=True)
        assert jit_visual.conv1.weight.dtype == torch.float32
        torch.save(jit_visual(images), out / f"{arch}_jit_expected.pt")
    print(f"{arch}: exported; fp16 rounding moves the embeddings by {(jit_visual(images) - expected).abs().max():.3g}")


def check(out: Path, arch: str):
    visual = oml_extractor(arch, out / f"oml_{arch}.ckpt", jitted=False)
    images = torch.load(out / f"{arch}_input.pt")
    expected = torch.load(out / f"oml_{arch}_out.pt")
    with torch.no_grad():
        diff = (visual(images) - expected).abs().max().item()
    print(f"{arch}: max abs diff Python vs oml-cpp: {diff:.3g}")
    return 0 if diff <= 1e-4 else 1


def main():
    command, folder, arch = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    if command == "export":
        export(folder, arch, all_forms=sys.argv[4:] != ["some"])
        return 0
    return check(folder, arch)


if __name__ == "__main__":
    sys.exit(main())
