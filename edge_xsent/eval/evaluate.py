"""Cross-lingual sentence retrieval (XSR / bitext retrieval), as in LASER's evaluation.

For each language pair: N source sentences are queries, and every target sentence of the
set (plus optional distractors) is a candidate. P@1 in both directions, scored with plain
cosine and with the ratio margin of Artetxe & Schwenk (k = 4):
    margin(x, y) = cos(x, y) / ((mean cos of x's k NN + mean cos of y's k NN) / 2)
An answer counts as right by index (the aligned sentence) or, more leniently, by text
(any candidate with the same normalised text; duplicates are common in software text).

Similarities are computed in blocks of queries, so 200k candidates fit in a few hundred MB.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence, TypeVar

import numpy as np

from edge_xsent.data.corpus import Pair
from edge_xsent.errors import UserError
from edge_xsent.inputs import read_json
from edge_xsent.text import normalize

Embed = Callable[[Sequence[str]], np.ndarray]  # list of str -> (n, dim) L2-normalised float32
T = TypeVar("T")


@dataclass
class Retrieval:
    n_queries: int
    n_candidates: int
    p1_cosine: float
    p1_margin: float
    p1_cosine_text: float
    p1_margin_text: float


def knn_mean(x: np.ndarray, y: np.ndarray, k: int, block: int = 1024) -> np.ndarray:
    """Mean cosine of each row of x to its k nearest rows of y."""
    k = min(k, len(y))
    out = np.empty(len(x), dtype=np.float32)
    for s in range(0, len(x), block):
        sims = x[s: s + block] @ y.T
        out[s: s + block] = np.partition(sims, -k, axis=1)[:, -k:].mean(1)
    return out


def top1(q: np.ndarray, c: np.ndarray, k: int = 4, block: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """Index of each query's best candidate, by cosine and by ratio margin."""
    q_knn = knn_mean(q, c, k)
    c_knn = knn_mean(c, q, k)
    best_cos = np.empty(len(q), dtype=np.int64)
    best_margin = np.empty(len(q), dtype=np.int64)
    for s in range(0, len(q), block):
        sims = q[s: s + block] @ c.T  # (b, m)
        best_cos[s: s + block] = sims.argmax(1)
        best_margin[s: s + block] = (sims / ((q_knn[s: s + block, None] + c_knn[None, :]) / 2)).argmax(1)
    return best_cos, best_margin


def score(best_cos: np.ndarray, best_margin: np.ndarray, gold: np.ndarray, c_text: list[str]) -> Retrieval:
    """P@1 from the chosen candidates, by index and by (normalised) text."""
    c_norm = [normalize(t).casefold() for t in c_text]
    hits = {"cos": 0, "margin": 0, "cos_text": 0, "margin_text": 0}
    for bc, bm, g in zip(best_cos, best_margin, gold):
        hits["cos"] += bc == g
        hits["margin"] += bm == g
        hits["cos_text"] += c_norm[bc] == c_norm[g]
        hits["margin_text"] += c_norm[bm] == c_norm[g]
    n = max(len(gold), 1)
    return Retrieval(len(gold), len(c_text), hits["cos"] / n, hits["margin"] / n, hits["cos_text"] / n,
                     hits["margin_text"] / n)


def retrieve(q: np.ndarray, c: np.ndarray, gold: np.ndarray, q_text: list[str], c_text: list[str], k: int = 4,
             block: int = 512) -> Retrieval:
    """P@1 of queries q (n, d) among candidates c (m, d); gold[i] is the right candidate index."""
    return score(*top1(q, c, k, block), gold, c_text)


def by_language_pair(pairs: Sequence[Pair], value: Callable[[int, Pair], T]) -> list[tuple[tuple[str, str], list[T]]]:
    """`value(i, pair)` for every pair in corpus order, grouped by (lang_a, lang_b), groups sorted:
    the one order in which every evaluation walks the language pairs (and draws its queries)."""
    groups: dict[tuple[str, str], list[T]] = defaultdict(list)
    for i, p in enumerate(pairs):
        groups[(p.lang_a, p.lang_b)].append(value(i, p))
    return sorted(groups.items())


