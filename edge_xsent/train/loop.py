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
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from tqdm import tqdm

from edge_xsent.atomic import atomic_write
from edge_xsent.train.batches import (TokenizedPairs, TokenizedTexts, items_per_step, load_texts, make_batch, prep_workers,
                                     step_batches, tokenize_pairs, train_rows)
from edge_xsent.encode.bundle import read_training, save_model
from edge_xsent.data.corpus import pair_langs, resolve
from edge_xsent.config import TrainConfig, portable
from edge_xsent.errors import UserError
from edge_xsent.inputs import read_json
from edge_xsent.layout import FILES
from edge_xsent.encode.model import DualEncoder
from edge_xsent.train.objectives import Objective, punctuation_pieces
from edge_xsent.train.schedule import Deadline, lr_at
from edge_xsent.train.tiered import read_tiered
from edge_xsent.encode.tokenizer import Tokenizer
from edge_xsent.train.optim import LazyAdam, adam, adamw, clip_grad_norm
from edge_xsent.threads import set_torch_threads, spinning_warning
from edge_xsent.train.runfolder import (_comparable, check_fits_memory, check_run, checkpoint_path, finished_summary, load_checkpoint,
                        lock_run, open_log, read_summary, save_checkpoint)
from edge_xsent.train.distill import TokenTeacher, _barrier, attach_teacher
from edge_xsent.train.warmstart import (check_pinned_start, check_token_start, refuse_own_result, setup_tokenizer, start_weights,
                        start_dir, start_record, starts_in_teacher_space)


