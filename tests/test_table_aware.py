"""Training through the shipped table (edge_xsent/train/tiered.py, `table_exact_rows`): the rows a step reads are
the rows the tiered int8 graph decodes, gradients pass straight through, and a short run on the sample through the
tiered table of e5's block 0 retrieves held-out translations better through that table than its start did."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import tiny_config
from edge_xsent.encode.tiered_table import pack, unpack
from edge_xsent.errors import UserError
from edge_xsent.train.tiered import decode_rows, read_tiered, straight_through

ROOT = Path(__file__).resolve().parents[1]
EXACT = 1000  # the tests' tier boundary: ids below it at 4 bits


def test_decoded_rows_are_the_graphs_rows_bit_for_bit():
    """decode_rows is unpack(pack(...)) on looked-up rows: 4-bit blocks with fp16 scales below the boundary, signs
    times the fp16 mean |x| above it; a zero block and a zero row decode to zeros / -0 scale as pack's do."""
    rng = np.random.default_rng(0)
    table = (rng.standard_normal((300, 64)) * rng.uniform(0.005, 0.3, (300, 1))).astype(np.float32)
    table[3, :32], table[250] = 0, 0
    exact = torch.arange(300) < 120
    assert np.array_equal(decode_rows(torch.from_numpy(table), exact).numpy(), unpack(pack(table, 120))[:300])
    ids = torch.tensor([[5, 130, 299], [119, 120, 0]])  # any shape of lookups: each row by its own id's tier
    got = decode_rows(torch.from_numpy(table)[ids], ids < 120)
    assert np.array_equal(got.numpy(), unpack(pack(table, 120))[ids.numpy()])


def test_the_gradient_passes_straight_through_the_rounding():
    rows = torch.randn(4, 64, requires_grad=True)
    weights = torch.randn(4, 64)
    (straight_through(rows, torch.tensor([True, False, True, False])) * weights).sum().backward()
    assert torch.equal(rows.grad, weights)


def test_the_hook_reads_every_lookup_through_the_tiers_and_comes_off():
    emb = torch.nn.Module()
    emb.tok_emb = torch.nn.Embedding(50, 32)
    ids = torch.tensor([[1, 9, 10, 49]])
    handle = read_tiered(emb, exact_rows=10)
    table = emb.tok_emb.weight.detach().numpy()
    assert np.array_equal(emb.tok_emb(ids).detach().numpy(), unpack(pack(table, 10))[ids.numpy()])
    handle.remove()
    assert torch.equal(emb.tok_emb(ids), emb.tok_emb.weight[ids])


@pytest.mark.parametrize("settings, match", [
    ({"table_exact_rows": 4}, "between 5"),
    ({"table_exact_rows": 1001}, "between 5 .* and vocab_size"),
    ({"table_exact_rows": 10, "model": {"table_rows": 100}}, "table is cut"),
    ({"table_exact_rows": 10, "model": {"d_model": 48, "n_heads": 2}}, "multiple of 32"),
])
def test_a_tier_boundary_the_graph_cannot_hold_is_one_error(settings, match, tmp_path):
    with pytest.raises(UserError, match=match):
        tiny_config(tmp_path / "run", **settings)


@pytest.fixture(scope="module")
def whole(student_file, tmp_path_factory) -> Path:
    from edge_xsent.train.student import write_whole

    out = tmp_path_factory.mktemp("whole") / "student-1-whole"
    write_whole(student_file, out)
    return out


def held_out_p1(model, tok, pairs) -> float:
    from edge_xsent.encode.tokenizer import pad_batch

    def vectors(texts):
        ids, mask = (torch.from_numpy(a) for a in pad_batch(tok.encode(texts, max_len=128)))
        with torch.no_grad():
            return torch.nn.functional.normalize(model(ids, mask), dim=-1)
    a, b = vectors([p.a for p in pairs]), vectors([p.b for p in pairs])
    return float(((a @ b.T).argmax(1) == torch.arange(len(pairs))).float().mean())


