"""The README cannot point at files that do not exist."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", ROOT / "android_demo" / "README.md",
        *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_relative_link_resolves():
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_every_results_file_the_readme_names_exists():
    text = (ROOT / "README.md").read_text()
    named = set(re.findall(r"benchmarks/results/([\w./-]+\.(?:md|json|png))", text))
    missing = sorted(n for n in named if not (ROOT / "benchmarks" / "results" / n).exists())
    assert not missing, missing


def test_results_index_is_generated_and_current():
    """benchmarks/results/README.md is what benchmarks/index.py writes from the tables' own title, command and
    date; the folder's top holds current results only (at most 80 entries), the rest in its subfolders."""
    from conftest import script_module

    mod = script_module("benchmarks/index.py")
    results = ROOT / "benchmarks" / "results"
    assert (results / "README.md").read_text() == mod.index(), "run python benchmarks/index.py"
    assert len(list(results.iterdir())) <= 80
    tops = [p.name for p in results.glob("*.md") if p.name != "README.md"]
    assert tops and all(f"]({name})" in mod.index() for name in tops)


def test_readme_is_short_and_tells_no_history():
    """What it is, how to install and use it and how good it is: the rest lives in docs/."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "train" / "DECISIONS.md",
                ROOT / "edge_xsent" / "resources" / "fast-model" / "README.md", *(ROOT / "train").glob("*.toml")]:
        found = re.findall(r"\b(?:issue|session)s? \d+", doc.read_text(), re.I)
        assert not found, f"{doc.relative_to(ROOT)} tells how the work was organised: {found}"


def test_train_readme_gives_every_file_there_its_line():
    """train/README.md promises one line a file: a script or recipe added (or moved in) without one fails here."""
    readme = (ROOT / "train" / "README.md").read_text()
    unnamed = [p.name for p in sorted((ROOT / "train").iterdir()) if p.name != "README.md" and not p.name.startswith(".")
               and p.name != "__pycache__" and f"`{p.name}{'/' if p.is_dir() else ''}`" not in readme]
    assert not unnamed, f"train/README.md has no line for {unnamed}"


# ----------------------------------------------------------------------------- what the guides say of each model
FORMS = {"static": "static", "per-row": "per-row", "per row": "per-row", "dynamic": "per-tensor",
         "per-tensor": "per-tensor"}


def shipped_facts() -> dict[str, dict]:
    """Each shipped model's int8 activations (its manifest's record), normalisation and languages (its config)."""
    from edge_xsent.export.exporter import recorded_int8

    facts = {}
    for name in ("default", "fast", "quality"):
        folder = ROOT / "edge_xsent/resources" / f"{name}-model"
        config = json.loads((folder / "config.json").read_text())
        facts[name] = {"form": recorded_int8(folder, None, None)[1], "nfkc": "NFKC" in config["normalization"],
                       "langs": len(config["langs"])}
    return facts


def guide_claims() -> list[tuple[str, str]]:
    """(where, sentence) for every sentence of the README and docs/ that names a shipped model in backticks."""
    import re

    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = re.sub(r"\s+", " ", path.read_text())
        for sentence in re.split(r"(?<=[.;:!?])\s+|\|", text):  # clauses: a colon or semicolon ends one too
            if re.search(r"`(default|fast|quality)`", sentence):
                found.append((path.name, sentence))
    return found


def test_the_guides_say_of_each_model_what_its_folder_says():
    """Issue 106: a guide's statement about `default`, `fast` or `quality` (its int8 activations, its
    normalisation, how many languages it claims) must match the model's own folder, so that a change of model
    that leaves a guide behind fails here. A sentence naming one form of activations speaks of every model it names."""
    import re

    facts = shipped_facts()
    wrong = [f"{p.name}: names no model: {m.group(0)}" for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
             for m in re.finditer(r"the shipped (default|model)\b[^.]{0,60}", p.read_text(), re.I)]
    for where, sentence in guide_claims():
        models = sorted(set(re.findall(r"`(default|fast|quality)`", sentence)))
        forms = {FORMS[w] for w in re.findall(r"\b(static|per-row|per row|dynamic|per-tensor)\b", sentence)}
        if len(forms) == 1:
            wrong += [f"{where}: `{m}` is {facts[m]['form']}: {sentence[:160]}" for m in models
                      if facts[m]["form"] not in forms]
        if len(models) == 1 and "NFKC" in sentence and not facts[models[0]]["nfkc"]:
            wrong.append(f"{where}: `{models[0]}` does not normalise by NFKC: {sentence[:160]}")
        for n in re.findall(r"English and (\d+) (?:other )?languages", sentence) if len(models) == 1 else ():
            if int(n) != facts[models[0]]["langs"] - 1:
                wrong.append(f"{where}: `{models[0]}` claims English and {facts[models[0]]['langs'] - 1}: {sentence[:160]}")
    assert not wrong, "\n".join(wrong)


def test_the_guide_check_sees_a_wrong_statement(monkeypatch):
    import sys

    facts = shipped_facts()
    assert facts["default"]["form"] == "static" and facts["fast"]["form"] == "per-tensor" and facts["fast"]["nfkc"]
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "guide_claims", lambda: [("x.md", "The `quality` model's activations are dynamic.")])
    with pytest.raises(AssertionError, match="`quality` is per-row"):
        test_the_guides_say_of_each_model_what_its_folder_says()
