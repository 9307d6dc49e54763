"""Export a model folder to an edge bundle, in the manner of onnxruntime's own examples:
export, check parity, quantise, check parity again.

Bundle layout (a superset of the model folder, so every backend loads from one place):
    config.json, model.safetensors, tokenizer.model, tokenizer.json, training.json
    onnx/model.onnx            fp32, dynamic batch and sequence axes; outputs sentence_embedding
                               and last_hidden_state (token states that mean-pool to it)
    onnx/model_int8.onnx       dynamic int8: MatMul and the embedding Gather, per channel, weights
                               stored as config.INT8_WEIGHTS says (the language projection's two
                               MatMuls stay fp32)
    torchscript/model.pt       traced + frozen (torch.jit.load)
    torchscript/model.ptl      lite-interpreter file
    parity.json                cosine of each format vs fp32 PyTorch, retrieval P@1 per format
    README.md                  model card
    manifest.json              SHA-256 of every file, versions, quantisation settings, parity
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn as nn

from edge_xsent import __version__
from edge_xsent.atomic import atomic_dir
from edge_xsent.encode.bundle import check_target, load_model, read_training, save_model, write_manifest
from edge_xsent.encode.tokenizer import pad_batch
from edge_xsent.layout import CARD, FILES, MANIFEST, float_weights, ONNX_FP32, ONNX_INT4, ONNX_INT8, PARITY, TS_FROZEN, TS_LITE
from edge_xsent.config import DEFAULT_INT8_ACTIVATIONS, DEFAULT_INT8_WEIGHTS, INT8_ACTIVATIONS, INT8_WEIGHTS, TABLE_BITS
from edge_xsent.data.corpus import Pair, read_pairs
from edge_xsent.errors import UserError
from edge_xsent.encode.model import DualEncoder, mean_pool
from edge_xsent.encode.tokenizer import Tokenizer



class SentenceEmbedder(nn.Module):
    """What ships: ids + mask -> sentence vectors (B, C), no generative head. With `tokens`, also
    the token states (B, T, C) whose masked mean is that vector (language subspace removed from
    each token): the `last_hidden_state` that optimum and transformers.js pool themselves."""

    def __init__(self, model: DualEncoder, tokens: bool = False):
        super().__init__()
        self.model = model
        self.tokens = tokens

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        states = self.model.remove_language(self.model.encode_tokens(input_ids, attention_mask))
        vectors = mean_pool(states, attention_mask)
        return (vectors, states) if self.tokens else vectors


def example_inputs(tok: Tokenizer, max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Real token ids, batch 3 with padding: zeros once hid an out-of-bounds Gather elsewhere."""
    texts = ["Open the file in a new window.", "Ouvrir le fichier dans une nouvelle fenêtre, puis l'enregistrer.",
             "Datei"]
    ids, mask = pad_batch([x[:max_len] for x in tok.encode(texts)])
    return torch.from_numpy(ids), torch.from_numpy(mask)