def test_a_run_through_the_tiered_table_learns_it_and_ships_as_a_tiered_folder(whole, tmp_path):
    """e5's block 0 with its whole table as start and teacher, the table frozen and read through 1,000 4-bit rows:
    on the sample's test split (held out from the run), P@1 through the tiered table rises well above the start's
    through the same table; the table's rows stay e5's; the run's model makes a tiered folder of the same rows."""
    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.encode.bundle import load_model
    from edge_xsent.train.loop import train
    from edge_xsent.train.student import build_folder

    cfg = tiny_config(tmp_path / "run", init=str(whole), teacher=str(whole), teacher_cache=str(tmp_path / "cache"),
                      freeze_table=True, table_exact_rows=EXACT, objective="none", align_weight=0.0, sim_weight=0.0,
                      teacher_loss="mse+nce", teacher_proj="none", batch_items=True, batch_size=16,
                      max_train_pairs=600, lr=1e-4, warmup_steps=5, max_steps=40, eval_every=40, checkpoint_every=20,
                      keep_model="last", valid_pairs=100,
                      model=dict(vocab_size=250002, n_layers=1, d_model=384, n_heads=12, d_ff=1536, max_len=128,
                                 dropout=0.0))
    train(cfg, progress=False)
    start, tok, _ = load_model(whole)
    run = load_model(tmp_path / "run" / "model")[0]
    assert torch.equal(run.tok_emb.weight, start.tok_emb.weight)  # frozen: still e5's rows, a student of e5
    pairs = list(read_pairs("sample", split="test"))[:300]
    read_tiered(start, EXACT)
    read_tiered(run, EXACT)
    before, after = held_out_p1(start, tok, pairs), held_out_p1(run, tok, pairs)
    assert after > before + 0.05, (before, after)

    record = build_folder(tmp_path / "run" / "model", tmp_path / "bundle", rows=EXACT, table="tiered",
                          max_bytes=10**9)
    assert record["folder"] == "model" and record["table"]["exact_rows"] == EXACT
    assert record["parity"]["formats"]["onnx-int8"]["cosine_mean"] >= 0.99


def test_the_trained_rows_move_through_the_rounding_when_the_table_is_not_frozen(whole, tmp_path):
    """Without freeze_table the rows learn too (straight-through): the looked-up rows move, the rest do not (no
    weight decay here: a decay moves every row)."""
    from edge_xsent.encode.bundle import load_model
    from edge_xsent.train.loop import train

    cfg = tiny_config(tmp_path / "run", init=str(whole), teacher=str(whole), teacher_cache=str(tmp_path / "cache"),
                      table_exact_rows=EXACT, objective="none", align_weight=0.0, sim_weight=0.0,
                      teacher_proj="none", batch_items=True, batch_size=8, max_train_pairs=100, lr=1e-3, weight_decay=0.0,
                      warmup_steps=1, max_steps=3, eval_every=3, checkpoint_every=3, keep_model="last",
                      valid_pairs=20, model=dict(vocab_size=250002, n_layers=1, d_model=384, n_heads=12, d_ff=1536,
                                                 max_len=128, dropout=0.0))
    train(cfg, progress=False)
    start = load_model(whole)[0].tok_emb.weight
    moved = (load_model(tmp_path / "run" / "model")[0].tok_emb.weight != start).any(1)
    assert 0 < int(moved.sum()) < 20_000 and bool(moved[EXACT:].any())  # rows of both tiers, only those read


