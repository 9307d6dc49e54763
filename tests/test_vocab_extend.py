"""studies/vocab-extend: a vocabulary extended to new scripts cuts the old languages exactly as before."""

from __future__ import annotations

import pytest

from conftest import ROOT, script_module
from edge_xsent.config import UNK_ID
from edge_xsent.encode.tokenizer import Tokenizer

pytestmark = pytest.mark.lab  # a lab script's test: tests/run.sh --lab runs it


def test_extension_keeps_old_pieces_and_reaches_every_script(tmp_path):
    ext = script_module("train/extend_vocab.py")
    old_path = ROOT / "train/tokenizers/nine-language-48k.model"  # the default shipped before byte fallback
    new_path = ROOT / "train/tokenizers/m1-48k.model"
    merged = ext.extend(ext.load(old_path), ext.load(new_path))
    (tmp_path / "x.model").write_bytes(merged.SerializeToString())
    old, new = Tokenizer.load(old_path), Tokenizer.load(tmp_path / "x.model")
    latin = ["Save the current document", "Enregistrer le document actuel", "Die Datei drucken"]
    assert new.encode(latin) == old.encode(latin)  # same ids: the old rows carry over unchanged
    other = ["駅はどこですか", "Πού είναι ο σταθμός;", "İstasyon nerede?", "🙂"]
    assert any(UNK_ID in ids for ids in old.encode(other))  # the old vocabulary cannot read them
    assert all(UNK_ID not in ids for ids in new.encode(other)) and new.vocab_size > old.vocab_size


def test_a_fifo_or_an_endless_file_or_a_non_model_is_one_error(tmp_path):
    """extend_vocab.py --new read a FIFO for ever (issue 88): it reads as every tokenizer is read now."""
    import os

    import pytest

    from edge_xsent.errors import UserError

    ext = script_module("train/extend_vocab.py")
    os.mkfifo(tmp_path / "fifo.model")
    (tmp_path / "text.model").write_bytes(b"\xff\xfe not a model")
    for path, words in ((tmp_path / "fifo.model", "FIFO"), ("/dev/zero", "device"),
                        (tmp_path / "text.model", "not a SentencePiece model")):
        with pytest.raises(UserError, match=words):
            ext.load(path)
