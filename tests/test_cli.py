import subprocess
import sys

import pytest
from click.testing import CliRunner

from conftest import ROOT, run_cli
from edge_xsent.cli import main

COMMANDS = [["data", "build"], ["data", "stats"], ["train"], ["export"], ["encode"], ["bench"], ["mine"],
            ["eval", "xsr"], ["eval", "classify"], ["compare"]]


@pytest.mark.parametrize("cmd", COMMANDS, ids=" ".join)
def test_every_command_help_has_examples(cmd):
    res = CliRunner().invoke(main, [*cmd, "--help"])
    assert res.exit_code == 0 and "Examples:" in res.output and "edge-xsent" in res.output


@pytest.mark.parametrize("args,message", [
    (["data", "stats", "/nonexistent"], "is not a corpus folder"),
    (["train", "--config", "/nonexistent.toml"], "no such config file"),
    (["train", "--objective", "bert"], "unknown objective"),
    (["eval", "xsr", "--model", "/nonexistent"], "no such model folder"),
    (["encode", "--model", "/nonexistent", "--out", "x.npy"], "no such model folder"),
    (["bench", "--layers", "two"], "--layers takes integers"),
    (["data", "build", "--langs", "french", "--offline"], "unknown language code"),
    (["eval", "xsr", "--max-pairs", "0"], "use a positive number of pairs"),
    (["bench", "--layers", "0"], "each depth must be between 1 and 24"),
    (["bench", "--backends", "torch,onnx"], "unknown onnx; choose from torch,onnx-fp32,onnx-int8,torchscript"),
])
def test_user_errors_are_one_line_without_traceback(args, message):
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1
    assert message in res.output and "Traceback" not in res.output
    assert res.output.strip().startswith("error: ") and len(res.output.strip().splitlines()) == 1


