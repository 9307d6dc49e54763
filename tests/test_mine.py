import numpy as np
import pytest

from conftest import ROOT, run_cli
from edge_xsent.eval.mine import mine


def fake_embed(vectors: dict):
    return lambda texts: np.stack([vectors[t] for t in texts]) if texts else np.zeros((0, 8), np.float32)


def setup(n=40, noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, 8)).astype(np.float32)
    vec = {}
    for i in range(n):
        for side in ("s", "t"):
            v = base[i] + noise * rng.normal(size=8)
            vec[f"{side}{i}"] = (v / np.linalg.norm(v)).astype(np.float32)
    return vec


@pytest.mark.parametrize("mode", ["forward", "backward", "intersect", "max"])
@pytest.mark.parametrize("chunk", [7, 4096])
def test_mining_recovers_pairs(mode, chunk):
    vec = setup()
    src = [f"s{i}" for i in range(40)]
    tgt = [f"t{i}" for i in np.random.default_rng(1).permutation(40)]
    found = mine(iter(src), tgt, fake_embed(vec), mode=mode, threshold=1.0, chunk=chunk)
    correct = sum(src[i][1:] == tgt[j][1:] for _, i, j in found)
    assert len(found) >= 38 and correct / len(found) > 0.95
    scores = [s for s, _, _ in found]
    assert scores == sorted(scores, reverse=True)


def test_threshold_and_unrelated_sentences():
    vec = setup()
    rng = np.random.default_rng(5)
    for i in range(20):  # targets with no translation among the sources
        v = rng.normal(size=8)
        vec[f"x{i}"] = (v / np.linalg.norm(v)).astype(np.float32)
    src = [f"s{i}" for i in range(20)]
    tgt = [f"t{i}" for i in range(20)] + [f"x{i}" for i in range(20)]
    strict = mine(iter(src), tgt, fake_embed(vec), mode="intersect", threshold=1.2)
    assert strict and all(tgt[j].startswith("t") for _, _, j in strict)
    assert mine(iter(src), tgt, fake_embed(vec), threshold=99) == []
    assert mine(iter([]), tgt, fake_embed(vec)) == []


def test_chunking_does_not_change_the_result():
    vec = setup(n=30, noise=0.3)
    src, tgt = [f"s{i}" for i in range(30)], [f"t{i}" for i in range(30)]
    a = mine(iter(src), tgt, fake_embed(vec), mode="max", threshold=0.9, chunk=4)
    b = mine(iter(src), tgt, fake_embed(vec), mode="max", threshold=0.9, chunk=1000)
    assert [(i, j) for _, i, j in a] == [(i, j) for _, i, j in b]
    assert np.allclose([s for s, _, _ in a], [s for s, _, _ in b], atol=1e-5)


def test_a_source_that_cannot_be_read_twice_is_refused_before_anything_is_read(tmp_path):
    """mine_files reads its source twice: a FIFO (never opened for a writer: nothing hangs) or a folder is one
    error naming it; a missing source is read_lines's error, as for the targets."""
    import os

    from edge_xsent.errors import UserError
    from edge_xsent.eval.mine import mine_files

    vec = setup(n=3)
    tgt = tmp_path / "tgt.txt"
    tgt.write_text("t0\nt1\nt2\n")
    fifo = tmp_path / "src.fifo"
    os.mkfifo(fifo)
    (tmp_path / "folder").mkdir()
    for src, kind in ((fifo, "a FIFO"), (tmp_path / "folder", "a folder")):
        with pytest.raises(UserError, match=rf"{src}: the source, which mine reads twice .* is {kind}.*, not a regular file"):
            mine_files(src, tgt, tmp_path / "out.tsv", fake_embed(vec))
    with pytest.raises(UserError, match="absent.txt: no such file"):
        mine_files(tmp_path / "absent.txt", tgt, tmp_path / "out.tsv", fake_embed(vec))
    src = tmp_path / "src.txt"
    src.write_text("s0\ns1\ns2\n")
    assert mine_files(src, tgt, tmp_path / "out.tsv", fake_embed(vec), threshold=1.0) == 3
    assert not (tmp_path / "out.tsv").is_dir() and len((tmp_path / "out.tsv").read_text().splitlines()) == 3


def test_cli_mine_on_real_sentences(tiny_model, tmp_path):
    from edge_xsent.data.corpus import SAMPLE_CORPUS, read_corpus_split

    pairs = [p for p in read_corpus_split(SAMPLE_CORPUS / "test.tsv") if p.lang_b == "it"][:150]
    order = np.random.default_rng(0).permutation(len(pairs))
    (tmp_path / "src.en").write_text("\n".join(p.a for p in pairs) + "\n", encoding="utf-8")
    (tmp_path / "tgt.it").write_text("\n".join(pairs[i].b for i in order) + "\n", encoding="utf-8")
    res = run_cli("mine", tmp_path / "src.en", tmp_path / "tgt.it", "--model", tiny_model, "--out", tmp_path / "p.tsv",
                  "--threshold", "1.0", cwd=ROOT)
    assert res.returncode == 0, res.stderr
    rows = [l.split("\t") for l in (tmp_path / "p.tsv").read_text(encoding="utf-8").splitlines()]
    truth = {p.a: p.b for p in pairs}
    right = sum(truth.get(r[1]) == r[2] for r in rows)
    assert len(rows) > 50 and right / len(rows) > 0.7  # the tiny model already mines mostly true pairs


def test_targets_whose_vectors_would_not_fit_are_one_error_not_a_memory_error(tmp_path, monkeypatch):
    """Round eight (issue 104): `mine` of ten million empty target lines asked numpy for a 14.3 GiB array and ended
    in a traceback. Targets whose vectors take more than half the machine's memory are refused before any is
    embedded, naming the way out (the longer file as the streamed source). The machine is made small here."""
    import os

    from click.testing import CliRunner

    from edge_xsent.cli import main

    real = os.sysconf
    monkeypatch.setattr(os, "sysconf", lambda name: 25_000 if name == "SC_PHYS_PAGES" else real(name))  # ~100 MB
    (tmp_path / "src.txt").write_text("Save the file\n")
    (tmp_path / "tgt.txt").write_text("\n" * 100_000)
    res = CliRunner().invoke(main, ["mine", str(tmp_path / "src.txt"), str(tmp_path / "tgt.txt"),
                                    "--out", str(tmp_path / "pairs.tsv")])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert "100,000 lines" in res.output and "give the longer file as the source" in res.output
    assert not (tmp_path / "pairs.tsv").exists()
