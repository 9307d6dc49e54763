"""studies/vocab-extend: a vocabulary extended to new scripts cuts the old languages exactly as before."""

from __future__ import annotations

from conftest import ROOT, script_module
from edge_xsent.config import UNK_ID
from edge_xsent.encode.tokenizer import Tokenizer


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
