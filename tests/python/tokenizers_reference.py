"""HF `tokenizers` references for tests/core/text_tokenizer_parity_tests.cpp.

    tokenizers_reference.py KIND OUT_DIR

KIND is wordpiece (a BERT pipeline), bpe (a RoBERTa byte-level BPE pipeline) or unigram (an XLM-R
pipeline: a SentencePiece Unigram model trained with its nmt_nfkc character map and converted by
transformers' XLMRobertaConverter). The tokenizer is trained here, on text every Debian 12 machine
has (the licences in /usr/share/common-licenses and Python's standard library sources) plus
generated lines (CJK, combining accents, emoji, control characters, long words, whitespace runs,
...), so that the test needs no network and no model download. Writes

    OUT_DIR/KIND.tokenizer.json            the tokenizer as HF saves it
    OUT_DIR/KIND.truncated.tokenizer.json  the same with truncation and padding enabled
    OUT_DIR/KIND.expected.json             the cases and what HF encodes for each

The cases: 10,000+ single lines and 2,000 pairs with the plain tokenizer, 500 lines without
special tokens, then 2,000 lines and 1,000 pairs with truncation and padding, and 30 batches of 16
padded to the longest (encode_batch).
"""

import glob
import json
import os
import random
import sys
import tempfile
import types

from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

SEED = 20240517


def corpus_lines():
    """Real text present on every Debian 12 machine, in a fixed order."""
    lines = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                lines += [l.rstrip("\n") for l in f]
    for path in sorted(glob.glob("/usr/lib/python3.11/*.py"))[:12]:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines += [l.rstrip("\n") for l in f]
    return [l for l in lines if "\ufffd" not in l]


ACCENTED = "àáâãäåçèéêëìíîïñòóôõöùúûüýÿœŒÆæßÀÉÎÕÜĀăĄćČďĚğĦıĲĽŁńŇŐŘŚŞŠŢŤŮŰŹŻŽệởẫǅǈ"
SCRIPTS = [
    "αβγδε λόγος Ἀθῆναι", "Привет, мир! Ёжик", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया क्षत्रिय",
    "สวัสดีชาวโลก", "각 한국어 텍스트", "日本語のテキストとカタカナ", "ｶﾀｶﾅ ｶﾞｷﾞ ﾊﾟ", "中文文本，标点。",
]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "❤️", "🥰", "1️⃣", "🤖", "🧑🏿‍💻", "⚽"]
CONTROLS = ["\x00", "\x01", "\x07", "\x08", "\x0b", "\x0c", "\r", "\x1b", "\x1f", "\x7f", "\x85", "\x9f", "\t"]
SPECIALS = ["\u200b", "\u200d", "\ufeff", "\u00ad", "\ufffd", "\u00a0", "\u3000", "\u2003", "\u2028", "\u2029",
            "\ue000", "\u0600", "\u180e", "\u1680"]
COMPAT = ["ＡＢＣ１２３！", "ﬁnance", "①②", "㍿", "Å", "Ω", "ℌ", "x²", "½", "…", "™", "ǆ", "ﾟ", "Ⅻ"]
ADDED = ["[MASK]", "<mask>", "[SEP]", "[CLS]", " <mask> ", "[mask]", "<s>", "</s>", "<pad>"]
CONTRACTIONS = ["don't", "we'll", "it's", "I'M", "'re", "they've", "'d", "o'clock", "'", "''"]


def generated_line(rng, words):
    def piece():
        kind = rng.randrange(16)
        if kind == 0:
            return "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(rng.randint(1, 8)))
        if kind == 1:
            lo, hi = rng.choice([(0x3041, 0x3096), (0x30A1, 0x30FA), (0xAC00, 0xD7A3)])
            return "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 6)))
        if kind == 2:
            return "".join(rng.choice(ACCENTED) for _ in range(rng.randint(1, 6)))
        if kind == 3:  # base letters with one to three combining marks
            return "".join(rng.choice("aeiouncAEIOUNC") + "".join(chr(rng.randint(0x300, 0x36F))
                                                                 for _ in range(rng.randint(1, 3)))
                           for _ in range(rng.randint(1, 3)))
        if kind == 4:
            return rng.choice(SCRIPTS)
        if kind == 5:
            return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 3)))
        if kind == 6:
            return "".join(rng.choice(CONTROLS) for _ in range(rng.randint(1, 3)))
        if kind == 7:
            return rng.choice(SPECIALS)
        if kind == 8:
            return rng.choice(COMPAT)
        if kind == 9 and rng.random() < 0.3:  # a very long word, number or punctuation run
            alphabet = rng.choice(["abcdefghijklmnopqrstuvwxyz", "0123456789", "!?.-_/", "аб", "é"])
            return "".join(rng.choice(alphabet) for _ in range(rng.randint(30, 250)))
        if kind == 10:
            return rng.choice([" " * rng.randint(2, 12), "\t\t", " \t \n ".replace("\n", " "), "\u3000\u3000"])
        if kind == 11:
            return rng.choice(ADDED)
        if kind == 12:
            return rng.choice(CONTRACTIONS)
        if kind == 13:
            return str(rng.randint(0, 10 ** rng.randint(1, 12))) + rng.choice(["", ".5", ",000", "%"])
        return rng.choice(words)

    separators = [" ", " ", " ", "", "  ", "\t", ", ", ". ", "\u3000", "-"]
    return "".join(piece() + rng.choice(separators) for _ in range(rng.randint(1, 12)))


