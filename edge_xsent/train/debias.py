"""Remove the language-identity subspace from a trained model's sentence vectors.

A shared encoder trained on pairs that are always English on one side can learn a direction
that says "English or not": translations then rank first within one language's candidates
(P@1 is fine) yet score low in absolute terms, and in a pool of mixed languages a sentence's
same-language neighbours beat its translation. Following Xie et al. (2022, "Discovering
low-rank subspaces for language-agnostic multilingual representations"), the per-language
means of the (normalised) training vectors span that subspace; projecting it out is one
fixed linear map, stored in the model (`lang_basis`) so every backend and export applies it.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

from edge_xsent.errors import UserError


AUTO_RANK = 0.5  # --rank auto: every direction whose singular value is at least this fraction of the largest


def language_subspace(vectors: dict[str, np.ndarray], rank: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Per-language vectors (n_l, d) -> orthonormal basis (rank, d) of the centred language
    means, and all singular values (how much each direction separates the languages). Rank None:
    `auto_rank` of the spectrum (one direction for nine European languages; more for many, whose
    means spread over several)."""
    if len(vectors) < 2:
        raise UserError(f"a language subspace needs at least two languages, got {sorted(vectors)}")
    if rank is not None and not 1 <= rank < len(vectors):
        raise UserError(f"--rank must be between 1 and {len(vectors) - 1} (languages - 1), got {rank}")
    means = np.stack([v.mean(0) for v in vectors.values()])
    _, sv, vt = np.linalg.svd(means - means.mean(0), full_matrices=False)
    return vt[:rank or auto_rank(sv)].astype(np.float32), sv


def auto_rank(sv: np.ndarray) -> int:
    """Directions whose singular value is at least AUTO_RANK x the largest (at least one)."""
    return max(1, int((sv >= AUTO_RANK * sv[0]).sum()))


def sample_sentences(pairs, per_lang: int, seed: int = 0) -> dict[str, list[str]]:
    """Up to `per_lang` sentences per language, drawn uniformly (not the first ones: corpora are
    ordered by source)."""
    by_lang: dict[str, list[str]] = defaultdict(list)
    for p in pairs:
        by_lang[p.lang_a].append(p.a)
        by_lang[p.lang_b].append(p.b)
    rng = np.random.default_rng(seed)
    return {lang: [s[i] for i in sorted(rng.choice(len(s), min(per_lang, len(s)), replace=False))]
            for lang, s in sorted(by_lang.items())}


def debias_model(model_dir: Path, data: str | Path, out: Path, rank: int | None = 1, per_lang: int = 3000,
                 seed: int = 0) -> dict:
    """Estimate the subspace on `data`'s train split and write `out`, a model folder whose
    forward pass removes it (rank None: `auto_rank`). Returns what was measured (also stored in
    training.json)."""
    import torch

    from edge_xsent.encode.bundle import load_model, read_training, resolve_model_dir, save_model
    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.encode.encoder import Encoder
    from edge_xsent.encode.model import DualEncoder, EncoderConfig

    model_dir = resolve_model_dir(model_dir)
    model, tokenizer, config = load_model(model_dir)
    if model.cfg.lang_subspace:
        raise UserError(f"{model_dir} already removes a language subspace (rank {model.cfg.lang_subspace}); "
                        "debias the model it was made from")
    enc = Encoder.from_model(model, tokenizer, config)
    sentences = sample_sentences(read_pairs(data, split="train"), per_lang, seed)
    with warnings.catch_warnings():  # long sentences are truncated as in training: expected here
        warnings.simplefilter("ignore")
        vectors = {lang: enc.encode(s, batch_size=64) for lang, s in sentences.items()}
    basis, sv = language_subspace(vectors, rank)
    chosen = len(basis)
    debiased = DualEncoder.for_weights(EncoderConfig.from_dict({**model.cfg.to_dict(), "lang_subspace": chosen}))
    state = model.state_dict()
    state["lang_basis"] = torch.from_numpy(basis)
    debiased.load_state_dict(state)
    info = {"rank": chosen, **({"rank_rule": f"auto: singular values >= {AUTO_RANK} x the largest"} if rank is None else {}),
            "data": str(data), "sentences_per_language": {k: len(v) for k, v in sentences.items()},
            "singular_values": [round(float(x), 4) for x in sv]}
    training = {k: v for k, v in read_training(model_dir).items() if k not in ("python", "torch")}
    save_model(Path(out), debiased, tokenizer, config.get("langs", []), {**training, "language_subspace": info})
    return info
