"""Training, top to bottom: data -> tokenizer -> model -> loop with validation and checkpoints.

Deterministic by construction: the batch of step s is a pure function of (seed, s) and the
random state of step s is re-seeded from (seed, s, rank), so a run killed at any point
and resumed from its last checkpoint takes exactly the steps it would have taken.

Several GPUs or nodes: launch with torchrun; each process takes its own share of every
global batch and DistributedDataParallel averages the gradients.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from tqdm import tqdm

from .atomic import atomic_write
from .batches import BatchPlan, TokenizedPairs, TokenizedTexts, make_batch, tokenize_pairs
from .bundle import read_training, save_model
from .data.corpus import Pair, pair_langs, read_pairs, resolve
from .config import OBJECTIVES, UNK_ID, EncoderConfig, TrainConfig, portable  # noqa: F401  (re-exported: edge_xsent.train.TrainConfig)
from .errors import UserError
from .layout import FILES
from .model import DualEncoder
from .objectives import Objective, punctuation_pieces
from .optim import LazyAdam, adam, clip_grad_norm
from .threads import spinning_warning
from .tokenizer import Tokenizer


class TrainingStopped(UserError):
    """Training stopped cleanly (NaN loss, failed save); the last good checkpoint is intact."""


# ----------------------------------------------------------------------------- data

def load_texts(cfg: TrainConfig, split: str, limit: int | None = None) -> list[Pair]:
    from .data.reserved import is_reserved_folder

    if is_reserved_folder(resolve(cfg.data)):  # the out-of-genre benchmark judges models; it never trains them
        raise UserError(f"{cfg.data} is a reserved evaluation set (edge-xsent data reserved): train on a corpus "
                        "built by `edge-xsent data build`")
    langs = tuple(cfg.langs.split(",")) if cfg.langs else None
    return list(itertools.islice(read_pairs(cfg.data, langs=langs, split=split), limit))


# ----------------------------------------------------------------------------- schedule

def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up, then cosine decay to min_lr_ratio * lr at max_steps."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    t = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t)))


# ----------------------------------------------------------------------------- evaluation during training

@torch.no_grad()
def validate(objective: Objective, data: TokenizedPairs, cfg: TrainConfig, device: torch.device) -> dict[str, float]:
    """Mean validation losses (fixed masking seed) and retrieval P@1 (a -> b, cosine) within each language pair."""
    objective.eval()
    sums: dict[str, float] = {}
    us, vs = [], []
    gen = torch.Generator().manual_seed(cfg.seed + 12345)
    n_batches = 0
    for start in range(0, len(data) - 1, cfg.batch_size):
        idx = np.arange(start, min(start + cfg.batch_size, len(data)))
        if len(idx) < 2:
            break
        batch = make_batch(data, idx, device)
        with autocast(device, cfg):
            losses = objective(batch, gen)
            us.append(objective.model(batch["a"], batch["am"]).float())
            vs.append(objective.model(batch["b"], batch["bm"]).float())
        for k, val in losses.items():
            sums[k] = sums.get(k, 0.0) + float(val)
        n_batches += 1
    objective.train()
    out = {f"val_{k}": v / max(n_batches, 1) for k, v in sums.items()}
    u = nn.functional.normalize(torch.cat(us), dim=-1)
    v = nn.functional.normalize(torch.cat(vs), dim=-1)
    # Candidates only from the query's own language pair: the same English sentence is often
    # in the split with several translations, and another language's one is no error.
    pair = torch.from_numpy(data.lang_a[: len(u)] * 1000 + data.lang_b[: len(u)]).to(u.device)
    sims = (u @ v.T).masked_fill(pair[:, None] != pair[None, :], -2.0)
    out["val_p@1"] = float((sims.argmax(1) == torch.arange(len(u), device=u.device)).float().mean())
    return out


# ----------------------------------------------------------------------------- setup: tokenizer, warm start, teacher

def setup_tokenizer(cfg: TrainConfig, rows, out: Path, resuming: bool, is_main: bool, world: int) -> Tokenizer:
    """A given tokenizer, else the run's own on resume, else the --init model's, or one trained on
    the train split (`tokenizer = "train"` asks for that even with --init: a new vocabulary, the
    init's weights carried over by `transfer_vocabulary`); copied into the run folder so that it
    stays self-contained. A resumed run never reads its init: that folder may be gone or hold
    another model by then (init only chose the first step's weights)."""
    tok_path = out / FILES["tokenizer"]
    fresh = cfg.tokenizer == TRAIN_TOKENIZER
    own = resuming and tok_path.exists()
    given = Path(cfg.tokenizer).expanduser() if cfg.tokenizer and not fresh else \
        start_dir(cfg) / FILES["tokenizer"] if cfg.init and not fresh and not own else None
    if given is not None:
        tok = Tokenizer.load(given)
        if is_main and not tok_path.exists():
            with atomic_write(tok_path, "wb") as f:
                f.write(tok.proto)
    elif tok_path.exists() and resuming:
        tok = Tokenizer.load(tok_path)
    else:
        if is_main:
            tok = Tokenizer.train((t for p in rows for t in (p.a, p.b)), cfg.model.vocab_size, seed=cfg.seed)
            with atomic_write(tok_path, "wb") as f:
                f.write(tok.proto)
        _barrier(world)
        tok = Tokenizer.load(tok_path)
    if tok.vocab_size != cfg.model.vocab_size:
        raise UserError(f"tokenizer {given or tok_path} has {tok.vocab_size} pieces, the config says "
                        f"vocab_size={cfg.model.vocab_size}: set [model] vocab_size to {tok.vocab_size}")
    return tok


def start_dir(cfg: TrainConfig) -> Path:
    """The model folder a run starts from: `init_dir`'s, or for `init = "e5-small"` the pruned start
    (edge_xsent/prune.py), built once."""
    from .prune import E5_INIT, start_folder

    return start_folder(cfg) if cfg.init == E5_INIT else init_dir(cfg.init)


def init_dir(init: str) -> Path:
    """`default` names the model shipped in the package; `git:COMMIT` the one shipped at that commit;
    a run folder means its model/."""
    from .bundle import resolve_model_dir
    from .encoder import DEFAULT_MODEL

    if init.startswith(GIT_INIT):
        return model_from_git(init)
    return DEFAULT_MODEL if init == "default" else resolve_model_dir(Path(init).expanduser())


GIT_INIT = "git:"  # init = "git:REF" or "git:REF:PATH": a model folder from this checkout's history
GIT_MODEL_PATH = "edge_xsent/resources/default-model"
INIT_CACHE = Path("~/.cache/edge-xsent/init")


def model_from_git(spec: str, repo: Path | None = None, cache: Path = INIT_CACHE) -> Path:
    """The model folder `spec` names, taken once from git into the cache. `default` moves on when a
    model ships; a recipe that started from an earlier default names it this way and stays runnable.
    A recipe is shared like data, so REF and PATH are data too: REF is resolved to a commit id and
    PATH to a tree id (every git call ends its options with --end-of-options, no shell), and the cache
    is keyed by that tree id, never by the name given, so a moved branch never reuses an old start."""
    import io
    import tarfile
    import tempfile

    _, ref, *rest = spec.split(":", 2)
    path = _git_model_path(spec, rest[0] if rest else GIT_MODEL_PATH)
    repo = repo or Path(__file__).resolve().parent.parent
    commit = _git_object(repo, spec, f"{ref}^{{commit}}", "commit")
    tree = _git_object(repo, spec, f"{commit}:{path}", f"folder {path} at commit {commit[:12]}")
    if _git(repo, "cat-file", "-t", tree).stdout.strip() != b"tree":
        raise UserError(f"init {spec}: {path} at commit {commit[:12]} is a file, not a model folder")
    root = Path(cache).expanduser()
    dest = root / tree
    if (dest / "manifest.json").is_file():
        return dest
    if dest.exists() or dest.is_symlink():
        raise UserError(f"init {spec}: {dest} exists but holds no model folder; remove it and rerun")
    archive = _git(repo, "archive", "--format=tar", "--end-of-options", tree)
    if archive.returncode != 0:
        raise UserError(f"init {spec}: git archive failed ({_last_line(archive.stderr)})")
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=".extract.") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        if not (Path(tmp) / "manifest.json").is_file():
            raise UserError(f"init {spec}: {path} at commit {commit[:12]} is not a model folder (no manifest.json)")
        os.replace(tmp, dest)  # whole or not at all: a stopped extraction leaves no half model
        os.mkdir(tmp)  # TemporaryDirectory removes its own name on the way out
    return dest


def _git_model_path(spec: str, path: str) -> str:
    """PATH of `git:REF:PATH`: a folder inside the tree, named plainly (no option, no `..`, not the root)."""
    parts = path.strip("/").split("/")
    if path.startswith(("-", "/")) or any(p in ("", ".", "..") for p in parts):
        raise UserError(f"init {spec}: {path!r} is not a folder inside the repository; name one such as "
                        f"{GIT_MODEL_PATH}")
    return "/".join(parts)


def _git_object(repo: Path, spec: str, rev: str, what: str) -> str:
    """The full id of `rev`, which git reads as a revision and never as an option."""
    if rev.startswith("-"):
        raise UserError(f"init {spec}: a git reference cannot start with '-'; name a commit, branch or tag")
    done = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", rev)
    oid = done.stdout.decode(errors="replace").strip()
    if done.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", oid):
        raise UserError(f"init {spec}: git finds no {what} there; it needs a git checkout of edge-xsent with "
                        "that commit (a --depth 1 clone has no history: git fetch --unshallow)")
    return oid


def _git(repo: Path, *args: str):
    import subprocess

    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True)


