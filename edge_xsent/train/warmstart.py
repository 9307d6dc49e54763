"""Where a run starts (its `init`), apart from the loop that trains it: the shipped default, a model
folder, a model from this checkout's git history (`git:REF[:PATH]`, resolved as data), or e5-small
pruned to a student (prune.py); and how a trained model's weights enter a model of the same or a
larger shape (more layers stacked, a wider feed-forward layer, a new vocabulary transferred).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path

import torch

from edge_xsent.atomic import atomic_write
from edge_xsent.config import TOKEN_INIT, UNK_ID, TrainConfig
from edge_xsent.train.distill import _barrier
from edge_xsent.errors import UserError
from edge_xsent.encode.model import DualEncoder
from edge_xsent.train.prune import E5_INIT
from edge_xsent.train.runfolder import _comparable, trained_config
from edge_xsent.layout import FILES
from edge_xsent.encode.tokenizer import Tokenizer


def start_dir(cfg: TrainConfig) -> Path:
    """The model folder a run starts from: `init_dir`'s, or for `init = "e5-small"` the pruned start
    (edge_xsent/train/prune.py), built once."""
    from edge_xsent.encode.bundle import read_config
    from edge_xsent.train.prune import start_folder

    if cfg.init == E5_INIT:
        return start_folder(cfg)
    folder = init_dir(cfg.init)
    if (folder / "config.json").is_file() and read_config(folder)["model"].get("table_rows"):
        raise UserError(f"init {cfg.init}: {folder} is a student of multilingual-e5-small with a cut token table; "
                        "the trainer cannot continue one yet: start from `fast` or another model folder")
    return folder


def ancestors(cfg: TrainConfig):
    """(folder, the config that trained it) for each model folder along cfg's init chain, nearest first.
    It stops at e5-small's pruned start, at a folder with no training record or none to be found, at a
    folder seen before (`default` names whatever ships now, so a chain through it can loop) and after
    16 folders: lineage is read for records and credits, never to fail a run."""
    seen: set[Path] = set()
    init = cfg.init
    while init and init != E5_INIT and len(seen) < 16:
        try:
            folder = init_dir(init).resolve()
        except UserError:  # a git: start this checkout lacks
            return
        made = trained_config(folder) if folder not in seen and folder.is_dir() else None
        if made is None:
            return
        seen.add(folder)
        yield folder, made
        init = made.init


def starts_in_teacher_space(cfg: TrainConfig) -> bool:
    """Whether the run's first weights already put sentences in e5-small's space: a student pruned
    from it, or a model folder distilled from e5 after such a start (its training.json, followed back).
    The teacher projection then starts as the identity; a random one would first undo what the
    start knows (a distilled 2-layer student began at the loss of random vectors)."""
    if cfg.init == E5_INIT:
        return True
    for _, made in ancestors(cfg):
        if not (made.teacher or "").startswith("e5"):
            return False
        if made.init == E5_INIT:
            return True
    return False


def check_token_start(cfg: TrainConfig) -> None:
    """The token-level target has e5 read the student's own pieces: only a student whose blocks and
    pieces descend from e5-small's (its init chain reaches the pruned start, no tokenizer replaced on
    the way; `tokenizer = "e5-small"` keeps e5's own) has them."""
    if not cfg.token_weight:
        return
    chain = [cfg, *(made for _, made in ancestors(cfg))]
    if chain[-1].init != E5_INIT:
        raise UserError(f"{TOKEN_INIT}: {cfg.init} does not descend from e5-small's pruned start (no training.json "
                        "along its init chain has init = \"e5-small\")")
    replaced = next((c.tokenizer for c in chain if c.tokenizer and c.tokenizer != E5_INIT), None)  # e5's own: kept
    if replaced:
        raise UserError(f"{TOKEN_INIT}: tokenizer = {replaced!r} along its init chain replaced e5's pieces; leave "
                        "tokenizer unset")