def cap_pairs(pairs: Sequence[Pair], per_pair: int, seed: int = 0) -> list[Pair]:
    """At most `per_pair` pairs of each language pair, drawn with a fixed seed, in corpus order.

    A smaller candidate pool, the same for every encoder: for peers too slow to embed a whole
    test split (e5-small at ~25 sentences/s). P@1 rises as candidates shrink, so compare
    encoders within one cap, never across caps."""
    if per_pair < 1:
        raise UserError(f"--max-pairs {per_pair}: use a positive number of pairs per language pair")
    rng = np.random.default_rng(seed)
    keep = [i for _, idx in by_language_pair(pairs, lambda i, p: i)
            for i in (rng.choice(idx, size=per_pair, replace=False) if len(idx) > per_pair else idx)]
    return [pairs[i] for i in sorted(keep)]


def xsr(pairs: Sequence[Pair], embed: Embed, max_queries: int = 2000, distractors: dict[str, list[str]] | None = None,
        seed: int = 0) -> dict[str, dict]:
    """Retrieval P@1 per language pair and direction.

    Candidates are all target sentences of the pair's set (and the distractors of that
    language); queries are `max_queries` source sentences drawn with a fixed seed.
    """
    results: dict[str, dict] = {}
    rng = np.random.default_rng(seed)
    for (la, lb), items in by_language_pair(pairs, lambda i, p: p):
        a_text, b_text = [p.a for p in items], [p.b for p in items]
        ea, eb = embed(a_text), embed(b_text)
        qi = np.sort(rng.choice(len(items), size=min(max_queries, len(items)), replace=False))
        for src, tgt, e_src, e_tgt, s_text, t_text in ((la, lb, ea, eb, a_text, b_text), (lb, la, eb, ea, b_text, a_text)):
            extra = (distractors or {}).get(tgt, [])
            cands = np.concatenate([e_tgt, embed(extra)]) if extra else e_tgt
            r = retrieve(e_src[qi], cands, qi, [s_text[i] for i in qi], t_text + list(extra))
            results[f"{src}->{tgt}"] = r.__dict__
    return results


def xsr_mixed(pairs: Sequence[Pair], embed: Embed, max_queries: int = 2000,
              distractors: dict[str, list[str]] | None = None, seed: int = 0) -> dict[str, dict]:
    """XSR where the query's own language competes: the candidates are every distinct sentence of
    the target language AND of the query's language in the set (less the queries themselves).

    This is multilingual search or deduplication, where a translation must beat sentences in the
    query's own language. Vectors that carry the language (an "English or not" direction) do
    well on `xsr` and fail here; `same_language_top1` is the share of queries whose nearest
    candidate is in their own language. Queries are the same as in `xsr` (same seed).
    """
    index: dict[tuple[str, str], int] = {}
    pool_text: list[str] = []
    pool_lang: list[str] = []

    def add(lang: str, text: str) -> int:
        key = (lang, normalize(text).casefold())
        if key not in index:
            index[key] = len(pool_text)
            pool_text.append(text)
            pool_lang.append(lang)
        return index[key]

    by_pair = by_language_pair(pairs, lambda i, p: (add(p.lang_a, p.a), add(p.lang_b, p.b)))
    for lang, texts in (distractors or {}).items():
        for t in texts:
            add(lang, t)
    emb = embed(pool_text)
    langs = np.array(pool_lang)
    rng = np.random.default_rng(seed)
    results: dict[str, dict] = {}
    for (la, lb), ids in by_pair:
        ids_arr = np.array(ids)
        qi = np.sort(rng.choice(len(ids_arr), size=min(max_queries, len(ids_arr)), replace=False))
        for src, tgt, q_ids, gold in ((la, lb, ids_arr[qi, 0], ids_arr[qi, 1]), (lb, la, ids_arr[qi, 1], ids_arr[qi, 0])):
            keep = (langs == src) | (langs == tgt)
            keep[q_ids] = False
            cand = np.flatnonzero(keep)
            new_index = np.cumsum(keep) - 1
            best_cos, best_margin = top1(emb[q_ids], emb[cand])
            r = score(best_cos, best_margin, new_index[gold], [pool_text[i] for i in cand])
            same = float((langs[cand[best_cos]] == src).mean())
            results[f"{src}->{tgt}"] = {**r.__dict__, "same_language_top1": same}
    return results


def average(results: dict[str, dict], key: str = "p1_cosine") -> float:
    return float(np.mean([r[key] for r in results.values()])) if results else float("nan")


