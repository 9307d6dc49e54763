"""The Hugging Face face of a model folder: the encoder's weights under BERT's names, a
`tokenizers` tokenizer.json and sentence-transformers' module files, so that
`SentenceTransformer(path)` and `AutoModel.from_pretrained(path)` load the folder edge-xsent
itself loads, with one copy of the weights.

Why an exact mapping exists: the encoder is BERT-shaped (post-LayerNorm blocks, learned
positions, erf GELU, LayerNorm eps 1e-12, an embedding LayerNorm) with masked mean pooling.
What BERT has and we lack is written as zeros (token-type embeddings, the pooler), and the
fused q/k/v projection is split. The language projection (debias.py) is a linear map, so it
becomes a sentence-transformers `Dense` (weight I - B^T B, no bias) after the pooling.

The exported ONNX graphs (export/exporter.py) have a second output, `last_hidden_state`: the token
states with the language subspace removed from each, whose masked mean is the sentence vector,
so optimum's ORTModelForFeatureExtraction and transformers.js' feature-extraction pipeline
(mean pooling) give the vectors too. `sentence_transformer` and `ort_encode` load the folder in
those stacks, and name the extra to install when the stack is missing.

What cannot match: a text with no tokens (empty, whitespace only) is a zero vector in
edge-xsent; BertModel fails on a batch made only of such texts, and the ONNX graph rejects one
alone (zero length; transformers.js pools it to NaN inside a batch).
"""

from __future__ import annotations

import base64
import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from edge_xsent import layout
from edge_xsent.layout import DENSE_CONFIG, DENSE_WEIGHTS
from edge_xsent.config import MASK_ID, PAD_ID, UNK_ID, EncoderConfig
from edge_xsent.errors import UserError

if TYPE_CHECKING:
    import numpy as np
    import torch

    from edge_xsent.encode.tokenizer import Tokenizer

TYPE_VOCAB_SIZE = 2  # optimum's exporter feeds token-type ids in [0, 2); their embeddings are zero
# ids 0 and 1 carry a NUL in the Hugging Face vocabulary: the normaliser deletes control
# characters, so no text can spell them, and a typed "<pad>" or "<unk>" segments as text, as
# SentencePiece does (its control pieces are never matched). "<mask>" is an ordinary piece in both.
HF_PAD, HF_UNK = "<pad>\u0000", "<unk>\u0000"
# edge_xsent.text.normalize spelled for `tokenizers` and transformers.js: explicit classes,
# because `\s` differs between Python (U+001C-U+001F) and JavaScript (U+FEFF).
CONTROL = "[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\ufeff]"
WHITESPACE = "[\t\n\r\u000b\u000c\u001c-\u001f \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+"
SPACE = "\u2581"


def bert_config(cfg: EncoderConfig) -> dict:
    """transformers' BertConfig fields for this encoder (merged into config.json)."""
    return {
        "architectures": ["BertModel"], "model_type": "bert",
        "vocab_size": cfg.table_rows or cfg.vocab_size, "hidden_size": cfg.d_model, "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads, "intermediate_size": cfg.d_ff, "hidden_act": "gelu",
        "max_position_embeddings": cfg.max_len, "type_vocab_size": TYPE_VOCAB_SIZE, "layer_norm_eps": 1e-12,
        "hidden_dropout_prob": cfg.dropout, "attention_probs_dropout_prob": cfg.dropout,
        "initializer_range": 0.02, "pad_token_id": PAD_ID, "position_embedding_type": "absolute",
    }


LAYER_NAMES = {  # ours (blocks.i.X) -> BERT's (encoder.layer.i.Y); qkv is split separately
    "proj": "attention.output.dense", "ln1": "attention.output.LayerNorm",
    "ff1": "intermediate.dense", "ff2": "output.dense", "ln2": "output.LayerNorm",
}
EMBEDDING_NAMES = {"tok_emb.weight": "embeddings.word_embeddings.weight",
                   "pos_emb.weight": "embeddings.position_embeddings.weight",
                   "emb_ln.weight": "embeddings.LayerNorm.weight", "emb_ln.bias": "embeddings.LayerNorm.bias"}


