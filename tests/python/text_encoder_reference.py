"""Hugging Face side of the text encoder parity tests (tests/core/text_encoder_tests.cpp).

Small BERT-family models with random weights, built from a config by transformers itself (nothing
is downloaded), written as users have them, with the outputs transformers computes for one padded
batch; and the check that a folder oml-cpp wrote loads in transformers and gives oml-cpp's outputs.

    text_encoder_reference.py export DIR [NAMES]  the models of MODELS (all, or those of the
        comma-separated NAMES): DIR/NAME/ (AutoModel's
        save_pretrained: config.json + model.safetensors), DIR/NAME_bin/ (config.json +
        pytorch_model.bin as a task model saves it: `bert.` / `roberta.` / `distilbert.` prefix,
        the task head, a legacy position_ids buffer; BERT's LayerNorms under the legacy
        gamma / beta names), DIR/NAME_input.pt (input_ids, attention_mask, token_type_ids) and
        DIR/NAME_expected.pt (last hidden state, pooled embeddings, the gradients of a fixed
        projection (`direction`) of the mean-pooled embeddings, bf16 autocast outputs); for `bert` also DIR/bert_f16/ and DIR/bert_bf16/ (safetensors in that dtype)
        with the outputs of those rounded weights, and DIR/bert_sharded/ (save_pretrained's shards); one-layer BERTs for each hidden_act
    text_encoder_reference.py check DIR NAME[,NAME...]   loads DIR/oml_NAME/ (written by oml-cpp)
        with AutoModel.from_pretrained and compares its last hidden state on DIR/NAME_input.pt with
        DIR/oml_NAME_hidden.pt, for each NAME; exit 1 on a mismatch or a weight transformers did
        not load
    text_encoder_reference.py safetensors_write DIR   DIR/dtypes.safetensors by the safetensors
        package: one tensor per dtype oml-cpp reads, a scalar, an empty tensor, metadata; the same
        tensors as DIR/dtypes.pt (torch.save)
    text_encoder_reference.py safetensors_check DIR   reads DIR/oml.safetensors (written by oml-cpp
        from DIR/dtypes.safetensors) with safetensors.safe_open; exit 1 unless equal
"""
import copy
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers
from safetensors import safe_open
from safetensors.torch import save_file

LENGTHS = [9, 6, 4]  # one padded batch: every row shorter than the longest is padded at the end

MODELS = {
    "bert": dict(model_type="bert", vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=48, hidden_act="gelu", max_position_embeddings=24, type_vocab_size=2,
                 layer_norm_eps=1e-12, pad_token_id=0),
    "roberta": dict(model_type="roberta", vocab_size=99, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=40, hidden_act="gelu_new",
                    max_position_embeddings=24, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1,
                    bos_token_id=0, eos_token_id=2),
    "xlm-roberta": dict(model_type="xlm-roberta", vocab_size=101, hidden_size=24, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=36, hidden_act="gelu_pytorch_tanh",
                        max_position_embeddings=20, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1),
    "camembert": dict(model_type="camembert", vocab_size=90, hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=20, hidden_act="relu",
                      max_position_embeddings=16, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1),
    "distilbert": dict(model_type="distilbert", vocab_size=97, dim=32, n_layers=2, n_heads=4, hidden_dim=44,
                       activation="gelu", max_position_embeddings=24, pad_token_id=0),
}
# One-layer BERTs, one per hidden_act oml-cpp implements besides the ones above.
ACTIVATIONS = ["gelu_python", "gelu_fast", "gelu_accurate", "quick_gelu", "gelu_python_tanh", "silu", "swish",
               "tanh"]
for act in ACTIVATIONS:
    MODELS["bert_" + act] = dict(MODELS["bert"], num_hidden_layers=1, hidden_act=act)

PREFIX = {"bert": "bert", "roberta": "roberta", "xlm-roberta": "roberta", "camembert": "roberta",
          "distilbert": "distilbert"}


def build(spec):
    spec = dict(spec)
    config = transformers.AutoConfig.for_model(spec.pop("model_type"), **spec)
    config._attn_implementation = "sdpa"
    model = transformers.AutoModel.from_config(config)
    # HF initialises biases to 0 and LayerNorms to 1/0: draw every tensor so that a swapped or
    # skipped one shows.
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.5 if "LayerNorm" in name or "layer_norm" in name else 0.2)
            if name.endswith("LayerNorm.weight") or name.endswith("layer_norm.weight"):
                p.add_(1.0)
    return model.eval()


