"""A training run's folder: its checkpoint, its lock (one writer at a time), its log, its finished
summary, and the checks made before a run writes there (an output of its own kind, a model that
fits the machine's memory).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

from edge_xsent.atomic import atomic_write
from edge_xsent.paths import INTO, RUN, owning
from edge_xsent.encode.bundle import read_training
from edge_xsent.config import EncoderConfig, TrainConfig
from edge_xsent.errors import UserError
from edge_xsent.inputs import CAPS, open_regular, parse_json, read_bytes, read_json
from edge_xsent.layout import FILES, RUN_FORMAT, RUN_MARKER


def checkpoint_path(out: Path) -> Path:
    return out / "checkpoints" / "last.pt"


def save_checkpoint(path: Path, state: dict) -> None:
    """Atomic: if the write fails (disk full, kill), the previous checkpoint stays usable."""
    import io

    import torch  # here, not at the top: the CLI checks --out with this module before torch loads

    buf = io.BytesIO()  # serialised first: a full disk then fails as the OSError it is, not torch's RuntimeError
    torch.save(state, buf)
    with atomic_write(path, "wb") as f:
        f.write(buf.getbuffer())


def load_checkpoint(path: Path) -> dict:
    import torch

    with os.fdopen(open_regular(path, "checkpoint"), "rb") as f:  # a FIFO or device is refused, never waited on
        try:
            return torch.load(f, map_location="cpu", weights_only=True)  # never unpickle code
        except Exception as e:  # a torn or foreign file: say which and what to do
            raise UserError(f"{path}: unreadable checkpoint ({e}); delete it to start over") from e


LOCK = ".lock"  # held (fcntl) by the run writing the folder


class RunLock:
    """The run's lock (fcntl on OUT/.lock) and, while it is held, this process's ownership of the folder:
    the primitives let only the lock's holder write a run's own entries (log, checkpoints, model/)."""

    def __init__(self, f, out: Path):
        self.f, self.out = f, out
        self._owned = contextlib.ExitStack()
        self._owned.enter_context(owning(out))

    def close(self) -> None:
        if not self.f.closed:
            self._owned.close()
            self.f.close()


def lock_run(out: Path) -> RunLock:
    """One run writes a folder at a time: a second `train` on the same --out (another shell, a
    repeated command) stops with one line instead of interleaving its log and checkpoints."""
    import fcntl

    RUN.check(out)
    out.mkdir(parents=True, exist_ok=True)
    f = open(out / LOCK, "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise UserError(f"--out {out}: another training run is writing this folder now; wait for it to end, or "
                        "name another folder") from None
    lock = RunLock(f, out)
    if not (out / RUN_MARKER).exists():  # the first file a run writes: it alone makes the folder a run
        with atomic_write(out / RUN_MARKER) as m:
            m.write(json.dumps({"format": RUN_FORMAT, "note": "an edge-xsent training run's folder"}) + "\n")
    return lock


def finished_summary(cfg: TrainConfig, out: Path) -> dict:
    """A finished run whose checkpoint is gone (deleted to save space, or carried as its model folder:
    train/carry.py) is reported, never trained again from its start over its model."""
    summary = read_summary(out)
    ran = trained_config(out / "model")
    if summary["steps"] < cfg.max_steps or ran is None:
        raise UserError(f"{out} holds a run finished at step {summary['steps']} with no checkpoint to go on from "
                        f"(max_steps {cfg.max_steps}): restore one with `python train/carry.py restore`, or start over "
                        "with --fresh")
    if _comparable(ran) != _comparable(cfg):
        raise UserError(f"{out} holds a finished run with a different config; use --fresh to start over")
    return summary


def read_summary(out: Path) -> dict:
    """A finished run's summary.json; a torn or hand-edited one is an error naming the way out."""
    path = out / "summary.json"
    try:
        summary = read_json(path, what="summary")
        ok = isinstance(summary, dict) and isinstance(summary.get("steps"), int) and not isinstance(summary["steps"], bool)
    except (OSError, ValueError):
        ok = False
    if not ok:
        raise UserError(f"{path} is unreadable or has no whole-number 'steps' (a torn or hand-edited file): delete it "
                        "to resume from the run's checkpoint, or start over with --fresh")
    return summary


def check_run(cfg: TrainConfig) -> None:
    """Everything a run writes or spins up, checked before it reads any data (issue 74): its folder,
    its threads (at most this machine's cores), its teacher (a peer's name or a model folder here) and
    its teacher cache (never a model folder or a run's)."""
    from edge_xsent.eval.peers import check_teacher
    from edge_xsent.threads import check_threads

    RUN.check(Path(cfg.out))
    check_threads(cfg.threads)
    if cfg.teacher:
        check_teacher(cfg.teacher)
        INTO.check(cfg.teacher_cache, what="teacher_cache")


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


def open_log(path: Path):
    """log.jsonl for appending; a torn last line (a run killed while writing it) is cut off first, so the
    next record starts a line of its own."""
    if path.exists() or path.is_symlink():
        data = read_bytes(path, CAPS["log"], "run log")
        if data and not data.endswith(b"\n"):
            print(f"warning: {path}: its last line was torn (a run stopped while writing it); dropped", file=sys.stderr)
            with open(path, "r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)
    return open(path, "a", encoding="utf-8")


def read_log(path: Path) -> list[dict]:
    """The records of a run's log.jsonl; a torn line (a run killed mid-write) is skipped with a warning."""
    records = []
    text = read_bytes(path, CAPS["log"], "run log").decode("utf-8", errors="replace")
    for n, line in enumerate(text.splitlines(), 1):
        try:
            record = parse_json(line, path)
        except UserError:  # torn, or nested past any real record's depth
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


def trained_config(folder: Path) -> TrainConfig | None:
    """The config a model folder was trained with (its training.json), None where it records none."""
    made = read_training(folder).get("train_config")
    return TrainConfig.from_dict(made, str(folder / FILES["training"])) if made else None


def _comparable(cfg: TrainConfig) -> dict:
    """The parts of the config a resumed run must share. Not the output path, thread count,
    logging cadence or which weights model/ (and keep_steps) keeps; not max_steps either, so a run can be extended or cut short on resume
    (the learning-rate schedule then follows the new length from that step on); not init, which
    only chose the first step's weights. Stored configs pass through TrainConfig.from_dict first,
    so fields added since take their defaults."""
    d = cfg.to_dict()
    for k in ("out", "threads", "eval_every", "checkpoint_every", "log_every", "device", "max_steps", "max_minutes", "pause_at", "init",
              "init_sha256", "keep_model", "keep_steps"):
        d.pop(k, None)
    return d