def _last_line(stderr: bytes) -> str:
    return (stderr.decode(errors="replace").strip().splitlines() or ["git failed"])[-1]


TRAIN_TOKENIZER = "train"  # the `tokenizer` setting that trains a new vocabulary even with --init
WARM_START_FIELDS = ("d_model", "n_heads")  # n_layers and d_ff may grow: stack_layers, widen_ffn


def load_init_weights(model: DualEncoder, folder: Path, tok: Tokenizer | None = None) -> None:
    """Copy a trained model's weights into `model` (same architecture; the generative head too
    when its shape matches). A longer max_len is allowed: the new positions start as copies of
    the last learned one. More layers are allowed, a multiple of the trained ones: the trained
    stack is repeated on top of itself (Gong et al. 2019, "stacking"), so depth can be measured
    warm instead of from scratch. A debiased model's language projection is not carried over:
    the subspace is re-estimated after training (`edge-xsent debias`). A wider feed-forward layer
    (d_ff) is allowed: the new hidden units start with zero output weights (`widen_ffn`), so the
    wider model computes exactly what the trained one did and width can be measured warm too."""
    from .bundle import load_model

    trained, their_tok, _ = load_model(folder)
    theirs, ours = trained.cfg, model.cfg
    wrong = [f"{k}={getattr(theirs, k)} there, {getattr(ours, k)} here" for k in WARM_START_FIELDS
             if getattr(theirs, k) != getattr(ours, k)]
    if ours.n_layers % theirs.n_layers:
        wrong.append(f"n_layers={theirs.n_layers} there, {ours.n_layers} here (it may grow to a multiple)")
    if ours.d_ff < theirs.d_ff:
        wrong.append(f"d_ff={theirs.d_ff} there, {ours.d_ff} here (it may grow, not shrink)")
    if ours.max_len < theirs.max_len:
        wrong.append(f"max_len={theirs.max_len} there, {ours.max_len} here (it may grow, not shrink)")
    if wrong:
        raise UserError(f"--init {folder}: the model does not match the config ({'; '.join(wrong)}); "
                        "set [model] to the init model's sizes (its config.json)")
    state = stack_layers({k: v for k, v in trained.state_dict().items() if k != "lang_basis"},
                         theirs.n_layers, ours.n_layers)
    state = widen_ffn(state, ours.d_ff, seed=0)
    new_vocab = tok is not None and tok.proto != their_tok.proto
    if new_vocab:
        state.update(transfer_vocabulary(their_tok, tok, state["tok_emb.weight"], state["head_bias"]))
    elif ours.vocab_size != theirs.vocab_size:
        raise UserError(f"--init {folder}: vocab_size={theirs.vocab_size} there, {ours.vocab_size} here; a new "
                        f'vocabulary needs its tokenizer (tokenizer = "{TRAIN_TOKENIZER}" trains one on the corpus)')
    pos = state["pos_emb.weight"]
    state["pos_emb.weight"] = torch.cat([pos, pos[-1:].expand(ours.max_len - len(pos), -1)])
    own = model.state_dict()
    skipped = [k for k, v in state.items() if k not in own or own[k].shape != v.shape]
    model.load_state_dict({k: v for k, v in state.items() if k not in skipped}, strict=False)
    if ours.n_layers != theirs.n_layers:
        print(f"--init: its {theirs.n_layers} layers stacked into {ours.n_layers}", file=sys.stderr)
    if new_vocab:
        print(f"--init: vocabulary of {theirs.vocab_size} pieces transferred to {ours.vocab_size}", file=sys.stderr)
    if ours.d_ff != theirs.d_ff:
        print(f"--init: feed-forward width {theirs.d_ff} grown to {ours.d_ff} (new units output zero)", file=sys.stderr)
    if skipped:
        print(f"--init: not carried over (shape differs): {', '.join(skipped)}", file=sys.stderr)