def test_debug_flag_shows_the_traceback():
    res = subprocess.run([sys.executable, "-m", "edge_xsent.cli", "--debug", "data", "stats", "/nonexistent"],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 1 and "Traceback" in res.stderr and "UserError" in res.stderr


def test_import_is_light():
    """`import edge_xsent` and the CLI's --help load neither torch nor onnxruntime."""
    code = ("import sys, edge_xsent, edge_xsent.cli; "
            "print(any(m in sys.modules for m in ('torch', 'onnxruntime', 'sentencepiece')))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.stdout.strip() == "False", res.stderr


def test_data_stats_on_the_sample():
    res = CliRunner().invoke(main, ["data", "stats", str(ROOT / "edge_xsent/resources/sample-corpus")])
    assert res.exit_code == 0 and "en-fr" in res.output and "total" in res.output


def test_eval_max_pairs_shrinks_the_candidates():
    import json

    res = CliRunner().invoke(main, ["eval", "xsr", "--model", "fast", "--queries", "20", "--max-pairs", "40", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert {r["n_candidates"] for r in out.values()} == {40} and {r["n_queries"] for r in out.values()} == {20}


def test_eval_writes_markdown(tmp_path):
    res = CliRunner().invoke(main, ["eval", "xsr", "--model", "fast", "--queries", "20", "--max-pairs", "60", "--md",
                                    str(tmp_path / "x.md")])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "x.md").read_text()
    assert md.startswith("# Cross-lingual retrieval") and "en->fr" in md
    assert "eval xsr --model fast --queries 20 --max-pairs 60 --md" in md


def test_readme_quickstart_main_job_reproduces_its_pasted_output():
    """The README's first command ends in the main job; run it and compare with the output pasted there."""
    import re

    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()  # the README's first code block
    setup, tests = first_block[0], first_block[1]
    ci = (ROOT / ".ci/run").read_text().splitlines()
    assert tests == "tests/run.sh" and {"tests/run.sh", "tests/run.sh --lab"} <= set(ci)  # CI runs what it says, and the lab's
    job = setup.split("&&", 1)[1].split()
    assert job[0] == "edge-xsent", setup
    res = run_cli(*job[1:], cwd=ROOT)
    assert res.returncode == 0, res.stderr
    average = lambda text: float(re.search(r"^average\s+([\d.]+)", text, re.M).group(1))  # noqa: E731
    pasted = readme.split("The first prints:", 1)[1]
    assert len(re.findall(r"^\w+->\w+ ", res.stdout, re.M)) == 8  # en<->de/es/fr/it, both directions
    assert average(res.stdout) >= 97.0  # the shipped model on the sample's test split
    assert abs(average(res.stdout) - average(pasted)) <= 0.5  # int8 kernels may differ by CPU; not by more


def test_classify_without_english_documents_and_distractors_in_gz_are_handled(tmp_path):
    import gzip

    folder = tmp_path / "c"
    folder.mkdir()
    rows = [f"pkg{i}\t{'libs' if i % 2 else 'games'}\tfr\tUn paquet numéro {i} pour jouer" for i in range(40)]
    (folder / "classify.tsv").write_text("package\tlabel\tlang\ttext\n" + "\n".join(rows) + "\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["eval", "classify", "--data", str(folder), "--seeds", "1"])
    assert res.exit_code == 1 and "no en documents" in res.output and "Traceback" not in res.output
    extra = tmp_path / "extra.fr.txt.gz"
    with gzip.open(extra, "wt", encoding="utf-8") as f:
        f.write("Une phrase de plus pour brouiller les pistes\n\nEncore une autre phrase\n")
    few = ["eval", "xsr", "--model", "fast", "--queries", "50", "--max-pairs", "100", "--json"]  # the behaviour, not a score
    res = CliRunner().invoke(main, [*few, "--distractors", f"fr:{extra}"])
    assert res.exit_code == 0, res.output
    import json

    assert json.loads(res.output)["en->fr"]["n_candidates"] == json.loads(
        CliRunner().invoke(main, few).output)["en->fr"]["n_candidates"] + 2


def test_result_records_name_the_command_as_typed(tmp_path):
    """The markdown record of an eval is the command with the options the user gave, not a rebuilt line."""
    md = tmp_path / "x.md"
    res = CliRunner().invoke(main, ["eval", "xsr", "--model", "fast", "--data", "sample", "--max-pairs", "50",
                                    "--queries", "20", "--md", str(md)], prog_name="edge-xsent")
    assert res.exit_code == 0, res.output
    assert f"`edge-xsent eval xsr --model fast --data sample --queries 20 --max-pairs 50 --md {md}`" in md.read_text()
    assert "--split" not in md.read_text() and "--precision" not in md.read_text()  # defaults left out


@pytest.mark.parametrize("args, says", [
    (["eval", "classify", "--seeds", "0"], "--seeds"),
    (["debias", "m", "--per-lang", "0"], "--per-lang"),
    (["export", "m", "--min-cosine", "nan"], "--min-cosine"),
    (["bench", "--threads", "0"], "--threads"),
])
def test_values_that_would_give_nan_or_a_traceback_are_usage_errors(args, says):
    """--seeds 0 printed nan and exit 0; --min-cosine nan turned the int8 parity guard off."""
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2 and says in res.output and "Traceback" not in res.output


def test_every_generated_training_flag_says_what_it_accepts():
    """Each flag's help is its field's own doc (the comment in config.py), not only 'Overrides x'."""
    from edge_xsent.cli import train_cmd

    from edge_xsent.flags import config_fields

    names = {name for name, _, _ in config_fields()}
    generated = [p for p in train_cmd.params if p.name in names]
    assert len(generated) > 30
    bare = [p.name for p in generated if not p.help or p.help.startswith((".", " [", "Recipe:"))]
    assert not bare, f"flags without a doc comment in config.py: {bare}"
    lr = next(p for p in generated if p.name == "lr")
    assert "learning rate" in lr.help and "[1e-12..10.0]" in lr.help


def test_train_help_shows_the_common_flags_and_help_all_every_other_under_one_heading():
    """`train --help` was 212 lines (issue 106): it shows the Common flags and says the override rule once, in at
    most 80 lines; `--help-all` groups every setting, each in exactly one group, the common first."""
    from edge_xsent.cli import train_cmd
    from edge_xsent.flags import TRAIN_FLAG_GROUPS

    placed = [name for names in TRAIN_FLAG_GROUPS.values() for name in names]
    assert len(placed) == len(set(placed)), "a setting listed in two groups"
    import click

    params = {p.name for p in train_cmd.params} - {train_cmd.get_help_option(click.Context(train_cmd)).name}
    assert params <= set(placed), f"settings in no group (they would fall under Other): {sorted(params - set(placed))}"
    short = CliRunner().invoke(main, ["train", "--help"]).output
    assert len(short.splitlines()) <= 80 and short.count("recipe key of the same name") == 1, short
    assert "--max-steps" in short and "--warmup-steps" not in short and "Overrides" not in short
    text = CliRunner().invoke(main, ["train", "--help-all"]).output
    headings = [line[:-1] for line in text.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert headings == list(TRAIN_FLAG_GROUPS), headings  # no Other: every flag has its group
    common = text[text.index("Common:"):text.index("Model and tokenizer:")]
    assert all(f in common for f in ("--config", "--data", "--out", "--max-steps", "--help"))
    assert "--warmup-steps" not in common and text.index("--warmup-steps") > text.index("Optimiser and schedule:")


def test_list_flags_parse_to_whole_numbers_also_where_the_setting_may_be_unset(monkeypatch):
    """`list[int] | None` settings (init_layers, token_layers) are "0,4,8" on the command line, negatives too."""
    import edge_xsent.train.loop as T

    seen = {}
    monkeypatch.setattr(T, "train", lambda cfg, fresh=False, progress=True: seen.setdefault("cfg", cfg) and {"steps": 0})
    res = CliRunner().invoke(main, ["train", "--init", "e5-small", "--n-layers", "3", "--d-model", "384", "--n-heads",
                                    "12", "--d-ff", "1536", "--init-layers", "0,4,8", "--token-weight", "1",
                                    "--token-layers", "-1,-1,11", "--matryoshka-dims", "128,64"])
    assert res.exit_code == 0, res.output
    cfg = seen["cfg"]
    assert (cfg.init_layers, cfg.token_layers, cfg.matryoshka_dims) == ([0, 4, 8], [-1, -1, 11], [128, 64])


def test_python_dash_m_is_the_command(monkeypatch, capsys):
    """`python -m edge_xsent` (a checkout run without installing it, as on a lent GPU) is `edge-xsent`."""
    import runpy

    monkeypatch.setattr(sys, "argv", ["edge_xsent", "--help"])
    with pytest.raises(SystemExit) as done:
        runpy.run_module("edge_xsent", run_name="__main__")
    assert done.value.code == 0 and "train" in capsys.readouterr().out
