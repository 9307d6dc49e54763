"""What one training step of the shipped recipe costs on this CPU, before and after the cheaper step.

    python benchmarks/training_cost.py --data corpus-g5            # ~6 minutes on 2 cores, nothing else running
    python benchmarks/training_cost.py --data corpus-g5 --steps 4  # a smoke run
    python benchmarks/training_cost.py --data sample --threads 1   # 1 thread alone: 6 workers, not 13
    python benchmarks/training_cost.py --variants "dropout 0"      # before, exact and one option only

Every variant is the training loop's own `Trainer.step` on the same real batches of the recipe's
corpus (length-bucketed as in training, a sample of 20,000 pairs; monolingual texts too) with the
shipped model's weights and tokenizer. "before" runs the code of commit `--before` (the last with
the old step; `git archive`), every other variant this tree with recipe options changed. Each
variant lives in its own worker process and the workers take turns, a few steps each, so that a
change of machine load touches all of them alike: the ratios are measured side by side in one run.
Teacher vectors are random unit vectors of the teacher's width: the distillation loss costs the
same whatever their values, and labelling 20,000 texts with USE-m would cost more than the run.

Then, beside one busy process (a Python loop on one core, like a test or build running beside a
long run): the step at 1 thread, and at 2 threads with OpenMP's default wait and with a passive
one (OMP_WAIT_POLICY, which the CLI now sets). And the FLOPs of one step (torch's FlopCounterMode)
against what one core reaches on a large fp32 matmul.

Writes a markdown report (--out, default benchmarks/results/training-cost.md) and its JSON beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
BEFORE = "328aba9"  # the last commit whose step built dense (B, V) targets and used the for-loop Adam
RECIPE = ROOT / "train" / "shipped.toml"  # the fast model's recipe (the default when this was measured)

# name -> recipe overrides (the approximate options); "before" runs the old tree with none.
VARIANTS = {
    "before": {},
    "exact": {},
    "dropout 0": {"model": {"dropout": 0.0}},
    "sampled head 4k + lazy table": {"head_negatives": 4096, "lazy_table": True},
    "sampled head 4k + lazy table + dropout 0": {"head_negatives": 4096, "lazy_table": True,
                                                 "model": {"dropout": 0.0}},
}


# ----------------------------------------------------------------------------- the worker (a subprocess)

def worker(args: argparse.Namespace) -> None:
    """Build the recipe's Trainer from `args.setup`, then answer "steps N" lines with N step times."""
    import torch

    import edge_xsent
    from edge_xsent.train.bench import time_steps
    from edge_xsent.encode.model import DualEncoder
    from edge_xsent.train.objectives import punctuation_pieces
    from edge_xsent.encode.tokenizer import Tokenizer
    from edge_xsent.config import TrainConfig
    from edge_xsent.train.loop import Trainer
    from edge_xsent.train.warmstart import init_dir, load_init_weights

    setup = json.loads(Path(args.setup).read_text())
    torch.set_num_threads(setup["threads"])
    cfg = TrainConfig.from_toml(setup["recipe"], setup["overrides"])
    tok = Tokenizer.load(init_dir(setup["init"]) / "tokenizer.model")
    model = DualEncoder(cfg.model)
    load_init_weights(model, init_dir(setup["init"]))
    batches = torch.load(setup["batches"], weights_only=True)
    trainer = Trainer(cfg, model, punctuation_pieces(tok), torch.device("cpu"), teacher_dim=batches[0]["t"].shape[1])
    done = 0
    print(json.dumps({"ready": True, "package": str(Path(edge_xsent.__file__).parent)}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("flops"):  # every batch's: they differ in length as much as training's do
            flops = [step_flops(trainer, b) for b in batches]
            print(json.dumps({"flops": flops, "peak": matmul_gflops()}), flush=True)
            continue
        n, warmup = cmd["steps"], cmd.get("warmup", 0)
        at = lambda i: batches[(done + i) % len(batches)]  # noqa: E731
        times = time_steps(trainer, at, n, warmup)
        done += n + warmup
        print(json.dumps({"times": times}), flush=True)


def step_flops(trainer, batch) -> int:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        trainer.step(batch, trainer.cfg.warmup_steps, torch.Generator().manual_seed(0))
    return int(counter.get_total_flops())


def matmul_gflops(n: int = 2048, repeats: int = 5) -> float:
    """What one thread reaches on a large fp32 matmul: the peak a step's FLOPs are held against."""
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


# ----------------------------------------------------------------------------- the parent

def make_batches(recipe: Path, init: str, data: str, out: Path, n: int, sample: int) -> dict:
    """The first `n` batches of a length-bucketed plan over a fixed sample of the recipe's corpus,
    with monolingual batches and random teacher vectors, saved for the workers."""
    import numpy as np
    import torch

    from edge_xsent.train.batches import BatchPlan, TokenizedTexts, make_batch, tokenize_pairs
    from edge_xsent.data.corpus import pair_langs, read_mono, read_pairs, resolve
    from edge_xsent.encode.tokenizer import Tokenizer
    from edge_xsent.config import TrainConfig
    from edge_xsent.train.warmstart import init_dir

    cfg = TrainConfig.from_toml(recipe, {"data": data})
    tok = Tokenizer.load(init_dir(init) / "tokenizer.model")
    rows = list(read_pairs(cfg.data, split="train"))
    rng = np.random.default_rng(0)
    rows = [rows[i] for i in sorted(rng.choice(len(rows), min(sample, len(rows)), replace=False))]
    pairs = tokenize_pairs(rows, tok, cfg.model.max_len, pair_langs(rows))
    pairs.t_vecs = unit_rows(rng, len(pairs), 512)
    pairs.t_idx = np.arange(len(pairs))
    mono_file = resolve(cfg.data) / "mono.tsv"  # without one (the shipped sample), or a recipe without: pairs only
    mono_texts = [t for _, t, _ in read_mono(mono_file)][:sample] if mono_file.exists() and cfg.mono_batch_size else []
    mono_ids = [np.asarray(x, dtype=np.int64) for x in tok.encode(mono_texts, cfg.model.max_len) if x]
    mono = TokenizedTexts(mono_ids, unit_rows(rng, len(mono_ids), 512), np.arange(len(mono_ids))) if mono_ids else None
    plan = BatchPlan(np.array([max(len(a), len(b)) for a, b in zip(pairs.a, pairs.b)]), cfg.batch_size, cfg.seed)
    mono_plan = BatchPlan(np.array([len(x) for x in mono.ids]), cfg.mono_batch_size, cfg.seed + 1) if mono else None
    batches = [make_batch(pairs, plan.indices(s), torch.device("cpu"), mono, mono_plan.indices(s) if mono else None)
               for s in range(n)]
    torch.save(batches, out)
    padded = [sum(int(b[k].numel()) for k in ("a", "b", "m") if k in b) for b in batches]
    return {"pairs_sampled": len(pairs), "batches": n, "batch_size": cfg.batch_size, "vocab_size": tok.vocab_size,
            "padded_tokens_median": int(statistics.median(padded)), "mono": mono is not None}


def unit_rows(rng, n: int, d: int):
    import numpy as np

    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


class Worker:
    def __init__(self, name: str, threads: int, tree: Path, overrides: dict, batches: Path, tmp: Path,
                 wait_policy: str | None, args: argparse.Namespace):
        setup = tmp / f"setup-{len(list(tmp.glob('setup-*')))}.json"
        setup.write_text(json.dumps({"threads": threads, "recipe": str(args.recipe), "init": args.init,
                                     "overrides": overrides, "batches": str(batches)}))
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1"}
        env.pop("OMP_WAIT_POLICY", None)
        if wait_policy:
            env["OMP_WAIT_POLICY"] = wait_policy
        self.name, self.threads, self.wait_policy, self.times = name, threads, wait_policy, []
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", str(setup)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=tree)
        ready = self.read()
        if Path(ready["package"]).resolve() != (tree / "edge_xsent").resolve():
            raise SystemExit(f"worker {name} imported {ready['package']}, not {tree}/edge_xsent")

    def ask(self, cmd: dict) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"worker {self.name} ({self.threads} threads) died; see its stderr above")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def take_turns(workers: list[Worker], rounds: int, steps: int, warmup: int) -> None:
    for w in workers:
        w.ask({"steps": 0, "warmup": warmup})
    for r in range(rounds):
        for w in workers:
            w.times += w.ask({"steps": steps})["times"]
            print(f"  round {r + 1}/{rounds} {w.name} @ {w.threads} thread(s): "
                  f"{1000 * statistics.median(w.times):.0f} ms", file=sys.stderr)


def row(w: Worker, base: Worker | None) -> dict:
    med = statistics.median(w.times)
    out = {"variant": w.name, "threads": w.threads, "wait": w.wait_policy or "default", "steps": len(w.times),
           "median_ms": round(1000 * med, 1), "steps_per_hour": round(3600 / med)}
    if base is not None:
        out["speedup"] = round(statistics.median(base.times) / med, 2)
    return out



def extract_tree(ref: str, dest: Path) -> None:
    """edge_xsent/ as it was at `ref`, into `dest`: the ref is resolved as data (never an option of git's)."""
    import io
    import tarfile

    commit = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
                            cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        sys.exit(f"error: --before {ref!r} names no commit of this checkout")
    tar = subprocess.run(["git", "archive", "--format=tar", "--end-of-options", f"{commit}:edge_xsent"], cwd=ROOT,
                         capture_output=True, check=True).stdout
    (dest / "edge_xsent").mkdir()
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(dest / "edge_xsent", filter="data")


def thread_counts(text: str) -> tuple[int, ...]:
    """--threads 1,2 -> (1, 2); the FLOPs and the busy table's baseline are measured at 1 thread, so 1 is required."""
    from edge_xsent.threads import thread_counts as bounded  # the one bound of every --threads

    counts = bounded(text)
    if 1 not in counts:
        raise argparse.ArgumentTypeError(f"{text!r} must include 1 (e.g. 1 or 1,2)")
    return counts


def variant_names(text: str) -> tuple[str, ...]:
    """--variants "dropout 0" -> ("before", "exact", "dropout 0"): the baseline and the exact step always run (every
    ratio is against "before", the FLOPs are the exact step's); the approximate options are the ones named."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in VARIANTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(VARIANTS)} (comma-separated)")
    return ("before", "exact", *(n for n in VARIANTS if n in names and n not in ("before", "exact")))


def main() -> None:
    from edge_xsent.paths import INPUT, Parser, Role, note_input, path_arg  # never in a worker: its tree may predate it

    ap = Parser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="corpus-g5", help="the recipe's corpus (edge-xsent data build)")
    ap.add_argument("--recipe", type=path_arg(INPUT), default=RECIPE, help="the recipe whose step is timed")
    ap.add_argument("--init", default="default", help="the weights and tokenizer it starts from")
    ap.add_argument("--before", default=BEFORE, help="commit whose step is the baseline")
    ap.add_argument("--steps", type=int, default=4, help="timed steps per turn")
    ap.add_argument("--rounds", type=int, default=3, help="turns per worker")
    ap.add_argument("--threads", type=thread_counts, default=(1, 2),
                    help="comma-separated thread counts to time (default 1,2; must include 1, where FLOPs are counted)")
    ap.add_argument("--variants", type=variant_names, default=tuple(VARIANTS),
                    help="the approximate options to time beside before and exact (default: all), comma-separated")
    ap.add_argument("--out", type=path_arg(Role("file", derives=(".json",))), default=str(ROOT / "benchmarks" / "results" / "training-cost.md"))
    args = ap.parse_args()
    note_input(args.data)

    started, load0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        old = tmp / "before"
        old.mkdir()
        extract_tree(args.before, old)
        batches = tmp / "batches.pt"
        info = make_batches(args.recipe, args.init, args.data, batches, n=args.steps * args.rounds + 2, sample=20_000)
        results, flops = [], None
        for threads in args.threads:
            workers = [Worker(name, threads, old if name == "before" else ROOT, over, batches, tmp, "PASSIVE", args)
                       for name, over in VARIANTS.items() if name in args.variants]
            take_turns(workers, args.rounds, args.steps, warmup=2)
            results += [row(w, workers[0]) for w in workers]
            if threads == 1:  # the exact step's FLOPs on the batches it was timed on (batch 2 onwards)
                got, exact = workers[1].ask({"flops": True}), workers[1]
                timed = got["flops"][2: 2 + len(exact.times)]
                flops = {"gflop_per_step": round(statistics.median(timed) / 1e9, 1),
                         "achieved_gflops_1_thread": round(sum(timed) / sum(exact.times) / 1e9, 1),
                         "peak_gflops_1_thread": round(got["peak"], 1)}
            for w in workers:
                w.close()
        workers = [Worker("exact, beside a busy process", threads, ROOT, {}, batches, tmp, wait, args)
                   for threads, wait in ((1, "PASSIVE"), (2, None), (2, "PASSIVE")) if threads in args.threads]
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # once the workers are ready: beside the steps
        try:
            take_turns(workers, args.rounds, args.steps, warmup=1)
            busy_rows = [row(w, workers[0]) for w in workers]
            for w in workers:
                w.close()
        finally:
            busy.kill()
    flops["fraction_of_peak"] = round(flops["achieved_gflops_1_thread"] / flops["peak_gflops_1_thread"], 2)
    report = {"command": " ".join(["python", "benchmarks/training_cost.py", *sys.argv[1:]]), "date": started,
              "machine": machine(), "load_before": [round(x, 2) for x in load0],
              "load_after": [round(x, 2) for x in os.getloadavg()], "before_commit": args.before,
              "recipe": _shown(args.recipe), "data": args.data, **info, "flops": flops,
              "steps": results, "beside_a_busy_process": busy_rows}
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    out.write_text(to_markdown(report))
    print(out.read_text())


def _shown(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    import torch

    return f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, Python {platform.python_version()}"


def to_markdown(r: dict) -> str:
    lines = [
        "# Training cost of the shipped recipe's step",
        "",
        f"`{r['command']}` on {r['date']}; {r['machine']}. Load average (1/5/15 min) {r['load_before']} before, "
        f"{r['load_after']} after (the benchmark's own workers included).",
        "",
        f"Recipe `{r['recipe']}` (batch {r['batch_size']} pairs{' + monolingual texts' if r['mono'] else ''}, {r['vocab_size']:,} pieces), "
        "on the shipped model's "
        f"weights; {r['batches']} real batches of `{r['data']}` (a sample of {r['pairs_sampled']:,} train pairs, "
        f"length-bucketed as in training; median {r['padded_tokens_median']:,} padded tokens a step). "
        f"\"before\" is commit {r['before_commit']}'s code. Every variant in its own process, the processes "
        "taking turns: ratios are side by side in one run. OMP_WAIT_POLICY=PASSIVE for all of them.",
        "",
        "| variant | threads | steps timed | median ms | steps per hour | speed-up vs before |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {s['variant']} | {s['threads']} | {s['steps']} | {s['median_ms']:,.0f} | {s['steps_per_hour']:,d} | "
              f"{s['speedup']:.2f}x |" for s in r["steps"]]
    f = r["flops"]
    lines += [
        "",
        f"The exact step's median batch is {f['gflop_per_step']} GFLOP (FlopCounterMode: matmuls and attention, "
        f"forward and backward); over the timed steps at 1 thread, {f['achieved_gflops_1_thread']} GFLOP/s against "
        f"{f['peak_gflops_1_thread']} GFLOP/s on a 2048 x 2048 fp32 matmul: {100 * f['fraction_of_peak']:.0f}% of "
        "one core's peak.",
        "",
        "Beside one busy process (a Python loop on one core), the exact step:",
        "",
        "| threads | OpenMP wait | median ms | steps per hour | speed-up vs 1 thread |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {s['threads']} | {s['wait']} | {s['median_ms']:,.0f} | {s['steps_per_hour']:,d} | {s['speedup']:.2f}x |"
              for s in r["beside_a_busy_process"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if "--worker" in sys.argv:  # a worker runs in the tree it times, which may predate the writer's checks
        worker(argparse.Namespace(setup=sys.argv[sys.argv.index("--worker") + 1]))
    else:
        from edge_xsent.failures import user_errors

        user_errors(main)()