@contextlib.contextmanager
def quiet():
    """The exporters log chatter (missing torchvision, pre-processing hints) at WARNING."""
    loggers = [logging.getLogger(n) for n in ("", "torch", "torch.onnx", "onnxscript", "onnx_ir")]
    levels = [l.level for l in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for l in loggers:
            l.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for l, lv in zip(loggers, levels):
                l.setLevel(lv)


def export_onnx(model: DualEncoder, example: tuple[torch.Tensor, torch.Tensor], path: Path) -> None:
    """Inputs input_ids, attention_mask; outputs sentence_embedding and last_hidden_state."""
    path.parent.mkdir(parents=True, exist_ok=True)
    embedder = SentenceEmbedder(model, tokens=True).eval()
    batch, seq = torch.export.Dim("batch", min=1, max=4096), torch.export.Dim("sequence", min=1, max=model.cfg.max_len)
    with quiet():
        program = torch.onnx.export(
            embedder, example, dynamo=True, input_names=["input_ids", "attention_mask"],
            output_names=["sentence_embedding", "last_hidden_state"],
            dynamic_shapes={"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}},
            external_data=False, verbose=False)
    strip_stack_traces(program.model)
    program.save(str(path))


def strip_stack_traces(model: "onnx_ir.Model") -> None:
    """torch's exporter records each node's Python stack trace: the exporting machine's file paths
    (its home folder, its site-packages), in a file that ships. Only that metadata goes, before the
    graph is written (an onnx_ir.Model: no second read and write of a graph of hundreds of MB)."""
    for node in model.graph.all_nodes():
        node.metadata_props.pop("pkg.torch.onnx.stack_trace", None)


def quantize_int8(src: Path, dst: Path, keep_fp32: list[str] = (), weights: str = DEFAULT_INT8_WEIGHTS,
                  table_bits: int = 8, activations: str = DEFAULT_INT8_ACTIVATIONS, table_exact_rows: int = 0,
                  calibration: Sequence[tuple[np.ndarray, np.ndarray]] = ()) -> dict:
    """`keep_fp32`: node names left unquantised (`projection_nodes`); `weights`: a key of INT8_WEIGHTS;
    `activations`: "per-row" scales each row of a MatMul's input on its own (rowquant.py); "static" uses scales
    calibrated on `calibration`'s token batches, the first position apart (staticquant.py).
    `table_bits = 4`: the token table's Gather goes to 4 bits (`quantize_table_int4`) and only the MatMuls
    to int8. A table of 60,000 x 384 is 22 MB at int8 and 11.5 at 4 bits, and the lookup is cheap at
    any precision, where a 4-bit MatMul runs ~2.3x slower than int8 here (studies/pruned-student).
    `table_bits = 1`: a whole table kept tiered (tablequant.py): ids below `table_exact_rows` at 4 bits, every
    other id at 1 bit, decoded by standard operators."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if weights not in INT8_WEIGHTS:
        raise UserError(f"unknown int8 weights {weights!r}; choose from {', '.join(INT8_WEIGHTS)}")
    if table_bits not in TABLE_BITS:
        raise UserError(f"table bits must be one of {', '.join(map(str, TABLE_BITS))}, got {table_bits!r}")
    if activations not in INT8_ACTIVATIONS:
        raise UserError(f"unknown int8 activations {activations!r}; choose from {', '.join(INT8_ACTIVATIONS)}")
    if activations == "static" and not calibration:
        raise UserError("static int8 activations need calibration batches: staticquant.calibration_batches(folder)")
    weight_type, reduce_range = QuantType[INT8_WEIGHTS[weights][0]], INT8_WEIGHTS[weights][1]
    op_types = ["MatMul", "Gather"]  # with table_bits = 4 the token table's Gather is gone before this step
    settings = {"method": "onnxruntime.quantization.quantize_dynamic", "weights": weights,
                "weight_type": weight_type.name, "per_channel": True, "op_types": op_types,
                "reduce_range": reduce_range, "fp32_nodes": list(keep_fp32), "table_bits": table_bits}
    table4 = dst.with_name(dst.stem + ".table4.onnx")
    exclude = list(keep_fp32)
    if table_bits == 4:
        settings["table"] = quantize_table_int4(src, table4)
        src = table4
    elif table_bits == 1:
        from edge_xsent.export.tablequant import rewrite_tiered

        settings["table"] = rewrite_tiered(src, table4, table_exact_rows)
        exclude += settings["table"].pop("nodes")  # its look-ups stay as they are
        src = table4
    if activations == "static":
        from edge_xsent.export.staticquant import quantize_static_int8

        settings["method"] = "onnxruntime.quantization.quantize_static"
        with quiet():
            settings["activations"] = quantize_static_int8(src, dst, calibration, exclude, weight_type.name, reduce_range)
        table4.unlink(missing_ok=True)
        return settings
    with quiet():
        # DefaultTensorType: fused graphs carry contrib ops whose output types the quantiser cannot infer.
        quantize_dynamic(str(src), str(dst), weight_type=weight_type, per_channel=True, reduce_range=reduce_range,
                         op_types_to_quantize=op_types, nodes_to_exclude=exclude,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    table4.unlink(missing_ok=True)
    if activations == "per-row":
        from edge_xsent.export.rowquant import rewrite_per_row

        settings["activations"] = rewrite_per_row(dst)
    return settings


def projection_nodes(path: Path, model: DualEncoder) -> list[str]:
    """The MatMuls that remove the language subspace (h @ B^T, then @ B): they stay fp32, so the
    removed subspace is exactly the one `debias` chose. Quantised as one 256x256 Dense (I - B^T B)
    the projection cost cosine 0.9925 (issue 19); as these two rank-k MatMuls, quantising them
    changed nothing measurable on the shipped default (mean 0.99944, min 0.9982 either way), and
    their 2 x k x 256 weights cost nothing to keep."""
    import onnx
    from onnx import numpy_helper

    if not model.cfg.lang_subspace:
        return []
    basis = model.lang_basis.numpy()
    graph = onnx.load(str(path)).graph
    consts = {i.name: numpy_helper.to_array(i) for i in graph.initializer}

    def is_basis(name: str) -> bool:
        a = consts.get(name)
        return a is not None and (np.array_equal(a, basis) or np.array_equal(a, basis.T))

    return [n.name for n in graph.node if n.op_type == "MatMul" and any(is_basis(i) for i in n.input)]


def fuse_for_ort(path: Path) -> dict:
    """onnxscript's onnxruntime fusions (attention, SkipLayerNorm, BiasGelu), in place."""
    import onnx_ir as ir
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    with quiet():
        model, counts = optimize_for_ort(ir.load(str(path)))
        ir.save(model, str(path))
    return {k: v for k, v in counts.items() if v}


def quantize_int4(src: Path, dst: Path, block_size: int = 32) -> dict:
    """4-bit weights, blockwise symmetric: MatMul -> MatMulNBits, Gather -> GatherBlockQuantized."""
    import onnx

    return _quantize_4bit(onnx.load(str(src)), dst, ("MatMul", "Gather"), block_size)


def quantize_table_int4(src: Path, dst: Path, block_size: int = 32) -> dict:
    """The token table alone at 4 bits (its Gather -> GatherBlockQuantized, blocks along the hidden
    size). The position table stays for int8: at 4 bits its rows moved to cosine 0.994."""
    import onnx

    graph = onnx.load(str(src))
    table = [n.name for n in graph.graph.node if n.op_type == "Gather" and n.input[0] == "model.tok_emb.weight"]
    if len(table) != 1:
        raise UserError(f"{src}: no single Gather of model.tok_emb.weight to quantise; is it a graph `edge-xsent "
                        "export` wrote?")
    others = [n.name for n in graph.graph.node if n.op_type == "Gather" and n.name not in table]
    return {**_quantize_4bit(graph, dst, ("Gather",), block_size, others), "nodes": table}


def _quantize_4bit(graph, dst: Path, op_types: tuple[str, ...], block_size: int, exclude: list[str] = ()) -> dict:
    """`graph`: an onnx.ModelProto; every node of `op_types` but those named in `exclude`."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    axes = tuple((op, {"MatMul": 0, "Gather": 1}[op]) for op in op_types)
    cfg = DefaultWeightOnlyQuantConfig(block_size=block_size, is_symmetric=True, op_types_to_quantize=op_types,
                                       quant_axes=axes)
    with quiet():
        q = MatMulNBitsQuantizer(graph, nodes_to_exclude=list(exclude), algo_config=cfg)
        q.process()
        onnx.save(q.model.model, str(dst))
    return {"method": "MatMulNBitsQuantizer", "bits": 4, "block_size": block_size, "symmetric": True,
            "op_types": list(op_types)}


def export_torchscript(embedder: SentenceEmbedder, example, frozen_path: Path, lite_path: Path) -> None:
    frozen_path.parent.mkdir(parents=True, exist_ok=True)
    with quiet():
        traced = torch.jit.trace(embedder.eval(), example, check_trace=False)
        frozen = torch.jit.freeze(traced)
        torch.jit.save(frozen, str(frozen_path))
        traced._save_for_lite_interpreter(str(lite_path))


def parity_sentences(n_pairs: int = 400, data: str = "sample") -> list[Pair]:
    """Held-out real pairs: the test split of the shipped sample corpus, all language pairs."""
    pairs = list(read_pairs(data, split="test"))
    rng = np.random.default_rng(0)
    by_pair: dict[str, list[Pair]] = {}
    for p in pairs:
        by_pair.setdefault(f"{p.lang_a}-{p.lang_b}", []).append(p)
    k = max(2, n_pairs // max(len(by_pair), 1))
    return [items[i] for items in by_pair.values() for i in sorted(rng.choice(len(items), min(k, len(items)), replace=False))]


def prune_vocabulary(model_dir: str | Path, texts: list[str], out: str | Path) -> dict:
    """A model folder whose vocabulary holds only the pieces `texts` use (plus specials and
    single characters): the embedding table, which dominates the size, shrinks with it.
    Sentences made of kept pieces embed exactly as before."""
    import dataclasses

    from edge_xsent.encode.bundle import save_model
    from edge_xsent.encode.tokenizer import prune

    model, tok, config = load_model(model_dir)
    if not texts:
        raise UserError("--keep-vocab-from: the file has no sentences; it should hold text in the languages to keep")
    used = {i for ids in tok.encode(texts) for i in ids}
    new_tok, old_ids = prune(tok, used)
    idx = torch.tensor(old_ids)
    cfg = dataclasses.replace(model.cfg, vocab_size=len(old_ids))
    small = DualEncoder.for_weights(cfg)
    state = model.state_dict()
    state["tok_emb.weight"] = state["tok_emb.weight"][idx]
    state["head_bias"] = state["head_bias"][idx]
    small.load_state_dict(state)
    training = read_training(model_dir)
    training["vocabulary_pruned"] = {"from": tok.vocab_size, "to": len(old_ids), "sentences": len(texts)}
    save_model(Path(out), small, new_tok, config.get("langs", []), training)
    return training["vocabulary_pruned"]


def model_files(folder: Path) -> list[Path]:
    """Every file `bundle.save_model` wrote (all but the manifest, which the bundle rewrites)."""
    return [p for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST]


def export_bundle(model_dir: str | Path, out: str | Path, int8: bool = True, torchscript: bool = True,
                  min_cosine: float = 0.99, parity_data: str = "sample", parity_pairs: int = 400,
                  check_parity: bool = True, fuse: bool = False, int4: bool = False,
                  keep_vocab: list[str] | None = None, int8_weights: str = DEFAULT_INT8_WEIGHTS,
                  force: bool = False, table_bits: int | None = None,
                  int8_activations: str | None = None, table_exact_rows: int | None = None) -> dict | None:
    """Write the bundle atomically; raise if int8 falls below `min_cosine` (mean) vs fp32.
    `out` may be new or empty, or a bundle already when `force` (never another folder: see check_target).
    `keep_vocab`: prune the vocabulary to the pieces these texts use (inside the bundle's
    temporary folder, so nothing is left behind). `int8_weights`: a key of INT8_WEIGHTS; `table_bits`: the
    int8 graph's token table at 8 or 4 bits and `int8_activations` its activation scales (quantize_int8). Each quantised graph (int8, int4) must
    reach `min_cosine`.
    `check_parity=False` only for cost benchmarks of untrained weights."""
    model_dir, out = Path(model_dir), Path(out)
    table_bits, int8_activations, table_exact_rows = recorded_int8(
        model_dir, table_bits, int8_activations, table_exact_rows) if int8 else \
        (table_bits or 8, int8_activations or DEFAULT_INT8_ACTIVATIONS, 0)
    if table_bits != 8 and not int8:
        raise UserError(f"--table-bits {table_bits} shapes the int8 graph; leave out --no-int8")
    if int8_activations != DEFAULT_INT8_ACTIVATIONS and not int8:
        raise UserError(f"--int8-activations {int8_activations} shapes the int8 graph; leave out --no-int8")
    check_target(model_dir, out, force)
    t0 = time.time()
    with atomic_dir(out) as tmp:
        pruned = prune_vocabulary(model_dir, keep_vocab, tmp / ".pruned") if keep_vocab is not None else None
        model_dir = tmp / ".pruned" if pruned else model_dir
        model, tok, config = load_model(model_dir)
        if float_weights(model_dir) == "derived":  # one artifact (int8 graph + head): write the float weights
            save_model(tmp / ".float", model, tok, config["langs"], read_training(model_dir))
            model_dir = tmp / ".float"
        example = example_inputs(tok, model.cfg.max_len)
        for src in model_files(model_dir):  # the model folder as saved, Hugging Face files included
            (tmp / src.relative_to(model_dir)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, tmp / src.relative_to(model_dir))
        if model_dir.parent == tmp:  # a pruned or materialised copy, inside the temporary folder
            shutil.rmtree(model_dir)
        export_onnx(model, example, tmp / ONNX_FP32)
        quant: dict = {"fusions": fuse_for_ort(tmp / ONNX_FP32)} if fuse else {}
        if int8:
            from edge_xsent.export.staticquant import calibration_batches

            calibration = calibration_batches(tmp) if int8_activations == "static" else ()
            quant["int8"] = quantize_int8(tmp / ONNX_FP32, tmp / ONNX_INT8, projection_nodes(tmp / ONNX_FP32, model),
                                          int8_weights, table_bits, int8_activations, table_exact_rows, calibration)
        if int4:
            quant["int4"] = quantize_int4(tmp / ONNX_FP32, tmp / ONNX_INT4)
        if torchscript:
            export_torchscript(SentenceEmbedder(model).eval(), example, tmp / TS_FROZEN, tmp / TS_LITE)

        if not check_parity:
            write_manifest(tmp, {"quantization": quant, "parity": None})
            return None
        pairs = parity_sentences(parity_pairs, parity_data)
        parity, vectors = measure_parity(tmp, pairs, int8, torchscript, int4)
        parity["source"] = f"{parity_data} test split"
        parity["min_cosine_required"] = min_cosine
        if pruned:
            parity["pruned"] = pruned
        check_gate(parity, min_cosine)
        (tmp / PARITY).write_text(json.dumps(parity, indent=2) + "\n")
        calibrate_int8_vectors(tmp, vectors, f"{parity_data} test split")
        (tmp / CARD).write_text(model_card(config, parity, tmp))
        import onnx
        import onnxruntime

        write_manifest(tmp, {"versions": {"edge_xsent": __version__, "torch": torch.__version__,
                                          "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__},
                             "quantization": quant, "parity": parity, "export_seconds": round(time.time() - t0, 1)})
    return parity


def recorded_int8(folder: Path, table_bits: int | None, activations: str | None,
                  exact_rows: int | None = None) -> tuple[int, str, int]:
    """The int8 form asked for, else the one the folder's own int8 graph was made in (its manifest: a shipped
    student's is a 4-bit table with per-row activations, which `export default` must keep), else the defaults.
    The third: a tiered table's exact rows (table_bits 1), asked for or recorded."""
    from edge_xsent.inputs import read_json

    try:
        made = read_json(folder / MANIFEST, what="manifest").get("quantization", {}).get("int8", {})
    except (OSError, ValueError, AttributeError):
        made = {}
    made = made if isinstance(made, dict) else {}
    acts = made.get("activations")  # rowquant's record, present only for per-row
    recorded_bits = made.get("table_bits") if made.get("table_bits") in TABLE_BITS else 8
    recorded_acts = acts.get("activations") if isinstance(acts, dict) else None
    table = made.get("table") if isinstance(made.get("table"), dict) else {}
    recorded_rows = table.get("exact_rows") if isinstance(table.get("exact_rows"), int) else 0
    return (recorded_bits if table_bits is None else table_bits,  # what was asked is checked by quantize_int8
            activations or (recorded_acts if recorded_acts in INT8_ACTIVATIONS else DEFAULT_INT8_ACTIVATIONS),
            recorded_rows if exact_rows is None else exact_rows)


class ParityError(UserError):
    """A quantised graph below the parity gate: nothing was written. `cosine`: its mean cosine to fp32."""

    def __init__(self, message: str, cosine: float):
        super().__init__(message)
        self.cosine = cosine


def check_gate(parity: dict, min_cosine: float) -> None:
    """Every quantised graph the bundle carries agrees with fp32: a 4-bit graph fell to 0.912 after
    training while its int8 sibling held 0.995, and nothing stopped it."""
    for name, way_out in (("onnx-int8", ""), ("onnx-int4", ", or export without --int4")):
        cos = parity["formats"].get(name, {}).get("cosine_mean")
        if cos is not None and cos < min_cosine:
            raise ParityError(f"{name.removeprefix('onnx-')} parity check failed: mean cosine {cos:.4f} < {min_cosine} "
                            f"against fp32; the bundle was not written (lower --min-cosine to accept{way_out})", cos)


def calibrate_int8_vectors(folder: Path, vectors: dict[str, np.ndarray], source: str) -> None:
    """calibration.json for compact int8 vectors (compact.py), from the parity sentences' vectors
    as the bundle's default backend made them (measure_parity's)."""
    from edge_xsent.encode.compact import calibrate, save_calibration
    from edge_xsent.encode.encoder import _auto_backend, backend_name

    vecs = vectors[backend_name(*_auto_backend(folder, None))]
    if len(vecs) >= 100:
        save_calibration(folder, calibrate(vecs, source))


def measure_parity(folder: Path, pairs: list[Pair], int8: bool, torchscript: bool,
                   int4: bool = False) -> tuple[dict, dict[str, np.ndarray]]:
    """Cosine of every format against fp32 PyTorch on real sentences, and each format's XSR P@1;
    with each format's vectors of those sentences (both sides of every pair)."""
    from edge_xsent.encode.encoder import Encoder, backend_name
    from edge_xsent.eval.evaluate import average, xsr

    sentences = [p.a for p in pairs] + [p.b for p in pairs]
    formats = [("torch", None), ("onnx", "fp32"), *([("onnx", "int8")] if int8 else []),
               *([("onnx", "int4")] if int4 else []), *([("torchscript", None)] if torchscript else [])]
    backends = {backend_name(b, p): (b, p) for b, p in formats}
    parity: dict = {"sentences": len(sentences), "formats": {}}
    vectors: dict[str, np.ndarray] = {}
    with warnings.catch_warnings():  # long sentences are cut to max_len alike in every format
        warnings.filterwarnings("ignore", message=".*were truncated")
        ref = None
        for name, (backend, precision) in backends.items():
            enc = Encoder.load(folder, backend=backend, precision=precision, verify=False,
                               trust_code=True)  # the files this export just wrote
            vecs = vectors[name] = enc.encode(sentences)
            ref = vecs if ref is None else ref
            cos = (vecs * ref).sum(1)
            row = {s: v for s, v in zip(sentences, vecs)}  # P@1 on the very vectors the cosine compared
            p1 = average(xsr(pairs, lambda s, row=row: np.stack([row[t] for t in s]), max_queries=len(pairs)))
            parity["formats"][name] = {"cosine_mean": float(cos.mean()), "cosine_min": float(cos.min()), "xsr_p1": p1}
    base = parity["formats"]["torch"]["xsr_p1"]
    for f in parity["formats"].values():
        f["xsr_p1_drop"] = base - f["xsr_p1"]
    return parity, vectors


def model_card(config: dict, parity: dict, folder: Path) -> str:
    from edge_xsent.export.card import data_licence, front_matter, render, start_lines
    from edge_xsent.data.corpus import resolve
    from edge_xsent.data.sources import corpus_licences

    training = read_training(folder)
    tc = training.get("train_config", {})
    licences = corpus_licences(resolve(tc["data"])) if tc.get("data") else None
    licence, licence_line = data_licence(licences) if licences else (None, "")
    return render({
        "metadata": front_matter(config, licence, sorted(licences) if licences else None),
        "title": "edge-xsent model", "config": config,
        "usage": ["enc = Encoder.load('THIS_FOLDER')", "vecs = enc.encode(['Open the file', 'Ouvrir le fichier'])",
                  "# the same vectors in sentence-transformers (edge_xsent/encode/hf.py):",
                  "# SentenceTransformer('THIS_FOLDER').encode(['Open the file', 'Ouvrir le fichier'])"],
        "training": [f"Objective `{tc.get('objective', '?')}`; steps: {training.get('step', '?')}, train pairs: "
                     f"{training.get('train_pairs', '?')}, device: {training.get('device', '?')} (training.json).",
                     *start_lines(training)],
        "sizes": {p: (folder / p).stat().st_size / 2**20 for p in
                  [FILES["weights"], ONNX_FP32, ONNX_INT8, ONNX_INT4, TS_FROZEN, TS_LITE] if (folder / p).exists()},
        "parity": parity,
        "limits": f"Expect weaker results outside the domains of its training data (`{tc.get('data', '?')}`, see "
                  "training.json) and on languages it was not trained on.",
        "footer": [licence_line] if licence_line else [],
    }) + "\n"


def format_parity(parity: dict, out: Path) -> str:
    """What `edge-xsent export` prints: each format's agreement with fp32 and the bundle's file sizes."""
    lines = [f"{'format':12s} {'cos mean':>9s} {'cos min':>9s} {'XSR P@1':>8s}"]
    lines += [f"{name:12s} {f['cosine_mean']:9.5f} {f['cosine_min']:9.5f} {100 * f['xsr_p1']:8.1f}"
              for name, f in parity["formats"].items()]
    lines += [f"{p.relative_to(out)}: {p.stat().st_size / 2**20:.1f} MB" for p in sorted(Path(out).rglob("*"))
              if p.suffix in (".onnx", ".pt", ".ptl", ".safetensors")]
    return "\n".join(lines + [f"wrote {out}/"])
