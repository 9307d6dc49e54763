"""`Encoder`: the inference API over a model folder (or, later, an exported bundle).

    enc = Encoder.load("runs/default/model")
    vecs = enc.encode(["Hello world", "Bonjour le monde"])   # (2, dim) float32, L2-normalised

Shape rules as in sentence-transformers: str -> (dim,), list -> (n, dim), [] -> (0, dim).
Batches are formed after sorting by length (less padding), and the original order is
restored. Never touches the network.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm import tqdm

from .bundle import load_model
from .errors import UserError
from .tokenizer import PAD_ID


class Encoder:
    def __init__(self, model, tokenizer, config: dict, path: Path):
        self.model, self.tokenizer, self.config, self.path = model, tokenizer, config, path
        self.max_len = model.cfg.max_len
        self.dim = model.cfg.d_model
        self.langs = config.get("langs", [])

    @classmethod
    def load(cls, path: str | Path, threads: int | None = None, verify: bool = True) -> "Encoder":
        path = Path(path)
        if path.is_dir() and not (path / "config.json").exists() and (path / "model" / "config.json").exists():
            path = path / "model"  # a training output folder
        model, tok, config = load_model(path, verify_checksums=verify)
        if threads:
            torch.set_num_threads(threads)
        return cls(model, tok, config, path)

    def tokenize(self, sentences: Sequence[str]) -> list[list[int]]:
        ids = self.tokenizer.encode(sentences)
        long = sum(len(x) > self.max_len for x in ids)
        if long:
            warnings.warn(f"{long} sentence(s) longer than {self.max_len} tokens were truncated", stacklevel=3)
        return [x[: self.max_len] for x in ids]

    @torch.inference_mode()
    def encode(self, sentences: str | Sequence[str], batch_size: int = 32, normalize: bool = True,
               show_progress: bool = False) -> np.ndarray:
        single = isinstance(sentences, str)
        items = [sentences] if single else _check_items(sentences)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        if items:
            ids = self.tokenize(items)
            order = np.argsort([-len(x) for x in ids], kind="stable")
            for start in tqdm(range(0, len(order), batch_size), disable=not show_progress, desc="encode", unit="batch"):
                idx = order[start: start + batch_size]
                out[idx] = self._embed([ids[i] for i in idx])
            if normalize:
                norms = np.linalg.norm(out, axis=1, keepdims=True)
                out = out / np.maximum(norms, 1e-12)
        return out[0] if single else out

    def _embed(self, batch: list[list[int]]) -> np.ndarray:
        T = max(1, max(len(x) for x in batch))
        ids = torch.full((len(batch), T), PAD_ID, dtype=torch.long)
        for i, x in enumerate(batch):
            ids[i, : len(x)] = torch.tensor(x, dtype=torch.long)
        return self.model(ids, (ids != PAD_ID).long()).float().numpy()


def _check_items(sentences) -> list[str]:
    if isinstance(sentences, (bytes, bytearray)):
        raise UserError("encode() takes str or a list of str, got bytes: decode it first, e.g. text.decode('utf-8')")
    try:
        items = list(sentences)
    except TypeError as e:
        raise UserError(f"encode() takes str or a list of str, got {type(sentences).__name__}") from e
    for i, s in enumerate(items):
        if not isinstance(s, str):
            raise UserError(f"encode(): item {i} is {type(s).__name__}, not str; convert it with str() or drop it")
    return items
