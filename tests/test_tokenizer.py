"""The vocabulary: byte fallback (no text is <unk>), the language-balanced training sample, and
pruning that keeps the fallback."""

import pytest

from conftest import ROOT
from edge_xsent.data.corpus import Pair, read_pairs
from edge_xsent.encode.encoder import FAST_MODEL
from edge_xsent.encode.tokenizer import UNK_ID, Tokenizer, balanced_sample, prune

# Scripts the shipped sample corpus (Latin and Cyrillic) never shows the tokenizer.
UNSEEN = ["日本語の文と한국어 문장", "ไทย ภาษา", "العربية نص", "राम हिंदी", "\U0001F600 ok"]


@pytest.fixture(scope="module")
def latin_tokenizer(tiny_model) -> Tokenizer:
    """The tiny model's, trained on the sample's train split (no text in UNSEEN's scripts): trained once a run."""
    return Tokenizer.load(tiny_model / "tokenizer.model")


def test_training_is_deterministic_so_the_suite_trains_each_tokenizer_once(train_each_tokenizer_once):
    real = train_each_tokenizer_once  # Tokenizer.train itself, not the suite's memo (conftest)
    texts = [t for p in list(read_pairs("sample", split="train"))[:1500] for t in (p.a, p.b)]
    first, second = real(Tokenizer, texts, 400, seed=0), real(Tokenizer, texts, 400, seed=0)
    assert first.proto == second.proto and first.vocab_size == 400
    assert Tokenizer.train(texts, 400).proto == first.proto  # the memo hands out the same model


def test_unseen_scripts_become_bytes_not_unk(latin_tokenizer):
    tok = latin_tokenizer
    assert tok.byte_fallback
    for text in UNSEEN:
        ids = tok.encode([text])[0]
        assert UNK_ID not in ids, text
        assert tok.sp.decode(ids) == text  # the bytes spell the text back exactly
    assert tok.pieces("ไ")[1:] == ["<0xE0>", "<0xB9>", "<0x84>"]  # one Thai character, three UTF-8 bytes
    assert "<0x41>" not in tok.pieces("<0x41>")  # a byte piece is a fallback, never matched as typed text


def test_a_tokenizer_without_byte_pieces_still_loads_and_gives_unk_where_the_shipped_one_does_not():
    old = Tokenizer.load(ROOT / "train/tokenizers/nine-language-48k.model")  # the default shipped before byte fallback
    assert not old.byte_fallback
    assert UNK_ID in old.encode(["ไทย"])[0]
    shipped = Tokenizer.load(FAST_MODEL / "tokenizer.model")  # the fast model: every script reaches a piece
    assert shipped.byte_fallback and UNK_ID not in shipped.encode(["ไทย"])[0]


def test_balanced_sample_caps_each_language_and_counts_distinct_texts():
    pairs = ([Pair("en", "de", f"e{i % 50}", f"d{i}") for i in range(500)]
             + [Pair("en", "th", f"e{i}", f"t{i}") for i in range(30)])
    texts = balanced_sample(pairs, per_lang=100, seed=1)
    by_lang = {p: sum(t.startswith(p) for t in texts) for p in "edt"}
    assert by_lang == {"e": 50, "d": 100, "t": 30}  # English: its 50 distinct texts of 530 sides; Thai: all it has
    assert len(set(texts)) == len(texts)
    assert texts == balanced_sample(pairs, per_lang=100, seed=1) != balanced_sample(pairs, per_lang=100, seed=2)


def test_pruning_keeps_the_byte_pieces(latin_tokenizer):
    used = {i for ids in latin_tokenizer.encode(["a short sentence"]) for i in ids}
    small, old_ids = prune(latin_tokenizer, used)
    assert small.vocab_size < latin_tokenizer.vocab_size and small.byte_fallback
    ids = small.encode(["ไทย"])[0]
    assert UNK_ID not in ids and [old_ids[i] for i in ids] == latin_tokenizer.encode(["ไทย"])[0]


def test_one_models_bytes_load_one_processor_and_give_the_same_ids():
    """The same tokenizer bytes, loaded again (a student's training, export and checks each do), reuse the
    processor: e5's 250,002 pieces take a third of a second to load."""
    texts = [p.a for p in read_pairs("sample", split="train")][:300]
    tok = Tokenizer.train(texts, 400)
    again = Tokenizer.from_bytes(bytearray(tok.proto))  # what a loader read, in whichever bytes-like it was
    assert again.sp is tok.sp and again.encode(texts[:20]) == tok.encode(texts[:20])