def texts(rng, lines, n):
    words = [w for l in lines[:5000] for w in l.split()] or ["word"]
    out = ["", " ", "   ", "\t", "\x00", "hello", "Hello, world!", "[MASK]", "<mask>", "a" * 250]
    while len(out) < n:
        out.append(rng.choice(lines) if rng.random() < 0.45 else generated_line(rng, words))
    return out


def train_wordpiece(training):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(training, trainers.WordPieceTrainer(vocab_size=3000, special_tokens=specials))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.decoder = decoders.WordPiece()
    return tok


def train_bpe(training):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    tok.train_from_iterator(training, trainers.BpeTrainer(
        vocab_size=4000, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    tok.post_processor = processors.RobertaProcessing(
        ("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")), trim_offsets=True, add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    return tok


def train_unigram(training, workdir):
    import sentencepiece as spm
    from transformers.convert_slow_tokenizer import XLMRobertaConverter

    corpus = os.path.join(workdir, "spm_corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join([l for l in training if l.strip()][-12000:]))
    prefix = os.path.join(workdir, "spm")
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, vocab_size=4000, model_type="unigram",
                                   normalization_rule_name="nmt_nfkc", character_coverage=0.98, hard_vocab_limit=False,
                                   num_threads=1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    fairseq = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}

    def to_id(token):  # XLM-R's ids: fairseq's four specials, then the SentencePiece pieces shifted by one
        return fairseq[token] if token in fairseq else sp.piece_to_id(token) + 1

    slow = types.SimpleNamespace(vocab_file=prefix + ".model", add_prefix_space=True, legacy=True,
                                 convert_tokens_to_ids=to_id)
    tok = XLMRobertaConverter(slow).converted()
    tok.add_special_tokens([AddedToken(t, special=True) for t in ["<s>", "<pad>", "</s>", "<unk>"]])
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    return tok


def encoding_json(e):
    return {"ids": e.ids, "type_ids": e.type_ids, "attention_mask": e.attention_mask,
            "special_tokens_mask": e.special_tokens_mask, "offsets": [list(o) for o in e.offsets]}


def main():
    kind, out_dir = sys.argv[1], sys.argv[2]
    rng = random.Random(SEED)
    lines = corpus_lines()
    words = [w for l in lines[:5000] for w in l.split()] or ["word"]
    training = lines + [generated_line(rng, words) for _ in range(3000)]
    with tempfile.TemporaryDirectory() as workdir:
        if kind == "wordpiece":
            tok = train_wordpiece(training)
        elif kind == "bpe":
            tok = train_bpe(training)
        elif kind == "unigram":
            tok = train_unigram(training, workdir)
        else:
            sys.exit(f"unknown kind {kind}")
    tok.no_truncation()
    tok.no_padding()
    tok.save(os.path.join(out_dir, f"{kind}.tokenizer.json"))

    singles = texts(rng, lines, 10000)
    pairs = [(rng.choice(singles), rng.choice(singles)) for _ in range(2000)]
    cases = []
    for t, e in zip(singles, tok.encode_batch(singles)):
        cases.append({"text": t, "settings": "plain", **encoding_json(e)})
    for (a, b), e in zip(pairs, tok.encode_batch(pairs)):
        cases.append({"text": a, "pair": b, "settings": "plain", **encoding_json(e)})
    for t in singles[:500]:
        cases.append({"text": t, "settings": "plain", "add_special_tokens": False,
                      **encoding_json(tok.encode(t, add_special_tokens=False))})

    # Truncation and padding: what the file's sections say, and what a caller sets.
    truncation = {"max_length": 24, "stride": 0, "strategy": "longest_first", "direction": "right"}
    padding = {"length": 32, "pad_to_multiple_of": None, "pad_id": tok.token_to_id("[PAD]" if kind == "wordpiece"
                                                                                     else "<pad>"),
               "pad_type_id": 0, "pad_token": "[PAD]" if kind == "wordpiece" else "<pad>", "direction": "right"}
    settings = [
        ("truncated", truncation, padding),
        ("left", {**truncation, "max_length": 17, "direction": "left", "strategy": "only_first"},
         {**padding, "length": None, "pad_to_multiple_of": 8, "direction": "left"}),
    ]
    for name, t, p in settings:
        tok.enable_truncation(**t)
        tok.enable_padding(**p)
        if name == "truncated":
            tok.save(os.path.join(out_dir, f"{kind}.truncated.tokenizer.json"))
        for text in singles[:2000]:
            try:
                cases.append({"text": text, "settings": name, **encoding_json(tok.encode(text))})
            except Exception as error:  # HF refuses (e.g. only_first with a too short first text)
                cases.append({"text": text, "settings": name, "error": str(error)})
        for a, b in pairs[:1000]:
            try:
                cases.append({"text": a, "pair": b, "settings": name, **encoding_json(tok.encode(a, b))})
            except Exception as error:
                cases.append({"text": a, "pair": b, "settings": name, "error": str(error)})
    batches = []
    tok.no_truncation()
    tok.enable_padding(pad_id=padding["pad_id"], pad_token=padding["pad_token"], pad_to_multiple_of=8)
    for k in range(30):
        batch = singles[2000 + 16 * k: 2000 + 16 * (k + 1)]
        batches.append({"texts": batch, "encodings": [encoding_json(e) for e in tok.encode_batch(batch)]})
    with open(os.path.join(out_dir, f"{kind}.expected.json"), "w", encoding="utf-8") as f:
        json.dump({"settings": {name: {"truncation": t, "padding": p} for name, t, p in settings},
                   "batch_padding": {"pad_id": padding["pad_id"], "pad_token": padding["pad_token"],
                                     "pad_to_multiple_of": 8},
                   "cases": cases, "batches": batches}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