def start_record(cfg: TrainConfig) -> dict:
    """What the run's weights descend from, for its card and credits: the pruned e5 start's record
    (prune.py: pruned_from, layers, pieces), found along the init chain; {} for any other start."""
    from edge_xsent.encode.bundle import read_training
    if cfg.init == E5_INIT:
        made = read_training(start_dir(cfg))
        return {k: made[k] for k in ("pruned_from", "layers", "pieces", "ffn") if k in made}
    for folder, made in ancestors(cfg):
        recorded = read_training(folder).get("start")
        if recorded is not None:
            return recorded
        if made.init == E5_INIT:
            return start_record(made)
    return {}


def init_dir(init: str) -> Path:
    """`default` and `fast` name models shipped in the package; `git:COMMIT` the default shipped at that commit;
    a run folder means its model/."""
    from edge_xsent.encode.bundle import resolve_model_dir
    from edge_xsent.encode.encoder import named_model

    if init.startswith(GIT_INIT):
        return model_from_git(init)
    return named_model(init) or resolve_model_dir(Path(init).expanduser())


GIT_INIT = "git:"  # init = "git:REF" or "git:REF:PATH": a model folder from this checkout's history


GIT_MODEL_PATH = "edge_xsent/resources/default-model"


INIT_CACHE = Path("~/.cache/edge-xsent/init")


def model_from_git(spec: str, repo: Path | None = None, cache: Path = INIT_CACHE) -> Path:
    """The model folder `spec` names, taken once from git into the cache. `default` moves on when a
    model ships; a recipe that started from an earlier default names it this way and stays runnable.
    A recipe is shared like data, so REF and PATH are data too: REF is resolved to a commit id and
    PATH to a tree id (every git call ends its options with --end-of-options, no shell), and the cache
    is keyed by that tree id, never by the name given, so a moved branch never reuses an old start."""
    import fcntl

    _, ref, *rest = spec.split(":", 2)
    path = _git_model_path(spec, rest[0] if rest else GIT_MODEL_PATH)
    repo = repo or Path(__file__).resolve().parents[2]
    commit = _git_object(repo, spec, f"{ref}^{{commit}}", "commit")
    tree = _git_object(repo, spec, f"{commit}:{path}", f"folder {path} at commit {commit[:12]}")
    if _git(repo, "cat-file", "-t", tree).stdout.strip() != b"tree":
        raise UserError(f"init {spec}: {path} at commit {commit[:12]} is a file, not a model folder")
    root = Path(cache).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:  # two runs starting at once: one extracts, the other waits, then finds it (the lock leaves no file)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return _extract_tree(repo, spec, commit, path, tree, root / tree)
    finally:
        os.close(fd)


def _extract_tree(repo: Path, spec: str, commit: str, path: str, tree: str, dest: Path) -> Path:
    """`tree` as a model folder at `dest`, whole or not at all; the caller holds the cache's lock."""
    import io
    import tarfile
    import tempfile

    root = dest.parent
    if (dest / "manifest.json").is_file():
        return dest
    if dest.exists() or dest.is_symlink():
        raise UserError(f"init {spec}: {dest} exists but holds no model folder; remove it and rerun")
    archive = _git(repo, "archive", "--format=tar", "--end-of-options", tree)
    if archive.returncode != 0:
        raise UserError(f"init {spec}: git archive failed ({_last_line(archive.stderr)})")
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


def start_weights(cfg: TrainConfig, model: DualEncoder, tok: Tokenizer, resume: dict | None) -> None:
    """A new run's model takes its init's weights; a resumed one whose checkpoint left its frozen table behind (a
    carried run: train/carry.py) takes that table from its init again, into `resume`."""
    table_from_init = resume is not None and "tok_emb.weight" not in resume["model"]
    if table_from_init and not (cfg.init and cfg.freeze_table):
        raise UserError("the checkpoint holds no token table and the recipe has no frozen table to read from its init: "
                        "restore the carry into the run of the recipe that saved it")
    if cfg.init and (resume is None or table_from_init):
        model.init_missing(load_init_weights(model, start_dir(cfg), tok))
    if table_from_init:
        resume["model"]["tok_emb.weight"] = model.tok_emb.weight.detach().clone()


