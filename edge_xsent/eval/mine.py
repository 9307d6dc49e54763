"""Bitext mining with the ratio margin, as users of LASER expect.

    margin(x, y) = cos(x, y) / ((mean cos of x's k NN in T + mean cos of y's k NN in S) / 2)

The target side is embedded once and kept in memory; the source side is streamed in
chunks, its vectors spilled to a memory-mapped file, so a source file of any length needs
bounded memory. Two passes over the spilled vectors: the first collects each sentence's
k-NN means, the second scores. Retrieval modes:
  forward    each source sentence -> its best target
  backward   each target sentence -> its best source
  intersect  pairs found in both directions (the precise choice)
  max        forward and backward together, best score first, each sentence used once
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

Embed = Callable[[Sequence[str]], np.ndarray]
MODES = ("forward", "backward", "intersect", "max")


def _chunks(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    buf: list[str] = []
    for line in lines:
        buf.append(line)
        if len(buf) == size:
            yield buf
            buf = []
    if buf:
        yield buf


def _topk_mean(sims: np.ndarray, k: int) -> np.ndarray:
    k = min(k, sims.shape[1])
    return np.partition(sims, -k, axis=1)[:, -k:].mean(1)


def _check_fits(lines: int, dim: int) -> None:
    """The targets' vectors are held at once: more than half this machine's memory is one error naming the way out,
    not a MemoryError (ten million lines of a 384-wide model are 14.3 GiB)."""
    import os

    from edge_xsent.errors import UserError

    need, have = lines * dim * 4, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have // 2:
        raise UserError(f"the targets are {lines:,d} lines: their vectors, held at once, take {need / 2**30:.1f} GiB, "
                        f"more than half this machine's {have / 2**30:.1f} GiB; give the longer file as the source "
                        "(it is streamed), or split the targets")


def mine(src_lines: Iterable[str], tgt: Sequence[str], embed: Embed, mode: str = "intersect", k: int = 4,
         threshold: float = 1.05, chunk: int = 4096, workdir: Path | None = None) -> list[tuple[float, int, int]]:
    """(score, source line index, target index) pairs, best first."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if len(tgt) == 0:
        return []
    _check_fits(len(tgt), embed(list(tgt[:1])).shape[1])
    T = embed(list(tgt)).astype(np.float32, copy=False)
    m = len(T)
    chunk = max(1, min(chunk, int(2e8 // max(m, 1))))  # keep each (chunk, m) block near 800 MB at most
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        # Pass 0: embed the source side once, spilling vectors to disk.
        store = Path(tmp) / "src.f32"
        n = 0
        with open(store, "wb") as f:
            for block in _chunks(src_lines, chunk):
                f.write(embed(block).astype(np.float32).tobytes())
                n += len(block)
        if n == 0:
            return []
        S = np.memmap(store, dtype=np.float32, mode="r", shape=(n, T.shape[1]))
        # Pass 1: k-NN means. Source rows against all of T; each target's top-k over all of S.
        s_knn = np.empty(n, dtype=np.float32)
        t_top = np.full((m, min(k, n)), -np.inf, dtype=np.float32)
        for a in range(0, n, chunk):
            sims = np.asarray(S[a: a + chunk]) @ T.T  # (c, m)
            s_knn[a: a + chunk] = _topk_mean(sims, k)
            both = np.concatenate([t_top, sims.T], axis=1)
            t_top = np.partition(both, -t_top.shape[1], axis=1)[:, -t_top.shape[1]:]
        t_knn = t_top.mean(1)
        # Pass 2: margin scores; best target per source, and running best source per target.
        fwd_best = np.empty(n, dtype=np.int64)
        fwd_score = np.empty(n, dtype=np.float32)
        bwd_best = np.zeros(m, dtype=np.int64)
        bwd_score = np.full(m, -np.inf, dtype=np.float32)
        for a in range(0, n, chunk):
            sims = np.asarray(S[a: a + chunk]) @ T.T
            margin = sims / ((s_knn[a: a + chunk, None] + t_knn[None, :]) / 2)
            fwd_best[a: a + chunk] = margin.argmax(1)
            fwd_score[a: a + chunk] = margin.max(1)
            col_best = margin.argmax(0)
            col_score = margin[col_best, np.arange(m)]
            better = col_score > bwd_score
            bwd_score[better] = col_score[better]
            bwd_best[better] = col_best[better] + a
        del S
    forward = {(int(i), int(fwd_best[i])): float(fwd_score[i]) for i in range(n)}
    backward = {(int(bwd_best[j]), int(j)): float(bwd_score[j]) for j in range(m)}
    if mode == "forward":
        cand = forward
    elif mode == "backward":
        cand = backward
    elif mode == "intersect":
        cand = {p: s for p, s in forward.items() if p in backward}
    else:
        cand = {**backward, **forward}
    out, used_s, used_t = [], set(), set()
    for (i, j), s in sorted(cand.items(), key=lambda x: -x[1]):
        if s < threshold:
            break
        if mode == "max":
            if i in used_s or j in used_t:
                continue
            used_s.add(i)
            used_t.add(j)
        out.append((s, i, j))
    return out


def tsv_field(text: str) -> str:
    """A sentence as one TSV column: its tabs (and any line break) as spaces, as the model read it."""
    return " ".join(text.replace("\t", " ").splitlines())


def _check_rereadable(src: Path) -> None:
    """The source is read twice: a FIFO or a device would hang or differ the second time, so only a file will do
    (the targets, read once, may be a stream). A missing source is read_lines's to name."""
    import os

    from edge_xsent.inputs import open_regular

    if os.path.lexists(src):
        os.close(open_regular(src, "the source, which mine reads twice (its vectors, then the mined lines),"))


def mine_files(src: Path, tgt: Path, out: Path, embed: Embed, mode: str = "intersect", k: int = 4,
               threshold: float = 1.05) -> int:
    """Mine two text files (one sentence per line) into a TSV of score, source, target, written
    atomically. The source streams twice (vectors, then only the mined lines' text), so its
    length is bounded by disk; the targets are held in memory. Returns the number of pairs."""
    from edge_xsent.atomic import SPACE_ERRORS, atomic_write
    from edge_xsent.paths import FILE
    from edge_xsent.data.corpus import read_lines

    FILE.check(out, [src, tgt])
    _check_rereadable(src)
    targets = [line for _, line in read_lines(tgt)]
    out.parent.mkdir(parents=True, exist_ok=True)
    try:  # the source's vectors spill beside the output, on its disk: a full one is the output's error
        found = mine((line for _, line in read_lines(src)), targets, embed, mode=mode, k=k, threshold=threshold,
                     workdir=out.parent)
    except OSError as e:
        if e.errno in SPACE_ERRORS:
            raise OSError(e.errno, e.strerror, str(out)) from None
        raise
    wanted = {i for _, i, _ in found}
    src_text = {n - 1: line for n, line in read_lines(src) if n - 1 in wanted}
    with atomic_write(out) as f:
        for score, i, j in found:
            f.write(f"{score:.4f}\t{tsv_field(src_text[i])}\t{tsv_field(targets[j])}\n")
    return len(found)