def inputs(spec, seed):
    g = torch.Generator().manual_seed(seed)
    pad = spec["pad_token_id"]
    batch, length = len(LENGTHS), max(LENGTHS)
    ids = torch.randint(3, spec["vocab_size"], (batch, length), generator=g)
    mask = torch.zeros(batch, length, dtype=torch.long)
    types = torch.zeros(batch, length, dtype=torch.long)
    for row, n in enumerate(LENGTHS):
        mask[row, :n] = 1
        ids[row, n:] = pad
        if spec.get("type_vocab_size", 0) > 1:
            types[row, n // 2:n] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def call(model, batch):
    kwargs = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    if "token_type_ids" in batch and model.config.model_type != "distilbert":
        kwargs["token_type_ids"] = batch["token_type_ids"]
    return model(**kwargs)


# sentence-transformers' Pooling (cls / mean / max tokens) and Normalize modules.
def pool(hidden, mask, mode):
    m = mask.unsqueeze(-1).to(hidden.dtype)
    if mode == "cls":
        return hidden[:, 0]
    if mode == "mean":
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
    masked = hidden.clone()
    masked[m.expand(hidden.size()) == 0] = -1e9
    return masked.max(1).values


def outputs(model, batch):
    expected = {}
    out = call(model, batch)
    hidden = out.last_hidden_state
    expected["hidden"] = hidden
    for mode in ("cls", "mean", "max"):
        expected[mode] = pool(hidden, batch["attention_mask"], mode)
        expected[mode + "_normalised"] = F.normalize(expected[mode], p=2, dim=1)
    if getattr(out, "pooler_output", None) is not None:
        expected["pooler"] = out.pooler_output
    return expected


def gradients(model, batch, seed):
    # d/dW of a fixed projection of the mean-pooled embeddings, dropout off (eval).
    model.zero_grad()
    with torch.enable_grad():
        hidden = call(model, batch).last_hidden_state
        pooled = pool(hidden, batch["attention_mask"], "mean")
        direction = torch.randn(pooled.shape, generator=torch.Generator().manual_seed(seed))
        (pooled * direction).sum().backward()
    grads = {"grad." + n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return dict(grads, direction=direction)


def bf16_outputs(model, batch):
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        hidden = call(model, batch).last_hidden_state
        mean = pool(hidden, batch["attention_mask"], "mean")
    return {"hidden_bf16": hidden.float(), "mean_bf16": mean.float()}


def task_state_dict(model, name):
    """The state dict a task model (masked LM) saves for these weights: base under its prefix."""
    prefix = PREFIX[model.config.model_type]
    sd = {f"{prefix}.{k}": v.clone() for k, v in model.state_dict().items() if not k.startswith("pooler.")}
    # transformers < 4.31 saved position_ids as a persistent buffer.
    sd[f"{prefix}.embeddings.position_ids"] = torch.arange(model.config.max_position_embeddings)[None]
    g = torch.Generator().manual_seed(5)
    hidden = model.config.hidden_size
    if model.config.model_type == "distilbert":
        head = {"vocab_transform.weight": (hidden, hidden), "vocab_transform.bias": (hidden,),
                "vocab_layer_norm.weight": (hidden,), "vocab_layer_norm.bias": (hidden,),
                "vocab_projector.bias": (model.config.vocab_size,)}
    elif prefix == "bert":
        head = {"cls.predictions.bias": (model.config.vocab_size,),
                "cls.predictions.transform.dense.weight": (hidden, hidden)}
    else:
        head = {"lm_head.bias": (model.config.vocab_size,), "lm_head.dense.weight": (hidden, hidden)}
    for key, shape in head.items():
        sd[key] = torch.randn(shape, generator=g)
    if name == "bert":
        # Checkpoints converted from TensorFlow name LayerNorm's tensors gamma and beta.
        sd = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
              for k, v in sd.items()}
    return sd


def rounded(model, dtype):
    copy_ = copy.deepcopy(model)
    with torch.no_grad():
        for p in copy_.parameters():
            p.copy_(p.to(dtype).float())
    return copy_


def export(root, names):
    root.mkdir(parents=True, exist_ok=True)
    for index, (name, spec) in enumerate(MODELS.items()):
        if names and name not in names:
            continue
        torch.manual_seed(100 + index)
        model = build(spec)
        batch = inputs(spec, 200 + index)
        torch.save(batch, root / f"{name}_input.pt")
        with torch.no_grad():
            expected = outputs(model, batch)
        expected.update(gradients(model, batch, 300 + index))
        expected.update(bf16_outputs(model, batch))
        torch.save({k: v.detach().contiguous() for k, v in expected.items()}, root / f"{name}_expected.pt")
        model.save_pretrained(root / name)
        if name.startswith("bert_"):
            continue
        bin_dir = root / f"{name}_bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "config.json").write_text((root / name / "config.json").read_text())
        torch.save(task_state_dict(model, name), bin_dir / "pytorch_model.bin")
        if name == "bert":
            # Sharded: model.safetensors.index.json and several files, as large models are saved.
            model.save_pretrained(root / "bert_sharded", max_shard_size="20KB")
            for dtype, suffix in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
                folder = root / f"bert_{suffix}"
                folder.mkdir(exist_ok=True)
                (folder / "config.json").write_text((root / name / "config.json").read_text())
                save_file({k: v.to(dtype).contiguous() for k, v in model.state_dict().items()},
                          str(folder / "model.safetensors"), metadata={"format": "pt"})
                with torch.no_grad():
                    hidden = call(rounded(model, dtype), batch).last_hidden_state
                torch.save({"hidden": hidden}, root / f"bert_{suffix}_expected.pt")


def check(root, names):
    """Every name's folder, in one process (importing transformers costs seconds); all are
    checked before the exit status reports the problems of any."""
    problems = []
    for name in names:
        problems += [f"{name}: {p}" for p in check_one(root, name)]
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)


