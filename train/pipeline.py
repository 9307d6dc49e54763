"""The shipping command's stages (`python train/ship.py RECIPE`): one spec, read once, to a shipped default.

The recipe is the spec: its settings train the run, its `[ship]` table says what happens after the run (alpha,
the export's settings, the rule, the benchmarks) and how each dataset the ship reads is built where it is missing
(`[ship.datasets]`). The stages, in order:

    datasets     every dataset built where missing (`edge-xsent data ...`), then fingerprinted (SHA-256 of its files)
    train        `edge-xsent train --config RECIPE` (resumes from its checkpoint; a finished run returns at once)
    interpolate  the weights moved back toward the start ([ship] alpha; train/interpolate.py), when the spec says so
    debias       the language-identity directions projected out (`edge-xsent debias --rank auto`)
    export       int8 ONNX (`edge-xsent export --int8`, the spec's table bits and activations)
    calibrate    int8 vector ranges on the training corpus's valid split
    figures      every figure the rule and the card read (train/figures.py), and the shipped model's speed beside it
    judge        the rule (train/ship.py): the decision's table, and the winner shipped with its card

The ship record (RESULTS/NAME.ship.json) keeps the recipe's SHA-256, each dataset's fingerprint and, for each stage,
the SHA-256 of what it read and wrote. A rerun skips a stage whose inputs and outputs are as recorded and goes on at
the next; a recipe or dataset that changed under a record is refused, so no figure mixes two of them. The record
then writes train/DECISIONS.md's and the README's ship blocks: the card, the figures and the decision from one file.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from edge_xsent.atomic import atomic_write
from edge_xsent.config import TrainConfig, portable, shown_path
from edge_xsent.data.corpus import resolve
from edge_xsent.errors import UserError
from edge_xsent.encode.bundle import sha256
from edge_xsent.inputs import read_json, read_text

from shipspec import ShipConfig  # train/shipspec.py, beside this module

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("datasets", "train", "interpolate", "debias", "export", "calibrate", "figures", "judge")
CLI = [sys.executable, "-m", "edge_xsent"]
SHIPPED = ROOT / "edge_xsent/resources/fast-model"
BLOCK = ("<!-- ship record: written by train/ship.py from {record}; do not edit -->", "<!-- end of ship record -->")


def fingerprint(path: Path) -> str:
    """SHA-256 of a file, or of a folder's files (each one's relative name and SHA-256, in name order)."""
    if path.is_file():
        return sha256(path)
    whole = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        whole.update(f"{f.relative_to(path).as_posix()}\0{sha256(f)}\n".encode())
    return whole.hexdigest()


def model_sha(folder: Path) -> str | None:
    """A model folder's fingerprint: its manifest's SHA-256 (the manifest lists every file's); None when absent."""
    manifest = folder / "manifest.json"
    return sha256(manifest) if manifest.exists() else None


@dataclass
class Plan:
    """What one spec ships: the recipe read once, every path derived from it."""
    recipe: Path
    train: TrainConfig
    ship: ShipConfig

    @classmethod
    def read(cls, recipe: Path) -> "Plan":
        return cls(recipe, TrainConfig.from_toml(recipe), ShipConfig.from_toml(recipe))

    @property
    def run(self) -> Path:
        return Path(self.train.out).expanduser()

    @property
    def target(self) -> Path:
        """The run folder the candidate is made from: the run, or its interpolation (RUN-aALPHA)."""
        return self.run if self.ship.alpha is None else self.run.parent / f"{self.run.name}-a{self.ship.alpha:g}"

    @property
    def results(self) -> Path:
        return ROOT / Path(self.ship.results).expanduser()

    @property
    def judging_data(self) -> str:
        return self.ship.data or self.train.data

    def datasets(self) -> dict[str, str]:
        """Each dataset the ship reads (as the spec names it) and what for."""
        parts, named = set(self.ship.parts), {self.train.data: "training"}
        named.setdefault(self.judging_data, "judging")
        wanted = {"oog": "oog" in parts, "oog_wide": bool(parts & {"oog_wide", "oog_small"}),
                  "corpus_g": "corpus_g" in parts}
        for key, needed in wanted.items():
            if needed:
                named.setdefault(getattr(self.ship, key), key)
        return named


class Record:
    """The ship record: the recipe it follows, the datasets' fingerprints, each stage's inputs and outputs."""

    def __init__(self, path: Path, plan: Plan):
        self.path = path
        recipe_sha = fingerprint(plan.recipe)
        self.data = read_json(path, what="ship record") if path.exists() else {
            "recipe": shown_path(plan.recipe, ROOT), "recipe_sha256": recipe_sha, "started": _now(), "datasets": {},
            "stages": {}}
        if self.data.get("recipe_sha256") != recipe_sha:
            raise UserError(f"{plan.recipe}: changed since {path} was begun (its SHA-256 differs): the stages done "
                            f"would mix two recipes; remove {path} to ship afresh, or restore the recipe")

    def done(self, stage: str, inputs: dict[str, str | None], outputs: dict[str, Path]) -> bool:
        """The stage ran on these inputs and its outputs are as the ship last left them (a later stage may have
        changed one: calibration rewrites the export's manifest)."""
        seen, written = self.data["stages"].get(stage), self.data.setdefault("written", {})
        return bool(seen) and seen["inputs"] == inputs and all(
            written.get(shown_path(p, ROOT)) == _sha(p) is not None for p in outputs.values())

    def mark(self, stage: str, inputs: dict[str, str | None], outputs: dict[str, Path], **extra) -> None:
        shas = {k: _sha(p) for k, p in outputs.items()}
        self.data["stages"][stage] = {"done": _now(), "inputs": inputs, "outputs": shas, **extra}
        self.data.setdefault("written", {}).update({shown_path(p, ROOT): shas[k] for k, p in outputs.items()})
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(self.path) as f:
            f.write(json.dumps(portable(self.data), indent=1, ensure_ascii=False) + "\n")


def _sha(path: Path) -> str | None:
    if (path / "manifest.json").exists():
        return model_sha(path)
    return fingerprint(path) if path.exists() else None


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M")


def run(cmd: list[str]) -> None:
    """One step's command, its output passed through; a failure stops the ship with the command named."""
    print("+ " + shlex.join(str(c) for c in cmd), file=sys.stderr, flush=True)
    done = subprocess.run([str(c) for c in cmd], cwd=ROOT)
    if done.returncode != 0:
        raise UserError(f"the ship stopped: `{shlex.join(str(c) for c in cmd)}` exited {done.returncode} (its "
                        "message is above); mend it and run the same command again: it goes on where it stopped")


def build_missing(plan: Plan) -> dict[str, tuple[Path, str, str | None]]:
    """Every dataset of the spec's `[ship.datasets]` (built where missing, in the spec's order: a benchmark that
    excludes a corpus comes after it) and every one the ship reads: name -> (path, role, its build's arguments)."""
    builds = {str(Path(k).expanduser()): v for k, v in plan.ship.datasets.items()}
    reads = plan.datasets()
    ready = {}
    for name in [*plan.ship.datasets, *(n for n in reads if n not in plan.ship.datasets)]:
        path, role = resolve(name), reads.get(name, "an input of another's build")
        how = builds.get(str(path))
        if not path.exists():
            if how is None:
                raise UserError(f"{name} ({role}): missing, and the spec says not how to build it: add "
                                f'"{name}" = "build --langs ... --sources ..." (or "reserved ...") under '
                                f"[ship.datasets] in {plan.recipe}")
            run([*CLI, "data", *shlex.split(how), "--out", path])
        ready[name] = (path, role, how)
    return ready


def datasets(plan: Plan, record: Record) -> None:
    """build_missing's datasets fingerprinted; a fingerprint that differs from the record's is refused."""
    for name, (path, role, how) in build_missing(plan).items():
        sha = fingerprint(path)
        seen = record.data["datasets"].get(name)
        if seen and seen["sha256"] != sha:
            raise UserError(f"{name}: changed since {record.path} fingerprinted it (its files differ): the figures "
                            f"would mix two datasets; remove {record.path} to ship afresh")
        record.data["datasets"][name] = {"sha256": sha, "role": role, "built_by": how and f"edge-xsent data {how}"}
    record.save()


def model_stages(plan: Plan, record: Record, stop_after: str | None) -> bool:
    """train -> interpolate -> debias -> export -> calibrate, each skipped when done; False: told to stop."""
    run([*CLI, "train", "--config", plan.recipe, "--quiet"])  # resumes itself; a finished run returns at once
    record.mark("train", {"recipe": record.data["recipe_sha256"]}, {"model": plan.run / "model"})
    if stop_after == "train" or (stop_after == "interpolate" and plan.ship.alpha is None):
        return False
    for stage, source, out, cmd in model_steps(plan):
        inputs = {"model": model_sha(source)}
        if not record.done(stage, inputs, {"model": out}):
            run(cmd)
            record.mark(stage, inputs, {"model": out})
        if stop_after == stage:
            return False
    bundle = plan.target / "bundle"
    exported = {"model": record.data["stages"]["export"]["outputs"]["model"],
                "data": record.data["datasets"][plan.train.data]["sha256"]}
    if not record.done("calibrate", exported, {"model": bundle}):  # calibrate rewrites the bundle's manifest
        run([*CLI, "calibrate", bundle, "--data", plan.train.data, "--sentences", 5000])
        record.mark("calibrate", exported, {"model": bundle})
    return stop_after != "calibrate"


def model_steps(plan: Plan) -> list[tuple[str, Path, Path, list]]:
    """(stage, the model folder it reads, the one it writes, its command) after training."""
    target, ship = plan.target, plan.ship
    steps = [("interpolate", plan.run / "model", target / "model",
              [sys.executable, ROOT / "train/interpolate.py", plan.recipe, "--alpha", f"{ship.alpha:g}",
               "--out", target])
             ] if ship.alpha is not None else []
    return [*steps,
            ("debias", target / "model", target / "model-debiased",
             [*CLI, "debias", target / "model", "--data", plan.train.data, "--out", target / "model-debiased",
              "--rank", "auto"]),
            ("export", target / "model-debiased", target / "bundle",
             [*CLI, "export", target / "model-debiased", "--int8", "--table-bits", ship.table_bits,
              "--int8-activations", ship.int8_activations, "--out", target / "bundle", "--force"])]


def figures(plan: Plan, record: Record) -> Path:
    """The candidate's figures (train/figures.py resumes by part) and, with speed, the shipped model's speed."""
    out = plan.results / f"{plan.target.name}.json"
    bench = {k: getattr(plan.ship, k) for k in ("oog", "oog_wide", "corpus_g")}
    read = {**bench, "data": plan.judging_data}
    inputs = {"model": model_sha(plan.target / "bundle"),
              **{k: record.data["datasets"][v]["sha256"] for k, v in read.items() if v in record.data["datasets"]}}
    outputs = {"figures": out, **({"shipped": plan.results / "shipped.json"} if "speed" in plan.ship.parts else {})}
    if record.done("figures", inputs, outputs):
        return out
    common = ["--threads", 1, "--parts", ",".join(plan.ship.parts), "--data", plan.judging_data,
              *[x for k, v in bench.items() for x in (f"--{k.replace('_', '-')}", v)]]
    run([sys.executable, ROOT / "train/figures.py", plan.target / "bundle", "--name", plan.target.name, "--out", out,
         "--recipe", shown_path(plan.recipe, ROOT), *common])
    if "speed" in plan.ship.parts:  # the model shipped now, on this machine too, for the table
        run([sys.executable, ROOT / "train/figures.py", SHIPPED, "--name", "shipped", "--out", outputs["shipped"],
             "--threads", 1, "--parts", "speed", "--data", plan.judging_data])
    record.mark("figures", inputs, outputs)
    return out


def ship_recipe(recipe: Path, judge: Callable[[Path, Path, str, Path], tuple[str, list[str]]],
                stop_after: str | None = None, train_flags: list[str] | None = None, docs: Path = ROOT) -> dict:
    """The whole ship from one spec, resumably; `judge(shipped figures, candidate figures, rule, decision)` is
    train/ship.py's rule. `train_flags` make a rehearsal: the train stage alone, with them, and no record."""
    if stop_after is not None and stop_after not in STAGES:
        raise UserError(f"--stop-after {stop_after}: choose one of {', '.join(STAGES)}")
    plan = Plan.read(recipe)
    if train_flags:
        if stop_after != "train":
            raise UserError(f"flags after the recipe ({' '.join(train_flags)}) change the run, so only a rehearsal "
                            "takes them: add --stop-after train")
        run([*CLI, "train", "--config", recipe, "--quiet", *train_flags])
        return {}
    record = Record(plan.results / f"{plan.target.name}.ship.json", plan)
    datasets(plan, record)
    if stop_after == "datasets" or not model_stages(plan, record, stop_after):
        return record.data
    fig = figures(plan, record)
    if stop_after == "figures":
        return record.data
    decision = plan.results / "decision.md"
    inputs = {"figures": fingerprint(fig), "shipped": _sha(plan.results / "shipped.json")}
    if not record.done("judge", inputs, {"decision": decision}):
        pick, table = judge(plan.results / "shipped.json", fig, plan.ship.rule, decision)
        shipped = pick == plan.target.name
        record.mark("judge", inputs, {"decision": decision, **({"default": SHIPPED} if shipped else {})},
                    pick=pick, shipped=shipped, table=table, figures=shown_path(fig, ROOT))
    write_blocks(record, docs)
    return record.data


def block_lines(record: dict) -> list[str]:
    """The record as DECISIONS.md shows it: the command, the datasets, the stages, the rule's table and verdict."""
    judged = record["stages"].get("judge", {})
    verdict = (f"**{judged['pick']} ships**" if judged.get("shipped") else f"the rule keeps {judged.get('pick')}") \
        if judged else "not judged yet"
    lines = [f"The last ship: `python train/ship.py {record['recipe']}` (recipe SHA-256 "
             f"{record['recipe_sha256'][:12]}, begun {record['started']}): {verdict}.", "",
             "| dataset | read for | SHA-256 | built by |", "|---|---|---|---|"]
    for name, d in record["datasets"].items():
        built = f"`{d['built_by']}`" if d.get("built_by") else "present"
        lines.append(f"| `{name}` | {d['role']} | {d['sha256'][:12]} | {built} |")
    lines += ["", "| stage | done | output SHA-256 |", "|---|---|---|"]
    for stage, s in record["stages"].items():
        outputs = ", ".join(f"{k} {(v or '-')[:12]}" for k, v in s["outputs"].items())
        lines.append(f"| {stage} | {s['done']} | {outputs} |")
    return [*lines, "", *judged.get("table", [])]


def write_blocks(record: Record, docs: Path = ROOT) -> None:
    """DECISIONS.md's ship block from the record; the README's too when the record shipped a default."""
    shown = shown_path(record.path, ROOT)
    write_block(docs / "train/DECISIONS.md", shown, block_lines(record.data))
    judged = record.data["stages"].get("judge", {})
    if judged.get("shipped"):
        write_block(docs / "README.md", shown, readme_lines(record.data))


def readme_lines(record: dict) -> list[str]:
    """The README's lines on the default a record shipped: its figures as the rule read them, and where the rest is."""
    judged = record["stages"]["judge"]
    fig = read_json(ROOT / judged["figures"], what="figures file")
    speed = fig.get("speed", {})
    wide = fig.get("oog_wide", {})
    row = [f"`{judged['pick']}`", f"{fig.get('int8_mb') or 0:.1f}", f"{speed['ratio']:.2f}" if speed else "-",
           f"{fig['oog']['mean']:.1f}" if "oog" in fig else "-", f"{wide['mean']:.1f}" if "mean" in wide else "-"]
    return [f"The default now, shipped by `python train/ship.py {record['recipe']}` on {judged['done']} (its figures: "
            f"`{judged['figures']}`; the rule's table and the runs: [train/DECISIONS.md](train/DECISIONS.md)):", "",
            "| model | int8 MB | x USE-m sentences/s (1 thread) | `oog` P@1 | `oog-m1` P@1 |", "|---|---|---|---|---|",
            "| " + " | ".join(row) + " |"]


def write_block(path: Path, record: str, lines: list[str]) -> None:
    """Replace the ship block of a markdown file (between BLOCK's two lines), or add one at its end."""
    text = read_text(path)
    head, tail = BLOCK[0].format(record=record), BLOCK[1]
    opening = text.find(BLOCK[0].split("{")[0])
    body = "\n".join([head, *lines, tail])
    if opening < 0:
        text = text.rstrip("\n") + "\n\n" + body + "\n"
    else:
        text = text[:opening] + body + text[text.index(tail, opening) + len(tail):]
    with atomic_write(path) as f:
        f.write(text)