def test_a_carried_run_leaves_its_frozen_table_behind_and_resumes_on_a_bare_machine(whole, tmp_path):
    """carry save of a frozen-table run holds no table (e5's rows are 384 MB; the blocks are what moved); restored on
    a machine whose run folder is gone, the same recipe resumes at the carried step with its init's table."""
    import shutil

    from edge_xsent.encode.bundle import load_model
    import carry
    from edge_xsent.train.loop import train

    def recipe(**more):
        return tiny_config(tmp_path / "run", init=str(whole), teacher=str(whole), teacher_cache=str(tmp_path / "cache"),
                           freeze_table=True, table_exact_rows=EXACT, objective="none", align_weight=0.0,
                           sim_weight=0.0, teacher_proj="none", batch_items=True, batch_size=8, max_train_pairs=100,
                           warmup_steps=1, max_steps=4, eval_every=4, checkpoint_every=2, keep_model="last",
                           valid_pairs=20, model=dict(vocab_size=250002, n_layers=1, d_model=384, n_heads=12,
                                                      d_ff=1536, max_len=128, dropout=0.0), **more)
    train(recipe(pause_at=2), progress=False)
    meta = carry.save(tmp_path / "run", tmp_path / "carried")
    assert meta["left_out"] == ["model.tok_emb.weight"] and meta["step"] == 2
    assert (tmp_path / "carried" / carry.WEIGHTS).stat().st_size < 20 * 2**20
    shutil.rmtree(tmp_path / "run")  # the machine came back bare: only the init is rebuilt
    carry.restore(tmp_path / "carried", tmp_path / "run")
    summary = train(recipe(), progress=False)
    assert summary["steps"] == 4
    assert torch.equal(load_model(tmp_path / "run" / "model")[0].tok_emb.weight, load_model(whole)[0].tok_emb.weight)


@pytest.mark.lab
def test_inputs_builds_the_start_once(student_file, tmp_path):
    """train/table_aware.py inputs: the recipe's datasets ready (here the sample) and the start's folder written
    where missing, then left alone."""
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'data = "sample"\nout = "{tmp_path / "run"}"\ninit = "{tmp_path / "start"}"\n'
                      '[ship]\ndata = "sample"\nparts = ["speed"]\n')
    cmd = [sys.executable, str(ROOT / "train" / "table_aware.py"), "inputs", "--config", str(recipe),
           "--student", str(student_file)]
    first = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert first.returncode == 0, first.stderr
    made = (tmp_path / "start" / "manifest.json").stat().st_mtime_ns
    again = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert again.returncode == 0 and "ready" in again.stdout
    assert (tmp_path / "start" / "manifest.json").stat().st_mtime_ns == made


@pytest.mark.lab
def test_student_folder_takes_e5_small_by_name_and_checks_every_other_path(tmp_path):
    """`student_folder.py e5-small` (e5's own 12 blocks as a folder, the speed clause's peer) was refused as a
    missing file by the path check; the name is taken, and a missing file is still one error."""
    from edge_xsent.paths import Role, command_scope, path_arg

    student_arg = path_arg(Role("input", literal="e5-small"))  # train/student_folder.py's type for its student
    assert "literal=\"e5-small\")" in (ROOT / "train/student_folder.py").read_text()
    with command_scope():
        assert student_arg("e5-small") == "e5-small"
        with pytest.raises(Exception, match="no such file"):
            student_arg(str(tmp_path / "student-9block.safetensors"))


def test_a_language_pack_keeps_the_pieces_its_languages_use_first(whole):
    """kept_rows: the specials, the prefix's pieces and punctuation's, then the pieces of the languages' frequent words
    (wordfreq), heaviest first; Spanish words' pieces are kept for an es pack and lose to Japanese ones in a ja pack."""
    from edge_xsent.encode.bundle import load_model
    from edge_xsent.train import langpack
    from edge_xsent.train.langpack import kept_rows, language_pieces

    tok = load_model(whole)[1]
    kept = kept_rows(tok, ["en", "es"], 6000, words=3000)
    assert len(kept) == 6000 and kept == sorted(kept) and {0, 1, 2, 3, 4} <= set(kept)
    assert tok.sp.piece_to_id("▁--") in kept and tok.sp.piece_to_id(").") in kept  # punctuation alone, in no word list
    assert {tok.sp.id_to_piece(i) for i in langpack.text_frame(tok)} == {"<s>", "</s>", "▁passage", ":"}
    assert langpack.text_frame(tok) <= set(kept)
    spanish = set(tok.encode(["¿Dónde está la casa de mi madre? Lo sé, pero no quiero ir."])[0])
    covered = len(spanish & set(kept)) / len(spanish)
    assert covered >= 0.9 and len(spanish & set(kept_rows(tok, ["ja"], 6000, words=3000))) / len(spanish) < covered
    heavy = language_pieces(tok, ["es"], words=3000)
    assert tok.sp.id_to_piece(heavy[0]).lower() in {"▁de", "▁la", "▁que", "▁el", "▁en", "▁", "s", ","}
    with pytest.raises(UserError, match="xx: wordfreq has no word list"):
        language_pieces(tok, ["xx"], words=10)


