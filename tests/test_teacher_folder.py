"""Bring your own teacher: `--teacher` takes a local sentence-transformers or Hugging Face
model folder. The tests build a tiny BERT model themselves (random weights, a character
vocabulary), save it both ways, and check the vectors, the cache key and a training run."""

import importlib.util
import string

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from conftest import tiny_config
from edge_xsent.cli import main
from edge_xsent.errors import UserError
from edge_xsent.eval.peers import FolderModel, folder_hash, load_teacher
from edge_xsent.train.teacher import cache_folder, label

if importlib.util.find_spec("sentence_transformers") is None:  # found, not imported: 3 s per pytest worker at collection
    pytest.skip("needs the hf extra: pip install 'edge-xsent[hf]'", allow_module_level=True)
TEACHER_DIM = 24
SENTENCES = ["The cat sleeps on the warm roof.", "Le chat dort sur le toit chaud.", "Open the file menu.", "Hi"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(hf, st): a tiny BERT saved with save_pretrained, and the same model as a sentence-transformers
    folder (Transformer + mean Pooling)."""
    from sentence_transformers import SentenceTransformer
    try:
        from sentence_transformers.sentence_transformer import modules as models
    except ImportError:  # sentence-transformers before 6
        from sentence_transformers import models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    root = tmp_path_factory.mktemp("teachers")
    hf = root / "tiny-bert"
    hf.mkdir()
    chars = string.ascii_lowercase + string.digits + ".,!?'"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars)]
    (hf / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(hf / "vocab.txt"), do_lower_case=True).save_pretrained(hf)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=TEACHER_DIM, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=48, max_position_embeddings=128)
    BertModel(config).eval().save_pretrained(hf)
    st = root / "tiny-st"
    SentenceTransformer(modules=[models.Transformer(str(hf)), models.Pooling(TEACHER_DIM, "mean")]).save(str(st))
    return hf, st


def test_a_sentence_transformers_folder_gives_its_own_vectors(folders):
    from sentence_transformers import SentenceTransformer

    _, st = folders
    teacher = load_teacher(str(st), threads=1)
    assert isinstance(teacher, FolderModel) and teacher.dim == TEACHER_DIM
    ours = teacher.encode(SENTENCES, batch_size=3)  # batches formed by length, answers in input order
    ref = SentenceTransformer(str(st), device="cpu").encode(SENTENCES, normalize_embeddings=True)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)
    assert (ours * ref).sum(1).min() > 0.9999


def test_a_plain_hugging_face_folder_is_mean_pooled(folders):
    hf, st = folders
    plain, wrapped = load_teacher(str(hf)).encode(SENTENCES), load_teacher(str(st)).encode(SENTENCES)
    assert (plain * wrapped).sum(1).min() > 0.9999  # the same model under mean pooling, two loaders


def test_cache_key_follows_the_folder_contents(folders, tmp_path):
    import shutil

    _, st = folders
    copy = tmp_path / "tiny-st"
    shutil.copytree(st, copy)
    a = load_teacher(str(copy))
    assert a.key.startswith("tiny-st-") and a.version == folder_hash(copy)
    vecs, rows = label(SENTENCES, a, tmp_path / "cache", progress=False)
    assert (cache_folder(tmp_path / "cache", a.key) / "meta.json").exists()
    assert np.allclose(vecs[rows], a.encode(SENTENCES), atol=1e-5)
    weights = next(copy.rglob("*.safetensors"))  # another model under the same folder name: another key
    weights.write_bytes(weights.read_bytes()[:-4] + b"\0\0\0\0")
    assert folder_hash(copy) != a.version
    (copy / ".git").mkdir()  # hidden files (a git checkout of the model) do not count
    (copy / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert load_teacher(str(copy)).version == folder_hash(copy)


def test_training_distils_a_local_folder(folders, tmp_path):
    from edge_xsent.train.loop import train

    _, st = folders
    out = tmp_path / "run"
    cfg = tiny_config(out, objective="none", align_weight=0.0, sim_weight=0.0, teacher=str(st),
                      teacher_cache=str(tmp_path / "cache"), max_train_pairs=1000, max_steps=30, lr=1e-2,
                      eval_every=15)
    hist = train(cfg, progress=False)["history"]
    assert hist[-1]["val_teacher"] < hist[0]["val_teacher"]
    ckpt = torch.load(out / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["teacher_proj"]["weight"].shape == (TEACHER_DIM, 32)  # student d_model 32 -> the teacher's 24


def test_a_missing_or_broken_teacher_folder_is_a_clear_error(tmp_path):
    from edge_xsent.train.runfolder import check_run

    with pytest.raises(UserError, match="neither a peer"):
        check_run(tiny_config(tmp_path / "run", teacher=str(tmp_path / "no-such-model")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="not a loadable Hugging Face model folder"):
        load_teacher(str(tmp_path / "empty"))
    res = CliRunner().invoke(main, ["train", "--data", "sample", "--out", str(tmp_path / "r"), "--teacher",
                                    str(tmp_path / "no-such-model"), "--max-steps", "1"])
    assert res.exit_code != 0 and "neither a peer" in res.output and "Traceback" not in res.output
