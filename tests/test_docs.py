"""The README cannot point at files that do not exist."""

import re
from pathlib import Path

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