def check_one(root, name):
    folder = root / f"oml_{name}"
    config = json.loads((folder / "config.json").read_text())
    model, info = transformers.AutoModel.from_pretrained(folder, output_loading_info=True, dtype=torch.float32)
    model.eval()
    problems = []
    missing = [k for k in info["missing_keys"] if not k.startswith("pooler.")]
    if missing or info["unexpected_keys"] or info["mismatched_keys"]:
        problems.append(f"loading info {info}")
    if type(model).__name__ != config["architectures"][0]:
        problems.append(f"AutoModel built {type(model).__name__}, config says {config['architectures']}")
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        if f.metadata() != {"format": "pt"}:
            problems.append(f"metadata {f.metadata()}")
    batch = torch.load(root / f"{name}_input.pt")
    with torch.no_grad():
        hidden = call(model, batch).last_hidden_state
    ours = torch.load(root / f"oml_{name}_hidden.pt")
    diff = (hidden - ours).abs().max().item()
    print(f"{name}: max |transformers - oml-cpp| = {diff:.3g}")
    if not diff <= 1e-4:
        problems.append(f"outputs differ by {diff}")
    return problems


DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}


def safetensors_write(root):
    root.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(3)
    tensors = {}
    for i, (code, dtype) in enumerate(DTYPES.items()):
        values = torch.randn(2, 3, i + 1, generator=g) * 50
        tensors[f"t.{code}"] = values > 0 if dtype == torch.bool else values.to(dtype)
    tensors["scalar"] = torch.tensor(2.5)
    tensors["empty"] = torch.zeros(0, 4)
    save_file(tensors, str(root / "dtypes.safetensors"), metadata={"format": "pt", "note": "written by safetensors"})
    torch.save(tensors, root / "dtypes.pt")


def safetensors_check(root):
    problems = []
    with safe_open(str(root / "dtypes.safetensors"), "pt") as f:
        reference = {k: f.get_tensor(k) for k in f.keys()}
        metadata = f.metadata()
    with safe_open(str(root / "oml.safetensors"), "pt") as f:
        ours = {k: f.get_tensor(k) for k in f.keys()}
        if f.metadata() != metadata:
            problems.append(f"metadata {f.metadata()} != {metadata}")
    if sorted(ours) != sorted(reference):
        problems.append(f"names {sorted(ours)} != {sorted(reference)}")
    for k, v in reference.items():
        if k in ours and (ours[k].dtype != v.dtype or ours[k].shape != v.shape or not torch.equal(ours[k], v)):
            problems.append(f"{k}: {ours[k].dtype} {tuple(ours[k].shape)} differs from {v.dtype} {tuple(v.shape)}")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    command, root = sys.argv[1], Path(sys.argv[2])
    if command == "export":
        export(root, sys.argv[3].split(",") if len(sys.argv) > 3 else [])
    elif command == "check":
        check(root, sys.argv[3].split(","))
    elif command == "safetensors_write":
        safetensors_write(root)
    elif command == "safetensors_check":
        safetensors_check(root)
    else:
        sys.exit(f"unknown command {command}")
