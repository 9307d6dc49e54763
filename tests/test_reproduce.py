"""The shipped default's recipe runs on a machine with nothing but this checkout: its pinned start comes
from git history (`init = "git:COMMIT"`), checked against its SHA-256, up to the first training step."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from edge_xsent.errors import UserError
from edge_xsent.train.warmstart import model_from_git

ROOT = Path(__file__).resolve().parent.parent


def git(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def has_history(commit: str) -> bool:
    return git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0


def test_model_from_git_takes_a_folder_of_a_commit_once(tmp_path, tiny_bundle):
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    (repo / "m").mkdir()
    for f in ("manifest.json", "config.json"):
        (repo / "m" / f).write_bytes((tiny_bundle[0] / f).read_bytes())
    git("add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "m", cwd=repo)
    commit = git("rev-parse", "--short", "HEAD", cwd=repo).stdout.strip()
    got = model_from_git(f"git:{commit}:m", repo=repo, cache=tmp_path / "cache")
    assert (got / "manifest.json").read_bytes() == (tiny_bundle[0] / "manifest.json").read_bytes()
    git("rm", "-rq", "m", cwd=repo)  # later commits may delete it: the commit still has it, and the cache too
    assert model_from_git(f"git:{commit}:m", repo=repo, cache=tmp_path / "cache") == got
    with pytest.raises(UserError, match="git fetch --unshallow"):
        model_from_git("git:0000000:m", repo=repo, cache=tmp_path / "cache")


@pytest.mark.lab  # train/ship.sh
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_the_shipped_recipe_starts_from_its_pinned_model(tmp_path):
    manifest = json.loads((ROOT / "edge_xsent/resources/fast-model/manifest.json").read_text())
    path = manifest["recipe"]  # the recipe the shipped model's card says to rerun
    recipe = tomllib.loads((ROOT / path).read_text())
    commit = recipe["init"].split(":")[1]
    if not has_history(commit):
        pytest.skip(f"a shallow clone lacks {commit}: the recipe then says to git fetch --unshallow")
    card = (ROOT / "edge_xsent/resources/fast-model/README.md").read_text()
    assert f"Reproduce: `train/ship.sh {path}`" in card  # the one command (train/ship.py; this name forwards to it),
    # run here up to its first step
    # Its corpus takes an hour of apt downloads to build: 256 pairs of the shipped sample (no monolingual text) stand
    # in, one step, validated on 100 pairs (the whole sample's teacher labels and 2,000-pair validation took a minute).
    env = {**os.environ, "HOME": str(tmp_path)}  # nothing from this machine's runs or caches
    done = subprocess.run(["bash", "train/ship.sh", path, "--stop-after", "train", "--", "--data", "sample", "--out", str(tmp_path / "run"),
                           "--max-steps", "1", "--threads", "1", "--eval-every", "1", "--mono-batch-size", "0",
                           "--max-train-pairs", "256", "--valid-pairs", "100"],
                          cwd=ROOT, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    training = json.loads((tmp_path / "run/model/training.json").read_text())
    assert training["step"] == 1 and training["train_config"]["init"] == recipe["init"]
    tree = git("rev-parse", f"{commit}:edge_xsent/resources/default-model").stdout.strip()
    assert (tmp_path / ".cache/edge-xsent/init" / tree / "manifest.json").exists()  # keyed by content, not by name