def to_bert(state: dict[str, "torch.Tensor"], cfg: EncoderConfig) -> tuple[dict, dict]:
    """DualEncoder state -> (BertModel state, the rest: generative head and language basis)."""
    import torch

    state = dict(state)
    bert = {new: state.pop(old) for old, new in EMBEDDING_NAMES.items()}
    d = cfg.d_model
    bert["embeddings.token_type_embeddings.weight"] = torch.zeros(TYPE_VOCAB_SIZE, d)
    for i in range(cfg.n_layers):
        ours, theirs = f"blocks.{i}.", f"encoder.layer.{i}."
        for kind in ("weight", "bias"):
            q, k, v = state.pop(f"{ours}qkv.{kind}").split(d, dim=0)
            for name, t in zip(("query", "key", "value"), (q, k, v)):
                bert[f"{theirs}attention.self.{name}.{kind}"] = t.clone()
            for old, new in LAYER_NAMES.items():
                bert[f"{theirs}{new}.{kind}"] = state.pop(f"{ours}{old}.{kind}")
    bert["pooler.dense.weight"] = torch.zeros(d, d)
    bert["pooler.dense.bias"] = torch.zeros(d)
    return bert, state


def from_bert(bert: dict[str, "torch.Tensor"], rest: dict[str, "torch.Tensor"], cfg: EncoderConfig) -> dict:
    """The inverse of `to_bert`: BertModel state + the rest -> DualEncoder state."""
    import torch

    bert = dict(bert)
    state = {old: bert.pop(new) for old, new in EMBEDDING_NAMES.items()}
    for i in range(cfg.n_layers):
        ours, theirs = f"blocks.{i}.", f"encoder.layer.{i}."
        for kind in ("weight", "bias"):
            state[f"{ours}qkv.{kind}"] = torch.cat(
                [bert.pop(f"{theirs}attention.self.{name}.{kind}") for name in ("query", "key", "value")])
            for old, new in LAYER_NAMES.items():
                state[f"{ours}{old}.{kind}"] = bert.pop(f"{theirs}{new}.{kind}")
    return {**state, **rest}


def projection(lang_basis: "torch.Tensor") -> "torch.Tensor":
    """The debiasing step v - (v B^T) B as one matrix W (applied as W v): I - B^T B."""
    import torch

    return torch.eye(lang_basis.shape[1]) - lang_basis.T @ lang_basis


BYTE_SCORE = -1e9


def tokenizer_json(tok: "Tokenizer") -> dict:
    """SentencePiece's unigram model as a `tokenizers` tokenizer.json giving the same ids.

    The normaliser is edge_xsent.text.normalize, then spaces become U+2581 and one is put in
    front (a zero-width regex: the `Strip` normaliser and Metaspace's prepend differ across
    versions and transformers.js). No pre-tokenizer: SentencePiece's pieces never hold an
    inner U+2581, so Viterbi over the whole text finds the same path.

    Byte pieces (`<0xE0>`) get BYTE_SCORE: SentencePiece never matches them as text (typed
    "<0x41>" is six characters), only as the fallback for a character without a piece; so low a
    score keeps every other tokenizer from choosing them over the characters they spell.
    """
    sp, ids = tok.sp, list(range(tok.vocab_size))  # SentencePiece's list calls: one crossing, not 750,000 for e5's
    vocab = [[piece, BYTE_SCORE if byte else score]
             for piece, score, byte in zip(sp.id_to_piece(ids), sp.get_score(ids), sp.is_byte(ids))]
    vocab[PAD_ID][0], vocab[UNK_ID][0] = HF_PAD, HF_UNK
    replace = lambda pattern, content: {"type": "Replace", "pattern": pattern, "content": content}  # noqa: E731
    text = [{"type": "NFKC"}, replace({"Regex": CONTROL}, ""), replace({"Regex": WHITESPACE}, " "),
            replace({"Regex": "^ +| +$"}, "")]
    post = None
    if tok.rules:  # a student's: e5's map (exact in `tokenizers`; transformers.js approximates it by NFKC)
        compose = [{"type": tok.rules.compose}] if tok.rules.compose else []  # TextRules.compose: NFC, map, NFC
        nul = [replace({"String": "\0"}, "")] if tok.rules.char_map.get(0) == "" else []  # no charsmap key (a C string)
        text = [{"type": "Prepend", "prepend": tok.rules.prefix}, *nul, *compose, {"type": "Precompiled",
                "precompiled_charsmap": base64.b64encode(charsmap(tok.rules.char_map)).decode()}, *compose,
                replace({"Regex": " {2,}"}, " ")]
        post, vocab = rules_template(tok, vocab)
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": {"type": "Sequence", "normalizers": [
            *text,
            replace({"String": " "}, SPACE),
            replace({"Regex": "^(?=.)"}, SPACE),
        ]},
        "pre_tokenizer": None, "post_processor": post,
        "decoder": {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": UNK_ID, "vocab": vocab, "byte_fallback": tok.byte_fallback},
    }