def stack_layers(state: dict[str, torch.Tensor], have: int, want: int) -> dict[str, torch.Tensor]:
    """Layer j of the deeper model starts as trained layer j % have: [0, 1] -> [0, 1, 0, 1]."""
    rest = {k: v for k, v in state.items() if not k.startswith("blocks.")}
    for k, v in state.items():
        if k.startswith("blocks."):
            _, i, name = k.split(".", 2)
            rest.update({f"blocks.{j}.{name}": v.clone() for j in range(int(i), want, have)})
    return rest


def transfer_vocabulary(old: Tokenizer, new: Tokenizer, emb: torch.Tensor, bias: torch.Tensor
                        ) -> dict[str, torch.Tensor]:
    """Embeddings and output biases for `new`'s pieces from a model trained with `old`'s: a piece
    both know keeps its row; any other starts as the mean of the rows of its text as `old`
    segments it (fast vocabulary transfer, Gee et al. 2022), so the model reads the same words
    much as before instead of from random rows."""
    old_ids = {old.sp.id_to_piece(i): i for i in range(old.vocab_size)}
    rows, biases = [], []
    for i in range(new.vocab_size):
        piece = new.sp.id_to_piece(i)
        ids = [old_ids[piece]] if piece in old_ids else _old_segmentation(old, piece)
        rows.append(emb[ids].mean(0) if ids else emb[UNK_ID])
        biases.append(bias[ids].mean() if ids else bias[UNK_ID])
    return {"tok_emb.weight": torch.stack(rows), "head_bias": torch.stack(biases)}


def _old_segmentation(old: Tokenizer, piece: str) -> list[int]:
    """`old`'s ids for a piece's text; a piece inside a word ("ing") loses the word-start
    marker SentencePiece puts before any text it encodes."""
    ids = old.sp.encode(piece.replace("\u2581", " "))
    if not piece.startswith("\u2581") and ids and old.sp.id_to_piece(ids[0]) == "\u2581":
        ids = ids[1:]
    return [i for i in ids if i != UNK_ID] or ids