def test_export_languages_makes_a_pack_every_stack_loads_and_refuses_other_settings(whole, tmp_path):
    """`edge-xsent export MODEL --languages en,es --out DIR`: a cut table of e5's own rows within the budget, its
    languages in config.json and the card, loading by Encoder.load (onnxruntime) with translations nearby; the
    export's table settings beside --languages are one error."""
    import json

    from click.testing import CliRunner

    from edge_xsent import Encoder
    from edge_xsent.cli import main
    from edge_xsent.train import student

    import os
    import shutil

    from edge_xsent.paths import owning
    from edge_xsent.encode.bundle import refresh_manifest

    res = CliRunner().invoke(main, ["export", str(whole), "--languages", "en,es", "--table-bits", "4"])
    assert res.exit_code != 0 and "leave out --fuse" in res.output and "Traceback" not in res.output
    source = tmp_path / "source"  # the start, claiming English and German (as a shipped card claims languages)
    shutil.copytree(whole, source, copy_function=os.link)
    config = json.loads((source / "config.json").read_text())
    (source / "config.json").unlink()  # a file of its own, not the fixture's through the link
    (source / "config.json").write_text(json.dumps({**config, "langs": ["en", "de"]}))
    with owning(source):
        refresh_manifest(source, ["config.json"])
    record = student.build_pack(source, ["es", "en"], tmp_path / "pack", max_bytes=6_000_000)
    assert record["languages"] == ["en", "es"] and record["graph_bytes"] <= 6_000_000
    assert record["claimed"] == ["en"] and record["pack"]["kept"] == ["en", "es"]  # Spanish kept, not claimed
    config = json.loads((tmp_path / "pack" / "config.json").read_text())
    assert config["langs"] == ["en"] and config["model"]["table_rows"] == record["table"]["rows"]
    texts = ["Where is my mother's house?", "¿Dónde está la casa de mi madre?", "I like green apples."]
    pack, full = Encoder.load(tmp_path / "pack").encode(texts), Encoder.load(whole, backend="torch").encode(texts)
    cosines = (pack * full).sum(1)  # its languages read nearly as with the whole table, on this budget's few rows
    assert cosines.min() > 0.9 and cosines.mean() > 0.97, cosines


def test_a_run_started_before_the_controls_were_dropped_ships_with_them_dropped(whole, tmp_path):
    """A table-aware run's tokenizer is its start's: a start made before the students' map dropped NUL (2026-12-07,
    issue 104) gave a run whose folder kept it. load_whole completes the map, so the folder that ships drops it."""
    import json
    import os
    import shutil

    from edge_xsent.paths import owning
    from edge_xsent.encode.bundle import refresh_manifest
    from edge_xsent.train.student import load_whole

    old = tmp_path / "old-start"
    shutil.copytree(whole, old, copy_function=os.link)
    rules = json.loads((old / "tokenizer_rules.json").read_text())
    del rules["char_map"]["0"]
    (old / "tokenizer_rules.json").unlink()  # its own file, not the fixture's through the link
    (old / "tokenizer_rules.json").write_text(json.dumps(rules))
    with owning(old):
        refresh_manifest(old, ["tokenizer_rules.json"])
    _, tok, _ = load_whole(old)
    assert tok.rules.char_map[0] == "" and tok.encode(["Hello\0world"]) == tok.encode(["Helloworld"])