def format_xsr(results: dict[str, dict]) -> str:
    lines = [f"{'direction':10s} {'queries':>7s} {'cands':>7s} {'P@1 cos':>8s} {'P@1 margin':>10s} {'(by text)':>16s}"]
    for name, r in results.items():
        lines.append(f"{name:10s} {r['n_queries']:7d} {r['n_candidates']:7d} {100 * r['p1_cosine']:8.1f} "
                     f"{100 * r['p1_margin']:10.1f} {100 * r['p1_cosine_text']:7.1f} /{100 * r['p1_margin_text']:6.1f}")
    lines.append(f"{'average':10s} {'':7s} {'':7s} {100 * average(results):8.1f} {100 * average(results, 'p1_margin'):10.1f}"
                 f" {100 * average(results, 'p1_cosine_text'):7.1f} /{100 * average(results, 'p1_margin_text'):6.1f}")
    if all("same_language_top1" in r for r in results.values()):
        lines.append(f"nearest candidate in the query's own language: {100 * average(results, 'same_language_top1'):.1f} % of queries")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- zero-shot classification

def package_split(package: str) -> str:
    """60 / 20 / 20 train / dev / test by a hash of the package name: a document and all its
    translations stay on one side."""
    import hashlib

    # Salted: the corpus builder samples packages by the unsalted hash, which would skew this split.
    x = int.from_bytes(hashlib.sha256(b"classify-split:" + package.encode()).digest()[:4], "big") / 2**32
    return "train" if x < 0.6 else "dev" if x < 0.8 else "test"


def train_logreg(x: np.ndarray, y: np.ndarray, n_classes: int, weight_decay: float, seed: int,
                 steps: int = 300, lr: float = 0.05):
    """Multinomial logistic regression, full-batch Adam in numpy (tiny problem: no torch
    thread pool needed); returns a predict function."""
    rng = np.random.default_rng(seed)
    W = rng.normal(0, 0.01, (x.shape[1], n_classes)).astype(np.float32)
    b = np.zeros(n_classes, np.float32)
    onehot = np.eye(n_classes, dtype=np.float32)[y]
    m = [np.zeros_like(W), np.zeros_like(b)]
    v = [np.zeros_like(W), np.zeros_like(b)]
    for t in range(1, steps + 1):
        z = x @ W + b
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        d = (p - onehot) / len(x)
        grads = [x.T @ d + weight_decay * W, d.sum(0)]
        for i, (param, g) in enumerate(zip((W, b), grads)):
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            param -= lr * (m[i] / (1 - 0.9**t)) / (np.sqrt(v[i] / (1 - 0.999**t)) + 1e-8)
    return lambda z: (z @ W + b).argmax(1)


def classify(rows: Sequence[tuple[str, str, str, str]], embed: Embed, source_lang: str = "en", seeds: int = 5,
             weight_decays: Sequence[float] = (0.0, 1e-4, 1e-3, 1e-2)) -> dict:
    """MLDoc-style zero-shot transfer: fit on `source_lang` train docs, select on its dev docs,
    test on every language's test docs. Accuracy per language, mean (and std) over seeds."""
    labels = sorted({r[1] for r in rows})
    label_id = {l: i for i, l in enumerate(labels)}
    parts: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for pkg, label, lang, text in rows:
        parts.setdefault((package_split(pkg), lang), []).append((text, label_id[label]))
    if ("train", source_lang) not in parts or ("dev", source_lang) not in parts:
        raise UserError(f"the classification set has no {source_lang} documents in its train and dev packages to "
                        f"train on; it needs {source_lang} descriptions (build the corpus with the DDTP source)")
    vec = {k: (embed([t for t, _ in v]), np.array([y for _, y in v])) for k, v in parts.items()}
    xtr, ytr = vec[("train", source_lang)]
    xdev, ydev = vec[("dev", source_lang)]
    test_langs = sorted(l for s, l in vec if s == "test")
    acc: dict[str, list[float]] = {l: [] for l in test_langs}
    chosen = []
    for seed in range(seeds):
        best = max(((float((f(xdev) == ydev).mean()), wd, f) for wd in weight_decays
                    for f in [train_logreg(xtr, ytr, len(labels), wd, seed)]), key=lambda t: t[0])
        chosen.append(best[1])
        for lang in test_langs:
            x, y = vec[("test", lang)]
            acc[lang].append(float((best[2](x) == y).mean()))
    return {"labels": labels, "source_lang": source_lang, "seeds": seeds, "weight_decay_chosen": chosen,
            "n_train": len(ytr), "n_dev": len(ydev),
            "accuracy": {f"{source_lang}->{l}": {"mean": float(np.mean(a)), "std": float(np.std(a)),
                                                 "n_test": int(len(vec[("test", l)][1]))} for l, a in acc.items()}}