def widen_ffn(state: dict[str, torch.Tensor], want: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Grow every block's feed-forward hidden width to `want` (Net2Net-style, function-preserving):
    the new units get small random input weights (std 0.02, as a fresh model's) and zero output
    weights, so they change nothing until training moves their outputs away from zero."""
    gen = torch.Generator().manual_seed(seed)
    out = dict(state)
    for k, w in state.items():
        if not k.endswith(".ff1.weight") or len(w) >= want:
            continue
        prefix, extra = k[: -len("ff1.weight")], want - len(w)
        out[k] = torch.cat([w, torch.randn(extra, w.shape[1], generator=gen, dtype=w.dtype) * 0.02])
        out[prefix + "ff1.bias"] = torch.cat([state[prefix + "ff1.bias"], w.new_zeros(extra)])
        w2 = state[prefix + "ff2.weight"]
        out[prefix + "ff2.weight"] = torch.cat([w2, w2.new_zeros(w2.shape[0], extra)], dim=1)
    return out


def attach_teacher(cfg: TrainConfig, splits, tok: Tokenizer, is_main: bool, world: int,
                   progress: bool) -> TokenizedTexts | None:
    """Label the source side of every (rows, data) split and the corpus's monolingual texts with
    the teacher (cached on disk), attach the vectors to the data, and return the monolingual
    texts when the recipe uses them. Monolingual text in a language the teacher was not trained
    on is left out: its vectors there are noise (Reimers and Gurevych's student learns those
    languages from the pairs, whose English side the teacher knows)."""
    from .data.corpus import read_mono
    from .teacher import load_teacher
    from .teacher import label

    teacher = load_teacher(cfg.teacher, threads=cfg.threads or torch.get_num_threads())
    known = teacher.languages
    unknown = sorted({p.lang_a for rows, _ in splits for p in rows} - known) if known else []
    if unknown:
        raise UserError(f"the teacher {cfg.teacher} does not know {', '.join(unknown)}, the source side of some pairs; "
                        f"it labels only the source side, so put a language it knows there ({', '.join(sorted(known))}) "
                        "or leave teacher unset")
    mono_path = resolve(cfg.data) / "mono.tsv"
    mono_texts = [t for lang, t, _ in read_mono(mono_path) if not known or lang in known] \
        if cfg.mono_batch_size and mono_path.exists() else []
    if cfg.mono_batch_size and not mono_texts:
        raise UserError(f"mono_batch_size is set but {mono_path} has no text in a language the teacher knows: build "
                        "the corpus with monolingual sources (edge-xsent data build) or set mono_batch_size = 0")
    texts = [p.a for rows, _ in splits for p in rows] + mono_texts
    if is_main:  # rank 0 labels what the cache lacks; the others then read it, every text cached
        vecs, rows_of = label(texts, teacher, cfg.teacher_cache, progress=progress)
    _barrier(world)
    if not is_main:
        vecs, rows_of = label(texts, teacher, cfg.teacher_cache, progress=False)
    offset = 0
    for rows, data in splits:
        if data is not None:
            data.t_vecs, data.t_idx = vecs, rows_of[offset + data.row]
        offset += len(rows)
    if not mono_texts:
        return None
    ids = tok.encode(mono_texts, cfg.model.max_len)
    keep = [i for i, x in enumerate(ids) if x]
    return TokenizedTexts([np.asarray(ids[i], dtype=np.int64) for i in keep], vecs, rows_of[offset + np.array(keep)])


# ----------------------------------------------------------------------------- checkpoints

def checkpoint_path(out: Path) -> Path:
    return out / "checkpoints" / "last.pt"


def save_checkpoint(path: Path, state: dict) -> None:
    """Atomic: if the write fails (disk full, kill), the previous checkpoint stays usable."""
    import io

    buf = io.BytesIO()  # serialised first: a full disk then fails as the OSError it is, not torch's RuntimeError
    torch.save(state, buf)
    with atomic_write(path, "wb") as f:
        f.write(buf.getbuffer())


def load_checkpoint(path: Path) -> dict:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)  # never unpickle code
    except Exception as e:  # a torn or foreign file: say which and what to do
        raise UserError(f"{path}: unreadable checkpoint ({e}); delete it to start over") from e


# ----------------------------------------------------------------------------- devices

def pick_device(cfg: TrainConfig, local_rank: int) -> torch.device:
    if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise UserError("--device cuda, but no CUDA GPU is visible to torch")
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def amp_dtype(device: torch.device, cfg: TrainConfig) -> torch.dtype | None:
    if device.type != "cuda" or not cfg.amp:
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def autocast(device: torch.device, cfg: TrainConfig):
    dtype = amp_dtype(device, cfg)
    return torch.autocast(device_type=device.type, dtype=dtype, enabled=dtype is not None)


# ----------------------------------------------------------------------------- one training step

@dataclass
class Anchor:
    """A run's first weights, frozen, and the languages whose sentences keep their vectors from it
    (anchor_weight); kept in the checkpoint, since a resumed run never reads its init."""
    start: DualEncoder
    langs: list[str]
    mask: torch.Tensor  # (n_langs,) bool over the run's language ids

    @classmethod
    def build(cls, start: DualEncoder, langs: list[str], run_langs: list[str]) -> "Anchor":
        """`langs` as a mask over the run's language ids (a language init knew and the data lacks
        stays out of it)."""
        return cls(start, langs, torch.tensor([lang in langs for lang in run_langs]))


class Trainer:
    """The objective, optimiser and gradient scaler of a run, and its one training step: the
    loop, the benchmark and every timer call `step`, so all of them time the same work."""

    def __init__(self, cfg: TrainConfig, model: DualEncoder, avoid: torch.Tensor, device: torch.device,
                 teacher_dim: int = 0, world: int = 1, local_rank: int = 0, anchor: Anchor | None = None):
        """`avoid`: (V,) bool, pieces SMLM never masks (`punctuation_pieces(tokenizer)`)."""
        self.cfg, self.model, self.device, self.anchor = cfg, model, device, anchor
        if cfg.lazy_table and world > 1:
            raise UserError("lazy_table runs in one process (its sparse gradients are not all-reduced): set "
                            "lazy_table = false under torchrun")
        self.objective = Objective(model, cfg, avoid, teacher_dim, *(anchor.start, anchor.mask) if anchor else ()
                                   ).to(device)
        table = model.tok_emb.weight
        model.tok_emb.sparse = sparse_lookups(cfg, world)
        dense = [p for p in self.objective.parameters() if p.requires_grad and not (cfg.lazy_table and p is table)]
        self.opt = adam(dense, cfg.lr, cfg.weight_decay)
        self.table_opt = LazyAdam([table], cfg.lr, cfg.weight_decay) if cfg.lazy_table else None
        self.scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype(device, cfg) == torch.float16)
        self.runner = nn.parallel.DistributedDataParallel(
            self.objective, device_ids=[local_rank] if device.type == "cuda" else None) if world > 1 else self.objective

    def step(self, batch: dict[str, torch.Tensor], step: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
        """One optimiser step at the learning rate of `step`; raises NonFiniteLoss before touching
        the weights if the loss is not finite."""
        for opt in self.optimizers():
            for group in opt.param_groups:
                group["lr"] = lr_at(step, self.cfg)
        with autocast(self.device, self.cfg):
            losses = self.runner(batch, gen)
        loss = losses["total"]
        if not torch.isfinite(loss):
            raise NonFiniteLoss(f"loss became {float(loss)} at step {step}")
        for opt in self.optimizers():
            opt.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        for opt in self.optimizers():
            self.scaler.unscale_(opt)
        if self.table_opt is None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        else:  # torch's clipping takes no sparse gradient
            clip_grad_norm(self.model.parameters(), self.cfg.grad_clip)
        for opt in self.optimizers():
            self.scaler.step(opt)
        self.scaler.update()
        return losses

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.opt] + ([self.table_opt] if self.table_opt is not None else [])

    def state(self) -> dict:
        proj = self.objective.teacher_proj
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(), "scaler": self.scaler.state_dict(),
                **({"teacher_proj": proj.state_dict()} if proj is not None else {}),
                **({"anchor": {"start": self.anchor.start.state_dict(), "langs": self.anchor.langs}} if self.anchor else {}),
                **({"table_optimizer": self.table_opt.state_dict()} if self.table_opt is not None else {})}

    def load_state(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        if self.objective.teacher_proj is not None:
            self.objective.teacher_proj.load_state_dict(state["teacher_proj"])
        if "optimizer" not in state:  # a carried checkpoint (edge_xsent/carry.py): Adam's moments start afresh
            return
        self.opt.load_state_dict(state["optimizer"])
        for group in self.opt.param_groups:  # a checkpoint of the for-loop Adam: same moments, now fused
            group.update(fused=True, foreach=None)
        if self.table_opt is not None:
            self.table_opt.load_state_dict(state["table_optimizer"])
        self.scaler.load_state_dict(state["scaler"])


def sparse_lookups(cfg: TrainConfig, world: int) -> bool:
    """Whether the input embedding's gradient is a sparse tensor: the rows a batch looked up, added
    into the table's gradient, instead of a table-sized tensor of zeros for each of the step's three
    lookups (pairs' two sides, monolingual texts): the same sums, ~8% of a CPU step. Where the
    generative head gives the table a dense gradient the sum is dense and Adam sees what it did
    (not under DDP, which all-reduces dense gradients); with `lazy_table` the whole table gradient
    is sparse (LazyAdam); without a head it would be sparse and Adam takes none."""
    return cfg.lazy_table or (world == 1 and cfg.objective != "none")


class NonFiniteLoss(ArithmeticError):
    pass


# ----------------------------------------------------------------------------- the loop

@dataclass
class Processes:
    """Where this process runs: one of `world` (torchrun sets RANK, WORLD_SIZE, LOCAL_RANK)."""
    world: int
    rank: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        _barrier(self.world)


@dataclass
class Prepared:
    """A run's data and tokenizer, ready for the loop."""
    tok: Tokenizer
    langs: list[str]
    data: TokenizedPairs
    valid: TokenizedPairs | None
    mono: TokenizedTexts | None
    seconds: float


def train(cfg: TrainConfig, fresh: bool = False, progress: bool = True) -> dict:
    """Train (or resume) a model; returns the final summary. Rank 0 writes all files."""
    check_run_folder(Path(cfg.out))
    procs = start_processes(cfg)
    lock = None
    try:
        out, ckpt_file = Path(cfg.out), checkpoint_path(Path(cfg.out))
        if not fresh and not ckpt_file.exists() and (out / "summary.json").exists():
            return finished_summary(cfg, out)
        if cfg.init and (fresh or not ckpt_file.exists()):
            refuse_own_result(cfg)
        resume = None if fresh else resume_state(cfg, ckpt_file, procs)
        if resume is None:
            check_pinned_start(cfg)
            if cfg.anchor_weight and not cfg.init:
                raise UserError("anchor_weight keeps sentences near the vectors of the model a run starts from: set "
                                "init (e.g. init = \"default\") or anchor_weight = 0")
        lock = lock_run(out) if procs.is_main else None  # before the first write, after every refusal
        prep = prepare(cfg, out, resume is not None, procs, progress)
        if fresh:  # only now that the data is known good: a typo in --data loses nothing
            forget_previous_run(out, procs)
        trainer = build_trainer(cfg, prep, resume, procs)
        step, best_val = (resume["step"], resume["best_val"]) if resume else (0, float("inf"))
        data, mono, world, rank = prep.data, prep.mono, procs.world, procs.rank
        plan = BatchPlan(np.array([max(len(x), len(y)) for x, y in zip(data.a, data.b)]), cfg.batch_size, cfg.seed, world,
                         groups=data.lang_a * 1000 + data.lang_b if cfg.batch_by_pair else None)
        mono_plan = BatchPlan(np.array([len(x) for x in mono.ids]), cfg.mono_batch_size, cfg.seed + 1, world) \
            if mono else None
        log = RunLog(out, cfg, procs, step, progress)
        trainer.model.train()
        history: list[dict] = []
        try:
            end = min(cfg.max_steps, cfg.pause_at or cfg.max_steps)
            while step < end:
                torch.manual_seed(cfg.seed * 1_000_003 + step * 1009 + rank)  # dropout: a function of the step
                gen = torch.Generator().manual_seed(cfg.seed * 7_919 + step * 104_729 + rank)
                batch = make_batch(data, plan.indices(step, rank), procs.device, mono,
                                   mono_plan.indices(step, rank) if mono_plan else None)
                try:
                    losses = trainer.step(batch, step, gen)
                except NonFiniteLoss as e:
                    kept = f"the last good checkpoint ({ckpt_file}) is intact" if ckpt_file.exists() else \
                        "no checkpoint was written yet"
                    raise TrainingStopped(f"{e}; stopped without saving it, {kept}. Lower --lr or check the data") from None
                step += 1
                log.step(step, losses)
                if step % cfg.eval_every == 0 or step == cfg.max_steps:
                    best_val = evaluate_and_keep(cfg, trainer, prep, procs, log, step, best_val, history)
                if procs.is_main and (step % cfg.checkpoint_every == 0 or step == end):
                    _saving(lambda: save_checkpoint(ckpt_file, {"step": step, "best_val": best_val,
                                                                "config": _comparable(cfg), **trainer.state()}),
                            step, ckpt_file)
                procs.barrier()
        finally:
            log.close()
        if step < cfg.max_steps:  # paused: the checkpoint above is where a rerun goes on
            if procs.is_main:
                print(f"paused at step {step} of {cfg.max_steps} (checkpoint {ckpt_file}); rerun without pause_at "
                      "to go on", file=sys.stderr)
            return {"steps": step, "paused": True, "best_val_total": best_val}
        summary = finish(cfg, out, trainer, procs, log, step, best_val, history, prep.seconds)
        procs.barrier()  # no rank tears the process group down while another still writes or gathers
        return summary
    finally:
        if lock is not None:
            lock.close()  # the lock goes with the descriptor
        if procs.world > 1 and dist.is_initialized():
            dist.destroy_process_group()


LOCK = ".lock"  # held (fcntl) by the run writing the folder


def lock_run(out: Path):
    """One run writes a folder at a time: a second `train` on the same --out (another shell, a
    repeated command) stops with one line instead of interleaving its log and checkpoints."""
    import fcntl

    out.mkdir(parents=True, exist_ok=True)
    f = open(out / LOCK, "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise UserError(f"--out {out}: another training run is writing this folder now; wait for it to end, or "
                        "name another folder") from None
    return f


def finished_summary(cfg: TrainConfig, out: Path) -> dict:
    """A finished run whose checkpoint is gone (deleted to save space, or carried as its model folder:
    edge_xsent/carry.py) is reported, never trained again from its start over its model."""
    summary = read_summary(out)
    ran = trained_config(out / "model")
    if summary["steps"] < cfg.max_steps or ran is None:
        raise UserError(f"{out} holds a run finished at step {summary['steps']} with no checkpoint to go on from "
                        f"(max_steps {cfg.max_steps}): restore one with `edge-xsent carry restore`, or start over "
                        "with --fresh")
    if _comparable(ran) != _comparable(cfg):
        raise UserError(f"{out} holds a finished run with a different config; use --fresh to start over")
    return summary


def read_summary(out: Path) -> dict:
    """A finished run's summary.json; a torn or hand-edited one is an error naming the way out."""
    path = out / "summary.json"
    try:
        summary = json.loads(path.read_text())
        ok = isinstance(summary, dict) and isinstance(summary.get("steps"), int) and not isinstance(summary["steps"], bool)
    except (OSError, ValueError):
        ok = False
    if not ok:
        raise UserError(f"{path} is unreadable or has no whole-number 'steps' (a torn or hand-edited file): delete it "
                        "to resume from the run's checkpoint, or start over with --fresh")
    return summary


def refuse_own_result(cfg: TrainConfig) -> None:
    """A recipe whose run became its own init (`init = "default"` in the recipe that made the
    default) would start again from its result and train it twice; refuse, naming the way back.
    Its own result: trained by the same settings from the same init into a run of the same name."""
    ran = trained_config(start_dir(cfg))
    same_recipe = ran is not None and ran.init == cfg.init and _comparable(ran) == _comparable(cfg)
    if same_recipe and Path(ran.out).name == Path(cfg.out).name:
        raise UserError(f"init {cfg.init!r} is this run's own result (trained by the same config into "
                        f"{Path(ran.out).name}); starting from it would train it twice. Put the run back with "
                        "`edge-xsent carry restore`, or set init to the model it started from")


def trained_config(folder: Path) -> TrainConfig | None:
    """The config a model folder was trained with (its training.json), None where it records none."""
    made = read_training(folder).get("train_config")
    return TrainConfig.from_dict(made, str(folder / FILES["training"])) if made else None


def start_processes(cfg: TrainConfig) -> Processes:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = pick_device(cfg, local_rank)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    warning = spinning_warning(torch.get_num_threads()) if device.type == "cpu" and rank == 0 else None
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    return Processes(world, rank, local_rank, device)


def forget_previous_run(out: Path, procs: Processes) -> None:
    """--fresh: the old run's checkpoint and finished summary go, so that a fresh run killed before
    its first checkpoint is not later resumed, or reported finished, as the old one."""
    if procs.is_main:
        for old in (checkpoint_path(out), out / "summary.json"):
            old.unlink(missing_ok=True)
    procs.barrier()


def resume_state(cfg: TrainConfig, ckpt_file: Path, procs: Processes) -> dict | None:
    procs.barrier()
    resume = load_checkpoint(ckpt_file) if ckpt_file.exists() else None
    if resume is not None and _comparable(TrainConfig.from_dict(resume["config"], str(ckpt_file))) != _comparable(cfg):
        raise UserError(f"{ckpt_file} was written by a run with a different config; "
                        "use the same config to resume, or --fresh to start over")
    return resume


def check_pinned_start(cfg: TrainConfig) -> None:
    """A recipe that pins its start (init_sha256) starts from exactly that model or not at all:
    `init = "default"` names whatever ships now, which changes when a new default ships."""
    if not cfg.init or not cfg.init_sha256:
        return
    manifest = start_dir(cfg) / "manifest.json"
    have = hashlib.sha256(manifest.read_bytes()).hexdigest() if manifest.is_file() else "(no manifest.json)"
    if have != cfg.init_sha256:
        raise UserError(f"init {cfg.init} is not this recipe's pinned start: its manifest.json has SHA-256 {have[:16]}..., "
                        f"the recipe pins {cfg.init_sha256[:16]}...; put the pinned model in a folder (the recipe's "
                        "header says how) and set init to it")


RUN_FILES = {".lock", "checkpoints", "log.jsonl", "summary.json", "tokenizer.model", "model", "model-debiased", "bundle"}


def check_run_folder(out: Path) -> None:
    """--out is a new folder or a run's own (resumed): never a file, a model folder (the shipped
    default's files would be overwritten), nor a folder of other files (the run would mix its own
    in), and never inside a model folder."""
    from .atomic import kept_folder

    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; a run writes a folder: name a new or existing run folder")
    keeper = kept_folder(out.resolve() / "x")
    if keeper is not None and keeper[1] == "model folder":
        raise UserError(f"--out {out} is or lies inside a model folder ({keeper[0]}): a run would overwrite its files; "
                        "name a new folder")
    if out.is_dir():
        other = sorted(set(os.listdir(out)) - RUN_FILES)
        if other and not (out / "log.jsonl").exists() and not (out / "checkpoints").is_dir():
            raise UserError(f"--out {out} holds files that are not a training run's ({', '.join(other[:3])}); name a "
                            "new folder or a run's own to resume it")


def training_bytes(m: EncoderConfig) -> int:
    """Memory a model's training state takes at least: fp32 weights, their gradients and Adam's
    three moments (amsgrad), five copies of every parameter."""
    params = (m.vocab_size * m.d_model + m.vocab_size + m.max_len * m.d_model + m.d_model ** 2
              + m.n_layers * (4 * m.d_model ** 2 + 2 * m.d_model * m.d_ff))
    return 5 * 4 * params


def check_fits_memory(m: EncoderConfig) -> None:
    """A model too large for this machine fails now, named, before the data is read and the
    tokenizer trained, not by the kernel's out-of-memory killer an hour later."""
    need, have = training_bytes(m), os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have:
        raise UserError(f"model config: vocab_size={m.vocab_size}, d_model={m.d_model}, d_ff={m.d_ff}, "
                        f"n_layers={m.n_layers} need at least {need / 2**30:.1f} GiB to train (weights, gradients, "
                        f"Adam's moments); this machine has {have / 2**30:.1f} GiB: make the model smaller")


def prepare(cfg: TrainConfig, out: Path, resuming: bool, procs: Processes, progress: bool) -> Prepared:
    """Read and tokenise the train and valid splits (training the tokenizer if need be), and
    attach the teacher's vectors when distilling."""
    check_fits_memory(cfg.model)
    t0 = time.time()
    rows = load_texts(cfg, "train", cfg.max_train_pairs)
    if not rows:
        raise UserError(f"{cfg.data}: no training pairs found")
    _check_enough(len(rows), cfg, procs.world)
    langs = pair_langs(rows)
    if len(langs) < 2:
        raise UserError(f"{cfg.data}: all pairs are in one language ({langs[0]}); a cross-lingual encoder needs two")
    if procs.is_main:
        out.mkdir(parents=True, exist_ok=True)
    tok = setup_tokenizer(cfg, rows, out, resuming, procs.is_main, procs.world)
    data = tokenize_pairs(rows, tok, cfg.model.max_len, langs)
    valid_rows = load_texts(cfg, "valid", cfg.valid_pairs) if resolve(cfg.data).is_dir() else []
    valid = tokenize_pairs(valid_rows, tok, cfg.model.max_len, langs) if len(valid_rows) >= 2 else None
    _check_enough(len(data), cfg, procs.world)
    mono = attach_teacher(cfg, [(rows, data), (valid_rows, valid)], tok, procs.is_main, procs.world, progress) \
        if cfg.teacher else None
    return Prepared(tok, langs, data, valid, mono, time.time() - t0)


def build_trainer(cfg: TrainConfig, prep: Prepared, resume: dict | None, procs: Processes) -> Trainer:
    mcfg = dataclasses.replace(cfg.model, n_langs=len(prep.langs) if cfg.multilingual_head else 0)
    torch.manual_seed(cfg.seed)
    model = DualEncoder(mcfg)
    if cfg.init and resume is None:
        load_init_weights(model, start_dir(cfg), prep.tok)
    anchor = start_anchor(cfg, model, prep.langs, resume) if cfg.anchor_weight else None
    teacher_dim = prep.data.t_vecs.shape[1] if prep.data.t_vecs is not None else 0
    trainer = Trainer(cfg, model.to(procs.device), punctuation_pieces(prep.tok), procs.device, teacher_dim, procs.world,
                      procs.local_rank, anchor)
    if resume is not None:
        trainer.load_state(resume)
    if procs.is_main:
        print(f"model: {mcfg.n_layers} layers, d={mcfg.d_model}, vocab {prep.tok.vocab_size}: "
              f"{model.num_parameters() / 1e6:.1f}M parameters ({model.num_parameters(False) / 1e6:.1f}M without "
              f"the embedding table); {len(prep.data):,d} train pairs, langs {','.join(prep.langs)}; device "
              f"{procs.device}" + (f", {procs.world} processes" if procs.world > 1 else "")
              + (f"; resuming at step {resume['step']}" if resume else "")
              + (" from a carried checkpoint (Adam's moments start afresh)" if resume and "optimizer" not in resume
                 else ""), file=sys.stderr)
    return trainer


def start_anchor(cfg: TrainConfig, model: DualEncoder, run_langs: list[str], resume: dict | None) -> Anchor:
    """The anchor of anchor_weight: on a fresh run, a frozen copy of the weights just loaded from
    init and the languages init was trained on; on a resumed one, both from the checkpoint."""
    import copy

    if resume is not None:
        if "anchor" not in resume:
            raise UserError("this checkpoint was written without anchor_weight; resume with the same config, or --fresh")
        start = DualEncoder(model.cfg)
        start.load_state_dict(resume["anchor"]["start"])
        return Anchor.build(start, resume["anchor"]["langs"], run_langs)
    langs = json.loads((start_dir(cfg) / FILES["config"]).read_text()).get("langs") or []
    if not set(langs) & set(run_langs):
        raise UserError(f"anchor_weight: init {cfg.init} records no language of this run's data ({', '.join(run_langs)}) "
                        "to keep; set anchor_weight = 0")
    return Anchor.build(copy.deepcopy(model), langs, run_langs)


class RunLog:
    """The progress bar and OUT/log.jsonl (rank 0 only), and the throughput since this start."""

    def __init__(self, out: Path, cfg: TrainConfig, procs: Processes, step: int, progress: bool):
        self.cfg, self.procs = cfg, procs
        self.file = open_log(out / "log.jsonl") if procs.is_main else None
        self.bar = tqdm(total=cfg.max_steps, initial=step, disable=not (progress and procs.is_main), unit="step",
                        dynamic_ncols=True, mininterval=1)
        self.t_start, self.steps_done, self.last = time.time(), 0, {}

    def rate(self) -> float:
        return self.steps_done * self.cfg.batch_size * self.procs.world / max(time.time() - self.t_start, 1e-9)

    def step(self, step: int, losses: dict[str, torch.Tensor]) -> None:
        self.steps_done += 1
        self.bar.update(1)
        if self.file and (step % self.cfg.log_every == 0 or step == self.cfg.max_steps):
            self.last = {k: round(v.item(), 4) for k, v in losses.items()}
            self.bar.set_postfix(loss=f"{self.last['total']:.3f}", pairs_s=f"{self.rate():.0f}")
            self.write({"step": step, "lr": lr_at(step - 1, self.cfg), **self.last,
                        "pairs_per_s": round(self.rate(), 1), "elapsed_s": round(time.time() - self.t_start, 1)})

    def write(self, record: dict) -> None:
        if self.file:
            self.file.write(json.dumps(record) + "\n")
            self.file.flush()

    def close(self) -> None:
        self.bar.close()
        if self.file:
            self.file.close()


def evaluate_and_keep(cfg: TrainConfig, trainer: Trainer, prep: Prepared, procs: Processes, log: RunLog, step: int,
                      best_val: float, history: list[dict]) -> float:
    """Validate; the model folder keeps the best validation loss, or the newest weights with keep_model = "last"
    (a split of the training sources may stall while what the model is for still improves), or without a valid split."""
    info = {"train_config": portable(cfg.to_dict()), "langs": prep.langs, "train_pairs": len(prep.data),
            "world_size": procs.world, "device": _device_name(procs.device), "step": step}
    folder = Path(cfg.out) / "model"
    if prep.valid is None:
        if procs.is_main:
            _saving(lambda: save_model(folder, trainer.model, prep.tok, prep.langs, info), step, folder)
        return best_val
    val = validate(trainer.objective, prep.valid, cfg, procs.device)
    history.append({"step": step, **val})
    log.write({"step": step, **val})
    if procs.is_main:
        log.bar.write(f"step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in val.items()))
    improved = val["val_total"] < best_val
    best_val = min(best_val, val["val_total"])
    if improved or cfg.keep_model == "last":
        if procs.is_main:
            _saving(lambda: save_model(folder, trainer.model, prep.tok, prep.langs, {**info, **val}), step, folder)
    return best_val


def _saving(save, step: int, where: Path) -> None:
    """Run a save; a failed one (disk full) stops training with the previous file intact."""
    try:
        save()
    except OSError as e:
        raise TrainingStopped(f"saving {where} failed at step {step} ({e}); the previous one, if any, is intact. "
                              "Free disk space and run the same command to resume") from e


def finish(cfg: TrainConfig, out: Path, trainer: Trainer, procs: Processes, log: RunLog, step: int, best_val: float,
           history: list[dict], prep_s: float) -> dict:
    if log.steps_done == 0 and (out / "summary.json").exists():  # already finished: keep the record of the real run
        return read_summary(out)
    summary = {"steps": step, "best_val_total": best_val, "last": log.last, "history": history,
               "train_seconds_this_run": round(time.time() - log.t_start, 1), "prep_seconds": round(prep_s, 1),
               "pairs_per_s": round(log.rate(), 1)}
    if procs.world > 1:  # proof that DDP kept the replicas identical
        digests = [None] * procs.world
        dist.all_gather_object(digests, param_digest(trainer.model))
        summary["rank_param_sha256"] = digests
    if procs.device.type == "cuda":
        summary["cuda_max_allocated_mb"] = round(torch.cuda.max_memory_allocated(procs.device) / 2**20, 1)
    if procs.is_main:
        with atomic_write(out / "summary.json") as f:  # a kill mid-write leaves the old one, never half of one
            f.write(json.dumps(summary, indent=2) + "\n")
    return summary


def open_log(path: Path):
    """log.jsonl for appending; a torn last line (a run killed while writing it) is cut off first, so the
    next record starts a line of its own."""
    if path.exists():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            print(f"warning: {path}: its last line was torn (a run stopped while writing it); dropped", file=sys.stderr)
            with open(path, "r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)
    return open(path, "a", encoding="utf-8")


def read_log(path: Path) -> list[dict]:
    """The records of a run's log.jsonl; a torn line (a run killed mid-write) is skipped with a warning."""
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if isinstance(record, dict):
            records.append(record)
        elif line.strip():
            print(f"warning: {path} line {n} is torn (a run stopped while writing it); skipped", file=sys.stderr)
    return records


def training_minutes(out: str | Path) -> tuple[float, int]:
    """Wall-clock minutes of training in a run folder, summed over its segments (a resumed run
    restarts `elapsed_s` in log.jsonl), and the number of segments."""
    total, segments, last = 0.0, 0, None
    for e in (record.get("elapsed_s") for record in read_log(Path(out) / "log.jsonl")):
        if e is None:
            continue
        if last is None or e < last:  # a new segment began
            segments += 1
            total += last or 0.0
        last = e
    return (total + (last or 0.0)) / 60, segments


def param_digest(model: nn.Module) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()


def _check_enough(n: int, cfg: TrainConfig, world: int) -> None:
    if n < cfg.batch_size * world:
        raise UserError(f"only {n} training pairs for a batch of {cfg.batch_size} x {world} process(es); "
                        "lower --batch-size or add data")


def _comparable(cfg: TrainConfig) -> dict:
    """The parts of the config a resumed run must share. Not the output path, thread count,
    logging cadence or which weights model/ keeps; not max_steps either, so a run can be extended or cut short on resume
    (the learning-rate schedule then follows the new length from that step on); not init, which
    only chose the first step's weights. Stored configs pass through TrainConfig.from_dict first,
    so fields added since take their defaults."""
    d = cfg.to_dict()
    for k in ("out", "threads", "eval_every", "checkpoint_every", "log_every", "device", "max_steps", "pause_at", "init",
              "init_sha256", "keep_model"):
        d.pop(k, None)
    return d


def _barrier(world: int) -> None:
    if world > 1 and dist.is_initialized():
        dist.barrier()


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    n = torch.get_num_threads()
    return f"cpu ({n} thread{'s' if n > 1 else ''})"