def charsmap(char_map: dict[int, str]) -> bytes:
    """A per-character map compiled into SentencePiece's precompiled charsmap (its own compiler, through
    a throwaway training run), which `tokenizers`' Precompiled normaliser reads."""
    import io
    import tempfile

    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    rows = "".join(f"{cp:X}\t{' '.join(f'{ord(c):X}' for c in out)}\n" for cp, out in sorted(char_map.items())
                   if cp)  # U+0000 cannot be a key of SentencePiece's compiler: tokenizer_json drops it before
    with tempfile.NamedTemporaryFile("w", suffix=".tsv", encoding="utf-8") as tsv:
        tsv.write(rows)
        tsv.flush()
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(["a b c d e f g h"] * 8), model_writer=model, vocab_size=12,
                                       model_type="char", normalization_rule_tsv=tsv.name, minloglevel=2,
                                       add_dummy_prefix=False, remove_extra_whitespaces=False)
    proto = pb.ModelProto()
    proto.ParseFromString(model.getvalue())
    return proto.normalizer_spec.precompiled_charsmap


def rules_template(tok: "Tokenizer", vocab: list) -> tuple[dict, list]:
    """The rules' <s> ... </s> as a TemplateProcessing post-processor; their pieces (and <mask>) renamed
    with a NUL, as pad and unk are, so that typed text never spells them."""
    specials = {}
    for name, i in (("bos", tok.rules.bos_id), ("eos", tok.rules.eos_id)):
        if i is not None:
            vocab[i][0] = vocab[i][0] + "\u0000"
            specials[name] = {"id": vocab[i][0], "ids": [i], "tokens": [vocab[i][0]]}
    vocab[MASK_ID][0] = vocab[MASK_ID][0] + "\u0000"
    seq = [*([{"SpecialToken": {"id": specials["bos"]["id"], "type_id": 0}}] if "bos" in specials else []),
           {"Sequence": {"id": "A", "type_id": 0}},
           *([{"SpecialToken": {"id": specials["eos"]["id"], "type_id": 0}}] if "eos" in specials else [])]
    return {"type": "TemplateProcessing", "single": seq, "pair": seq + [{"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {s["id"]: s for s in specials.values()}}, vocab


def tokenizer_config(max_len: int) -> dict:
    # split_special_tokens: a raw "<pad>\0" in the input is text too, never the pad id.
    return {"tokenizer_class": "PreTrainedTokenizerFast", "pad_token": HF_PAD, "unk_token": HF_UNK,
            "model_max_length": max_len, "padding_side": "right", "split_special_tokens": True,
            "clean_up_tokenization_spaces": False}


def sentence_transformers_files(cfg: EncoderConfig, with_projection: bool) -> dict[str, dict]:
    """modules.json and the module configs: Transformer -> mean Pooling (-> Dense projection)."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    files = {
        "sentence_bert_config.json": {"max_seq_length": cfg.max_len, "do_lower_case": False},
        "tokenizer_config.json": tokenizer_config(cfg.max_len),
        "1_Pooling/config.json": {"word_embedding_dimension": cfg.d_model, "pooling_mode_mean_tokens": True},
    }
    if with_projection:
        modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
        files[DENSE_CONFIG] = {"in_features": cfg.d_model, "out_features": cfg.d_model, "bias": False,
                               "activation_function": "torch.nn.modules.linear.Identity"}
    return {"modules.json": modules, **files}


_JSON_TEXTS: dict[tuple[bytes, str], str] = {}


def tokenizer_json_text(tok: "Tokenizer") -> str:
    """tokenizer.json as written, kept for the last two tokenizers of the process: a run saves its model at each
    evaluation and a student's export saves it again, 0.4 s each for e5's 250,002 pieces."""
    rules = json.dumps(tok.rules.to_json(), ensure_ascii=False) if tok.rules else ""  # as Tokenizer.save writes them
    key = (bytes(tok.proto), rules)
    if key not in _JSON_TEXTS:
        if len(_JSON_TEXTS) == 2:
            del _JSON_TEXTS[next(iter(_JSON_TEXTS))]
        _JSON_TEXTS[key] = json.dumps(tokenizer_json(tok), ensure_ascii=False)
    return _JSON_TEXTS[key]


def write_hf_files(folder: Path, cfg: EncoderConfig, tok: "Tokenizer", lang_basis: "torch.Tensor | None") -> None:
    """Everything but config.json and model.safetensors (bundle.save_model writes those)."""
    from edge_xsent.atomic import save_safetensors

    folder = Path(folder)
    (folder / layout.FILES["tokenizer_json"]).write_text(tokenizer_json_text(tok))
    for name, content in sentence_transformers_files(cfg, lang_basis is not None).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(content, indent=2) + "\n")
    if lang_basis is not None:
        save_safetensors({"linear.weight": projection(lang_basis).contiguous()}, folder / DENSE_WEIGHTS)


# --- loading a folder in the Hugging Face stacks ---
EXTRAS = {"sentence_transformers": "hf", "transformers": "hf", "optimum.onnxruntime": "optimum"}


def require(module: str):
    """Import one of the Hugging Face stacks, or say which edge-xsent extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise UserError(f"{module} is not installed ({e}); it comes with the `{EXTRAS[module]}` extra: "
                        f"pip install \"edge-xsent[{EXTRAS[module]}]\"") from e


def sentence_transformer(folder: str | Path, device: str = "cpu"):
    """The folder as a sentence-transformers model: Transformer -> mean Pooling (-> Dense)."""
    return require("sentence_transformers").SentenceTransformer(str(folder), device=device)


def st_onnx_model(folder: str | Path, precision: str = "int8"):
    """The folder as it lies (no export, no float weights) in sentence-transformers' ONNX backend:
    `SentenceTransformer(folder, backend="onnx", model_kwargs={"file_name": "onnx/model_int8.onnx"})`.
    That backend needs optimum, which pins transformers 4: sentence-transformers 5 (the `optimum` extra)."""
    files = {"fp32": layout.ONNX_FP32, "int8": layout.ONNX_INT8}
    if precision not in files:
        raise UserError(f"precision {precision!r}: use one of {', '.join(files)}")
    if not (Path(folder) / files[precision]).exists():
        raise UserError(f"{Path(folder) / files[precision]}: missing; export the folder with `edge-xsent export {folder} --int8`")
    return require("sentence_transformers").SentenceTransformer(
        str(folder), device="cpu", backend="onnx", model_kwargs={"file_name": files[precision]})


def transformers_encode(folder: str | Path, texts: list[str]) -> "np.ndarray":
    """What a transformers user writes: AutoTokenizer + AutoModel, mean pooling over the
    attention mask, then the folder's projection (2_Dense) when it has one."""
    import torch

    transformers = require("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.AutoModel.from_pretrained(str(folder)).eval()
    batch = tok(texts, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        states = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    dense = Path(folder) / DENSE_WEIGHTS
    if dense.exists():
        from safetensors.torch import load_file

        pooled = pooled @ load_file(str(dense))["linear.weight"].T
    return pooled.numpy()


def ort_encode(folder: str | Path, texts: list[str], precision: str = "int8", tokenizer=None) -> "np.ndarray":
    """Vectors from optimum's ORTModelForFeatureExtraction on the bundle's ONNX file, mean-pooled
    as its users do; one text a time, since int8's dynamic activation scales see the whole batch.
    A text with no tokens is a zero vector, as in edge-xsent. `tokenizer`: the folder's AutoTokenizer
    when the caller has it loaded already (reading a student's tokenizer.json takes seconds)."""
    import numpy as np

    files = {"fp32": layout.ONNX_FP32, "int8": layout.ONNX_INT8}
    if precision not in files:
        raise UserError(f"precision {precision!r}: use one of {', '.join(files)}")
    ort = require("optimum.onnxruntime")
    auto = tokenizer if tokenizer is not None else require("transformers").AutoTokenizer.from_pretrained(str(folder))
    onnx_file = Path(files[precision])
    if not (Path(folder) / onnx_file).exists():
        raise UserError(f"{Path(folder) / onnx_file}: missing; export the folder with `edge-xsent export {folder} --int8`")
    model = ort.ORTModelForFeatureExtraction.from_pretrained(str(folder), subfolder=str(onnx_file.parent),
                                                             file_name=onnx_file.name)
    out = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
    for i, text in enumerate(texts):
        batch = auto([text], truncation=True, return_tensors="np")
        if batch["input_ids"].shape[1]:
            states = model(**batch).last_hidden_state
            out[i] = np.asarray(states, dtype=np.float32)[0].mean(0)  # one text: every token is real
    return out