def format_classify(res: dict) -> str:
    lines = [f"{len(res['labels'])} labels, trained on {res['n_train']} {res['source_lang']} docs, "
             f"selected on {res['n_dev']}, mean of {res['seeds']} seeds",
             f"{'direction':10s} {'accuracy':>9s} {'± std':>7s} {'test docs':>9s}"]
    for name, a in res["accuracy"].items():
        lines.append(f"{name:10s} {100 * a['mean']:9.1f} {100 * a['std']:7.1f} {a['n_test']:9d}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- side by side

def format_side_by_side(scores: dict[str, dict[str, float]], info: dict[str, str] | None = None,
                        title: str = "encoder", mean: bool = True) -> str:
    """One row per encoder (ours and the peers), one column per direction, then the mean (unless
    the columns are already summaries); in %."""
    columns = list(next(iter(scores.values())))
    width = max(len(title), *(len(k) for k in scores))
    info = info or {}
    iw = max([len(v) for v in info.values()] + [0])
    lines = [f"{title:{width}s} {'':{iw}s} " + " ".join(f"{c:>7s}" for c in columns) + (f" {'mean':>6s}" if mean else "")]
    for name, row in scores.items():
        vals = [row.get(c, float("nan")) for c in columns]
        cells = " ".join(f"{100 * v:7.1f}" for v in vals)
        lines.append(f"{name:{width}s} {info.get(name, ''):{iw}s} {cells}"
                     + (f" {100 * float(np.nanmean(vals)):6.1f}" if mean else ""))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- out-of-genre benchmark

def out_of_genre(pairs: Sequence[Pair], embed: Embed, max_pairs: int = 1000, max_queries: int = 1000,
                 min_pairs: int = 100, seed: int = 0, below: int | None = None) -> dict[str, dict]:
    """Retrieval P@1 (cosine) on a reserved benchmark, per source and direction.

    Each source is its own candidate pool (a sky-culture sentence competes with other star lore,
    a research-report sentence with other reports), capped at `max_pairs` pairs per language pair
    so that every encoder, the slow peers included, sees the same pools. A language pair with
    fewer than `min_pairs` pairs in a source is left out: so few candidates make P@1 trivial. `below`
    keeps only the language pairs with fewer pairs than that: the small pools a usual run leaves out,
    reported apart (their P@1 is not comparable with larger pools')."""
    results: dict[str, dict] = {}
    for source in sorted({p.source for p in pairs}):
        subset = [p for p in pairs if p.source == source]
        sizes = Counter((p.lang_a, p.lang_b) for p in subset)
        subset = [p for p in subset if min_pairs <= sizes[(p.lang_a, p.lang_b)] < (below or len(subset) + 1)]
        if subset:
            results[source] = {d: r["p1_cosine"] for d, r in xsr(cap_pairs(subset, max_pairs, seed), embed, max_queries,
                                                                  seed=seed).items()}
    if not results:
        within = f"{min_pairs} to {below - 1}" if below else f"{min_pairs}"
        raise UserError(f"no source has {within} pairs in any language pair; lower --min-pairs or build the "
                        "benchmark with more languages")
    return results


def language_means(cells: Iterable[tuple[str, float]], digits: int | None = 2) -> dict[str, float]:
    """{language: mean P@1 in points} of (direction, P@1) cells: en->fr and fr->en are both fr's, of every
    source given; the one way every figure, card and table turns directions into languages."""
    by_lang: dict[str, list[float]] = {}
    for direction, v in cells:
        by_lang.setdefault(direction.replace("en->", "").replace("->en", ""), []).append(v)
    means = {lang: 100 * sum(v) / len(v) for lang, v in sorted(by_lang.items())}
    return means if digits is None else {lang: round(m, digits) for lang, m in means.items()}


def out_of_genre_means(retrieval: dict[str, dict[str, float]]) -> dict:
    """An out_of_genre result in points: the mean over every cell (source x direction), and per language
    (both directions with English, every source): what a candidate's figures and the layer table read."""
    cells = [v for d in retrieval.values() for v in d.values()]
    return {"mean": round(100 * sum(cells) / len(cells), 2),
            "by_language": language_means(cell for d in retrieval.values() for cell in d.items())}


def peer_oog(path: str | Path, label: str) -> dict:
    """One peer's record in an `eval oog --peers ... --json` file, as out_of_genre_means: the figures the
    pruned student's rule (decisions.student_*) reads for multilingual-e5-small."""
    try:
        retrieval = read_json(path, what="figures file")[label]["retrieval"]
    except (FileNotFoundError, KeyError, TypeError, UserError) as e:
        raise UserError(f"{path}: no {label} record ({type(e).__name__}: {e}); make it with `edge-xsent eval oog "
                        "--data DATA --peers e5-small --no-agreement --json`") from None
    return out_of_genre_means(retrieval)


def neighbour_agreement(texts: Sequence[str], student: np.ndarray, teacher: np.ndarray, k: int = 10) -> float:
    """Mean share of each text's k nearest neighbours (itself excluded) that student and teacher
    agree on: how much of the teacher's sense of similarity the student keeps, with no translation."""
    if len(texts) <= k:
        raise UserError(f"neighbour agreement needs more than k={k} texts, got {len(texts)}")
    overlap = 0.0
    for s in range(0, len(texts), 512):
        nn = []
        for vecs in (student, teacher):
            sims = vecs[s: s + 512] @ vecs.T
            sims[np.arange(len(sims)), np.arange(s, s + len(sims))] = -np.inf  # not itself
            nn.append(np.argpartition(-sims, k, axis=1)[:, :k])
        overlap += sum(len(set(a) & set(b)) for a, b in zip(*nn))
    return overlap / (k * len(texts))


def agreement_texts(pairs: Sequence[Pair], per_lang: int = 1000, seed: int = 0) -> dict[str, list[str]]:
    """Distinct sentences of each language of a benchmark (both sides of its pairs), a seeded sample."""
    by_lang: dict[str, dict[str, str]] = defaultdict(dict)
    for p in pairs:
        for lang, text in ((p.lang_a, p.a), (p.lang_b, p.b)):
            by_lang[lang].setdefault(normalize(text).casefold(), text)
    rng = np.random.default_rng(seed)
    out = {}
    for lang, texts in sorted(by_lang.items()):
        items = sorted(texts.values())
        take = sorted(rng.choice(len(items), size=min(per_lang, len(items)), replace=False))
        out[lang] = [items[i] for i in take]
    return out


def teacher_agreement(texts: dict[str, list[str]], embed: Embed, teacher: Embed, k: int = 10) -> dict[str, float]:
    """neighbour_agreement per language (languages with too few texts are left out)."""
    return {lang: neighbour_agreement(t, embed(t), teacher(t), k) for lang, t in texts.items() if len(t) > 5 * k}


OOG_AGREEMENT_WEIGHT = 0.3  # studies/shipping-history/out-of-genre-default.md: the weight fixed before its runs


def out_of_genre_score(retrieval: float, agreement: float) -> float:
    """`edge-xsent eval oog`'s score, 0.7 x reserved-source P@1 + 0.3 x teacher neighbour agreement (fractions)."""
    return (1 - OOG_AGREEMENT_WEIGHT) * retrieval + OOG_AGREEMENT_WEIGHT * agreement


def format_out_of_genre(res: dict) -> str:
    lines = []
    for source, dirs in res["retrieval"].items():
        lines.append(f"{source}: " + "  ".join(f"{d} {100 * v:.1f}" for d, v in dirs.items())
                     + f"  | mean {100 * float(np.mean(list(dirs.values()))):.1f}")
    if res.get("agreement"):
        lines.append(f"teacher agreement (k={res['k']}): " + "  ".join(f"{l} {100 * v:.1f}" for l, v in res["agreement"].items()))
    lines.append(f"reserved P@1 {100 * res['retrieval_mean']:.1f}"
                 + (f", teacher agreement {100 * res['agreement_mean']:.1f}" if res.get("agreement") else "")
                 + (f", score {100 * res['score']:.1f}" if res.get("score") is not None else ""))
    return "\n".join(lines)