class TrainingStopped(UserError):
    """Training stopped cleanly (NaN loss, failed save); the last good checkpoint is intact."""


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
                 teacher_dim: int = 0, world: int = 1, local_rank: int = 0, anchor: Anchor | None = None,
                 token_teacher: nn.Module | None = None, teacher_space: bool = False):
        """`avoid`: (V,) bool, pieces SMLM never masks (`punctuation_pieces(tokenizer)`); `token_teacher`:
        distill.TokenTeacher, when the recipe sets token_weight."""
        self.cfg, self.model, self.device, self.anchor = cfg, model, device, anchor
        if cfg.lazy_table and world > 1:
            raise UserError("lazy_table runs in one process (its sparse gradients are not all-reduced): set "
                            "lazy_table = false under torchrun")
        self.objective = Objective(model, cfg, avoid, teacher_dim, *(anchor.start, anchor.mask) if anchor else (None, None),
                                   token_teacher=token_teacher, teacher_space=teacher_space).to(device)
        table = model.tok_emb.weight
        model.tok_emb.sparse = sparse_lookups(cfg, world)
        if cfg.freeze_table:
            table.requires_grad_(False)
        if cfg.table_exact_rows:  # the rows as the shipped graph decodes them (every lookup: step, validation, bench)
            read_tiered(model, cfg.table_exact_rows)
        dense = [p for p in self.objective.parameters() if p.requires_grad and not (cfg.lazy_table and p is table)]
        self.opt = (adamw if cfg.optimizer == "adamw" else adam)(dense, cfg.lr, cfg.weight_decay)
        self.table_opt = LazyAdam([table], cfg.lr, cfg.weight_decay) if cfg.lazy_table else None
        self.scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype(device, cfg) == torch.float16)
        self.runner = data_parallel(self.objective, cfg, device, local_rank) if world > 1 else self.objective

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
        clipped = [*self.model.parameters(), *([self.objective.type_row] if self.objective.type_row is not None else [])]
        if self.table_opt is None:
            nn.utils.clip_grad_norm_(clipped, self.cfg.grad_clip)
        else:  # torch's clipping takes no sparse gradient
            clip_grad_norm(clipped, self.cfg.grad_clip)
        for opt in self.optimizers():
            self.scaler.step(opt)
        self.scaler.update()
        return losses

    def saved_model(self) -> DualEncoder:
        """The model as a folder keeps it: with type_row, a copy whose positions hold the row (the training model
        adds it in a hook of its own, which a copy must not carry)."""
        row = self.objective.type_row
        if row is None:
            return self.model
        state = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        state["pos_emb.weight"] = state["pos_emb.weight"] + row.detach().cpu()
        model = DualEncoder.for_weights(self.model.cfg)
        model.load_state_dict(state)
        return model

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.opt] + ([self.table_opt] if self.table_opt is not None else [])

    def state(self) -> dict:
        proj = self.objective.teacher_proj
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(), "scaler": self.scaler.state_dict(),
                **({"teacher_proj": proj.state_dict()} if proj is not None else {}),
                **({"type_row": self.objective.type_row.detach().cpu()} if self.objective.type_row is not None else {}),
                **({"anchor": {"start": self.anchor.start.state_dict(), "langs": self.anchor.langs}} if self.anchor else {}),
                **({"table_optimizer": self.table_opt.state_dict()} if self.table_opt is not None else {})}

    def load_state(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        if self.objective.teacher_proj is not None:
            self.objective.teacher_proj.load_state_dict(state["teacher_proj"])
        if self.objective.type_row is not None:
            with torch.no_grad():
                self.objective.type_row.copy_(state["type_row"])
        if "optimizer" not in state:  # a carried checkpoint (train/carry.py): Adam's moments start afresh
            return
        self.opt.load_state_dict(state["optimizer"])
        for group in self.opt.param_groups:  # a checkpoint of the for-loop Adam: same moments, now fused
            group.update(fused=True, foreach=None)
        if self.table_opt is not None:
            self.table_opt.load_state_dict(state["table_optimizer"])
        self.scaler.load_state_dict(state["scaler"])


def data_parallel(objective: Objective, cfg: TrainConfig, device: torch.device, local_rank: int) -> nn.Module:
    """The objective under DDP. Without a generative task (objective = "none": a teacher's recipe) the head
    takes no part in the loss, and DDP, which waits for every parameter's gradient, must be told so."""
    return nn.parallel.DistributedDataParallel(objective, device_ids=[local_rank] if device.type == "cuda" else None,
                                               find_unused_parameters=cfg.objective == "none")


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
    start: dict  # what the weights descend from (warmstart.start_record), kept in training.json


def train(cfg: TrainConfig, fresh: bool = False, progress: bool = True) -> dict:
    """Train (or resume) a model; returns the final summary. Rank 0 writes all files."""
    started = time.time()  # max_minutes counts from here, set-up included
    check_run(cfg)
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
            check_token_start(cfg)
            if cfg.anchor_weight and not cfg.init:
                raise UserError("anchor_weight keeps sentences near the vectors of the model a run starts from: set "
                                "init (e.g. init = \"default\") or anchor_weight = 0")
        lock = lock_run(out) if procs.is_main else None  # before the first write, after every refusal
        prep = prepare(cfg, out, resume is not None, procs, progress)
        if fresh:  # only now that the data is known good: a typo in --data loses nothing
            forget_previous_run(out, procs)
        trainer = build_trainer(cfg, prep, resume, procs)
        step, best_val = (resume["step"], resume["best_val"]) if resume else (0, float("inf"))
        fitted = resume.get("max_steps") if resume else None  # the checkpoint's length: a deadline's, fitted once
        if cfg.max_minutes and fitted:
            cfg.max_steps = fitted
        deadline = Deadline(cfg, started, fitted=fitted is not None)
        batch_at = step_batches(cfg, prep.data, prep.mono, procs.world, procs.rank, procs.device)
        log = RunLog(out, cfg, procs, step, progress)
        trainer.model.train()
        history: list[dict] = []
        try:
            end = min(cfg.max_steps, cfg.pause_at or cfg.max_steps)
            while step < end:
                torch.manual_seed(cfg.seed * 1_000_003 + step * 1009 + procs.rank)  # dropout: a function of the step
                gen = torch.Generator().manual_seed(cfg.seed * 7_919 + step * 104_729 + procs.rank)
                batch = batch_at(step)
                try:
                    losses = trainer.step(batch, step, gen)
                except NonFiniteLoss as e:
                    kept = f"the last good checkpoint ({ckpt_file}) is intact" if ckpt_file.exists() else \
                        "no checkpoint was written yet"
                    raise TrainingStopped(f"{e}; stopped without saving it, {kept}. Lower --lr or check the data") from None
                step += 1
                log.step(step, losses)
                end = step if deadline.after_step(step) else min(cfg.max_steps, cfg.pause_at or cfg.max_steps)
                if step % cfg.eval_every == 0 or step == cfg.max_steps:
                    best_val = evaluate_and_keep(cfg, trainer, prep, procs, log, step, best_val, history)
                if procs.is_main and step in cfg.keep_steps:
                    keep_step(cfg, trainer, prep, procs, step, history)
                if procs.is_main and (step % cfg.checkpoint_every == 0 or step == end):
                    _saving(lambda: save_checkpoint(ckpt_file, {"step": step, "best_val": best_val, "max_steps": cfg.max_steps,
                                                                "config": _comparable(cfg), **trainer.state()}),
                            step, ckpt_file)
                procs.barrier()
        finally:
            log.close()
        if step < cfg.max_steps:  # paused: the checkpoint above is where a rerun goes on
            if procs.is_main:
                why = "max_minutes ran out" if cfg.max_minutes and step != cfg.pause_at else "pause_at"
                print(f"paused at step {step} of {cfg.max_steps} ({why}; checkpoint {ckpt_file}); rerun (without "
                      "pause_at) to go on", file=sys.stderr)
            return {"steps": step, "paused": True, "best_val_total": best_val}
        summary = finish(cfg, out, trainer, procs, log, step, best_val, history, prep.seconds)
        procs.barrier()  # no rank tears the process group down while another still writes or gathers
        return summary
    finally:
        if lock is not None:
            lock.close()  # the lock goes with the descriptor
        if procs.world > 1 and dist.is_initialized():
            leave_process_group(procs)


def leave_process_group(procs: Processes, wait_s: float = 60.0) -> None:
    """Every rank leaves the group before rank 0, which hosts the store their teardown still talks to: with rank 0
    gone first, a rank could die in its teardown ("terminate called without an active exception": the two-process
    test failed so in one of two fresh-clone suite runs, issue 88). Rank 0 waits for the others' word in the store,
    at most `wait_s` (a rank that died never sends it), then leaves too."""
    from datetime import timedelta

    store = dist.distributed_c10d._get_default_store()
    if procs.rank != 0:
        dist.destroy_process_group()
        store.set(f"edge-xsent/left/{procs.rank}", "1")
        return
    try:
        store.wait([f"edge-xsent/left/{r}" for r in range(1, procs.world)], timedelta(seconds=wait_s))
    except (RuntimeError, dist.DistStoreError):  # a rank that died first: leave anyway
        pass
    dist.destroy_process_group()


def start_processes(cfg: TrainConfig) -> Processes:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = pick_device(cfg, local_rank)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    set_torch_threads(cfg.threads)
    warning = spinning_warning(torch.get_num_threads()) if device.type == "cpu" and rank == 0 else None
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    return Processes(world, rank, local_rank, device)


def forget_previous_run(out: Path, procs: Processes) -> None:
    """--fresh: the old run's checkpoint and finished summary go, so that a fresh run killed before
    its first checkpoint is not later resumed, or reported finished, as the old one; so do the
    old run's keep_steps folders, which would otherwise pass for this run's."""
    if procs.is_main:
        for old in (checkpoint_path(out), out / "summary.json"):
            old.unlink(missing_ok=True)
        for kept in out.glob("model-step*"):
            shutil.rmtree(kept)
    procs.barrier()


def resume_state(cfg: TrainConfig, ckpt_file: Path, procs: Processes) -> dict | None:
    procs.barrier()
    resume = load_checkpoint(ckpt_file) if ckpt_file.exists() else None
    if resume is not None and _comparable(TrainConfig.from_dict(resume["config"], str(ckpt_file))) != _comparable(cfg):
        raise UserError(f"{ckpt_file} was written by a run with a different config; "
                        "use the same config to resume, or --fresh to start over")
    return resume


def prepare(cfg: TrainConfig, out: Path, resuming: bool, procs: Processes, progress: bool) -> Prepared:
    """Read and tokenise the train and valid splits (training the tokenizer if need be), and
    attach the teacher's vectors when distilling."""
    check_fits_memory(cfg.model)
    t0 = time.time()
    rows = train_rows(cfg)
    if not rows:
        raise UserError(f"{cfg.data}: no training pairs found")
    _check_enough(len(rows), cfg, procs.world)
    langs = pair_langs(rows)
    if len(langs) < 2:
        raise UserError(f"{cfg.data}: all pairs are in one language ({langs[0]}); a cross-lingual encoder needs two")
    if procs.is_main:
        out.mkdir(parents=True, exist_ok=True)
    tok = setup_tokenizer(cfg, rows, out, resuming, procs.is_main, procs.world)
    data = tokenize_pairs(rows, tok, cfg.model.max_len, langs, prep_workers(cfg.threads))
    valid_rows = load_texts(cfg, "valid", cfg.valid_pairs) if resolve(cfg.data).is_dir() else []
    valid = tokenize_pairs(valid_rows, tok, cfg.model.max_len, langs) if len(valid_rows) >= 2 else None
    _check_enough(len(data), cfg, procs.world)
    mono = attach_teacher(cfg, [(rows, data), (valid_rows, valid)], tok, procs.is_main, procs.world, progress) \
        if cfg.teacher else None
    return Prepared(tok, langs, data, valid, mono, time.time() - t0, run_start(cfg, out, resuming))


def run_start(cfg: TrainConfig, out: Path, resuming: bool) -> dict:
    """start_record, read once: a resumed run takes it from its own model folder (its init may be gone)."""
    own = read_training(out / "model") if resuming else {}
    return own["start"] if "start" in own else start_record(cfg)


def build_trainer(cfg: TrainConfig, prep: Prepared, resume: dict | None, procs: Processes) -> Trainer:
    mcfg = dataclasses.replace(cfg.model, n_langs=len(prep.langs) if cfg.multilingual_head else 0)
    torch.manual_seed(cfg.seed)
    loaded = resume is not None or bool(cfg.init)  # weights come next: no table of e5's size drawn only to be overwritten
    model = DualEncoder.for_weights(mcfg) if loaded else DualEncoder(mcfg)
    start_weights(cfg, model, prep.tok, resume)
    anchor = start_anchor(cfg, model, prep.langs, resume) if cfg.anchor_weight else None
    teacher_dim = prep.data.t_vecs.shape[1] if prep.data.t_vecs is not None else 0
    token_teacher = TokenTeacher.for_student(prep.tok, mcfg.n_layers, cfg.token_layers) if cfg.token_weight else None
    trainer = Trainer(cfg, model.to(procs.device), punctuation_pieces(prep.tok), procs.device, teacher_dim, procs.world,
                      procs.local_rank, anchor, token_teacher, teacher_dim > 0 and starts_in_teacher_space(cfg))
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
        start = DualEncoder.for_weights(model.cfg)
        start.load_state_dict(resume["anchor"]["start"])
        return Anchor.build(start, resume["anchor"]["langs"], run_langs)
    langs = read_json(start_dir(cfg) / FILES["config"], what="config.json").get("langs") or []
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

    @property
    def unit(self) -> str:
        """What a step's rate counts: pairs, or with batch_items the items (pairs' sides and texts alike)."""
        return "items" if self.cfg.batch_items else "pairs"

    def rate(self) -> float:
        per_step = items_per_step(self.cfg) if self.cfg.batch_items else self.cfg.batch_size
        return self.steps_done * per_step * self.procs.world / max(time.time() - self.t_start, 1e-9)

    def step(self, step: int, losses: dict[str, torch.Tensor]) -> None:
        self.steps_done += 1
        self.bar.update(1)
        if self.file and (step % self.cfg.log_every == 0 or step == self.cfg.max_steps):
            self.last = {k: round(v.item(), 4) for k, v in losses.items()}
            self.bar.set_postfix({"loss": f"{self.last['total']:.3f}", f"{self.unit}_s": f"{self.rate():.0f}"})
            self.write({"step": step, "lr": lr_at(step - 1, self.cfg), **self.last,
                        f"{self.unit}_per_s": round(self.rate(), 1), "elapsed_s": round(time.time() - self.t_start, 1)})

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
    info = model_info(cfg, prep, procs, step)
    folder = Path(cfg.out) / "model"
    if prep.valid is None:
        if procs.is_main:
            _saving(lambda: save_model(folder, trainer.saved_model(), prep.tok, prep.langs, info), step, folder)
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
            _saving(lambda: save_model(folder, trainer.saved_model(), prep.tok, prep.langs, {**info, **val}), step, folder)
    return best_val


def model_info(cfg: TrainConfig, prep: Prepared, procs: Processes, step: int) -> dict:
    """What a model folder's training.json records about the run that wrote it."""
    return {"train_config": portable(cfg.to_dict()), "langs": prep.langs, "train_pairs": len(prep.data),
            "world_size": procs.world, "device": _device_name(procs.device), "step": step,
            **({"start": prep.start} if prep.start else {})}


def keep_step(cfg: TrainConfig, trainer: Trainer, prep: Prepared, procs: Processes, step: int,
              history: list[dict]) -> None:
    """keep_steps: the weights of this step in their own model folder (model-stepN/), so that a study can measure
    a run on the way without someone copying model/ at the right minute; with the validation figures of the step
    when it was also an eval step."""
    val = history[-1] if history and history[-1]["step"] == step else {}
    folder = Path(cfg.out) / f"model-step{step}"
    _saving(lambda: save_model(folder, trainer.saved_model(), prep.tok, prep.langs, {**model_info(cfg, prep, procs, step), **val}),
            step, folder)


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
               f"{log.unit}_per_s": round(log.rate(), 1)}
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


def param_digest(model: nn.Module) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()


def _check_enough(n: int, cfg: TrainConfig, world: int) -> None:
    if n < cfg.batch_size * world:
        raise UserError(f"only {n} training pairs for a batch of {cfg.batch_size} x {world} process(es); "
                        "lower --batch-size or add data")


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    n = torch.get_num_threads()
    return f"cpu ({n} thread{'s' if n > 1 else ''})"
