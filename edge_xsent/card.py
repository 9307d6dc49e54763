"""The model card (README.md of a bundle or of the shipped default), written in one place from a
dict of figures. `edge-xsent export` fills the common part (model, files, parity); shipping
(train/ship_default.py) adds the sections its result files support. Every figure on a card
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


def parity_table(parity: dict) -> list[str]:
    return [f"## Parity against fp32 PyTorch ({parity['sentences']} real sentences, {parity['source']})", "",
            "| format | mean cosine | min cosine | XSR P@1 | P@1 drop |", "|---|---|---|---|---|",
            *[f"| {k} | {v['cosine_mean']:.5f} | {v['cosine_min']:.5f} | {100 * v['xsr_p1']:.1f} | "
              f"{100 * v['xsr_p1_drop']:+.1f} |" for k, v in parity["formats"].items()], ""]


def render(figures: dict) -> str:
    f = figures
    lines = [f"# {f['title']}", "", describe(f["config"]), "",
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
