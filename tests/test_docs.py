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
    named = set(re.findall(r"benchmarks/results/([\w.-]+\.(?:md|json|png))", text))
    missing = sorted(n for n in named if not (ROOT / "benchmarks" / "results" / n).exists())
    assert not missing, missing