def load_init_weights(model: DualEncoder, folder: Path, tok: Tokenizer | None = None) -> list[str]:
    """Copy a trained model's weights into `model` (same architecture; the generative head too
    when its shape matches). A longer max_len is allowed: the new positions start as copies of
    the last learned one. More layers are allowed, a multiple of the trained ones: the trained
    stack is repeated on top of itself (Gong et al. 2019, "stacking"), so depth can be measured
    warm instead of from scratch. A debiased model's language projection is not carried over:
    the subspace is re-estimated after training (`edge-xsent debias`). A wider feed-forward layer
    (d_ff) is allowed: the new hidden units start with zero output weights (`widen_ffn`), so the
    wider model computes exactly what the trained one did and width can be measured warm too.
    Returns the names it did not fill, for `model.init_missing` when `model` was built `for_weights`."""
    from edge_xsent.encode.bundle import load_model

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
    missing = model.load_state_dict({k: v for k, v in state.items() if k not in skipped}, strict=False).missing_keys
    if ours.n_layers != theirs.n_layers:
        print(f"--init: its {theirs.n_layers} layers stacked into {ours.n_layers}", file=sys.stderr)
    if new_vocab:
        print(f"--init: vocabulary of {theirs.vocab_size} pieces transferred to {ours.vocab_size}", file=sys.stderr)
    if ours.d_ff != theirs.d_ff:
        print(f"--init: feed-forward width {theirs.d_ff} grown to {ours.d_ff} (new units output zero)", file=sys.stderr)
    if skipped:
        print(f"--init: not carried over (shape differs): {', '.join(skipped)}", file=sys.stderr)
    return missing


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


def refuse_own_result(cfg: TrainConfig) -> None:
    """A recipe whose run became its own init (`init = "default"` in the recipe that made the
    default) would start again from its result and train it twice; refuse, naming the way back.
    Its own result: trained by the same settings from the same init into a run of the same name."""
    ran = trained_config(start_dir(cfg))
    same_recipe = ran is not None and ran.init == cfg.init and _comparable(ran) == _comparable(cfg)
    if same_recipe and Path(ran.out).name == Path(cfg.out).name:
        raise UserError(f"init {cfg.init!r} is this run's own result (trained by the same config into "
                        f"{Path(ran.out).name}); starting from it would train it twice. Put the run back with "
                        "`python train/carry.py restore`, or set init to the model it started from")


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


def setup_tokenizer(cfg: TrainConfig, rows, out: Path, resuming: bool, is_main: bool, world: int) -> Tokenizer:
    """A given tokenizer, else the run's own on resume, else the --init model's, or one trained on
    the train split (`tokenizer = "train"` asks for that even with --init: a new vocabulary, the
    init's weights carried over by `transfer_vocabulary`); copied into the run folder so that it
    stays self-contained. A resumed run never reads its init: that folder may be gone or hold
    another model by then (init only chose the first step's weights)."""
    tok_path = out / FILES["tokenizer"]
    fresh = cfg.tokenizer == TRAIN_TOKENIZER
    own = resuming and tok_path.exists()
    given = Path(cfg.tokenizer).expanduser() if cfg.tokenizer and not fresh and cfg.tokenizer != E5_INIT else \
        start_dir(cfg) / FILES["tokenizer"] if cfg.init and not fresh and not own else None
    if given is not None:
        tok = Tokenizer.load(given)
        if is_main and not tok_path.exists():
            tok.save(tok_path)  # with its text rules, if it has any (e5's, tokenizer = "e5-small")
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
