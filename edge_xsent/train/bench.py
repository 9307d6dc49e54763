"""`edge-xsent bench`: the paper's efficiency table (Table 5) on this hardware, plus what an
edge user needs (size, load time, latency, throughput, memory per inference backend).

Every measurement runs in a fresh subprocess (one per depth for training, one per depth
and backend for inference), so peak-memory figures never mix. Timings: warm-up first,
then repeats; medians and p95 are reported, and a figure whose spread (p95 / p50) is wide
is flagged as noisy rather than trusted.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from typing import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from edge_xsent.errors import UserError
from edge_xsent.layout import FILES, ONNX_FP32, ONNX_INT8, TS_FROZEN
from edge_xsent.threads import check_threads

BACKENDS = ("torch", "onnx-fp32", "onnx-int8", "torchscript")  # what `bench` times by default

PAPER_TABLE5 = {  # V100, batch 128, en-fr: layers -> (memory MB, minutes per 10k steps)
    1: (7135, 19), 2: (11607, 24), 3: (16804, 29), 4: (21923, 34), 6: (28024, 44)}
NOISY = 1.5  # p95 / p50 above this: too wide to trust


@dataclass
class BenchConfig:
    layers: list[int] = field(default_factory=lambda: [1, 2, 4, 6])
    data: str = "sample"
    vocab_size: int = 8000
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 1024
    max_len: int = 64
    batch_size: int = 128
    train_steps: int = 8  # timed steps per depth (after warm-up); scaled to `per_steps`
    warmup_steps: int = 2
    per_steps: int = 10_000  # report time per this many steps (the paper: 10k)
    infer_repeats: int = 30
    seq_len: int = 32
    threads: int = 1
    device: str = "auto"
    models: dict[int, str] = field(default_factory=dict)  # depth -> trained model folder (quality)
    backends: list[str] = field(default_factory=lambda: list(BACKENDS))
    peers: list[str] = field(default_factory=list)  # peer encoders (edge_xsent.eval.peers), same sentences and threads

    def __post_init__(self) -> None:
        check_threads(self.threads)  # 100,000 threads crashed torch and onnxruntime (SIGSEGV)


def machine_info() -> dict:
    import onnxruntime
    import torch

    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "onnxruntime": onnxruntime.__version__, "platform": platform.platform()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def peak_rss_mb() -> float:
    """Peak resident memory of this process. VmHWM, not ru_maxrss: Linux keeps ru_maxrss
    across exec, so a worker would inherit the high-water mark of the parent it forked from."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def parse_layers(layers: str, models: tuple[str, ...] = ()) -> tuple[list[int], dict[int, str]]:
    """--layers "1,2,4,6" and --model LAYERS:FOLDER -> (depths, {depth: trained model folder})."""
    try:
        depth = [int(x) for x in layers.split(",") if x.strip()]
        trained = {int(k): v for k, _, v in (m.partition(":") for m in models)}
    except ValueError:
        raise UserError("--layers takes integers like 1,2,4,6 and --model takes LAYERS:FOLDER") from None
    if not depth or not all(1 <= d <= 24 for d in depth):
        raise UserError(f"--layers {layers}: each depth must be between 1 and 24, e.g. 1,2,4,6")
    return depth, trained


def parse_backends(backends: str) -> list[str]:
    """--backends "torch,onnx-int8" -> the names, each one `bench` knows."""
    names = [b.strip() for b in backends.split(",") if b.strip()]
    unknown = [b for b in names if b not in BACKENDS]
    if not names or unknown:
        raise UserError(f"--backends {backends}: unknown {', '.join(unknown) or '(none given)'}; "
                        f"choose from {','.join(BACKENDS)}")
    return names


def save_results(results: dict, out: Path, device: str) -> tuple[str, str]:
    """The run's timestamped .md, .json and .png in `out`: (the markdown, a line saying what was saved)."""
    kind = "gpu" if "gpu" in results["machine"] and device != "cpu" else "cpu"
    base = Path(out) / f"bench-{kind}-{time.strftime('%Y%m%d-%H%M%S')}"
    md = to_markdown(results)
    write_report(base.with_suffix(".md"), md, results)
    png = plot(results, base.with_suffix(".png"))
    return md, f"saved {base}.json, .md" + (", .png" if png else " (pip install edge-xsent[plot] for the PNG)")


def write_report(path: str | Path, markdown: str, data: dict | list) -> None:
    """A result as `path` (markdown, for people) and `path` with .json (for machines), atomically."""
    from edge_xsent.atomic import atomic_write
    from edge_xsent.config import portable

    path = Path(path)
    with atomic_write(path) as f:
        f.write(markdown if markdown.endswith("\n") else markdown + "\n")
    with atomic_write(path.with_suffix(".json")) as f:
        json.dump(portable(data), f, indent=2)


def summarize(times: list[float]) -> dict:
    a = np.asarray(times) * 1000
    p50, p95 = float(np.median(a)), float(np.percentile(a, 95))
    return {"p50_ms": round(p50, 3), "p95_ms": round(p95, 3), "n": len(a), "noisy": bool(p95 > NOISY * p50)}


# ----------------------------------------------------------------------------- workers (subprocesses)

def time_steps(trainer, batch_at: Callable[[int], dict], steps: int, warmup: int = 2) -> list[float]:
    """Seconds of each of `steps` calls of the training loop's own step (forward, backward, clipping,
    optimiser, AMP as the recipe says), after `warmup` untimed ones. `batch_at(step)` gives the
    step's batch, made outside the timing; CUDA work is waited for on both sides of each step."""
    import torch

    cuda = trainer.device.type == "cuda"
    times = []
    for step in range(warmup + steps):
        batch = batch_at(step)
        if cuda:
            torch.cuda.synchronize()
        t = time.perf_counter()
        trainer.step(batch, trainer.cfg.warmup_steps + step, torch.Generator().manual_seed(step))
        if cuda:
            torch.cuda.synchronize()
        if step >= warmup:
            times.append(time.perf_counter() - t)
    return times


def median_batch(data, batch_size: int, n: int = 50) -> tuple[list[int], list[int]]:
    """One real batch of median length among the first `n` of a length-bucketed plan, and the
    token counts of those `n`. Timing that one batch again and again measures the model, not
    the length of whichever batch came up (length-bucketed batches vary a lot)."""
    from edge_xsent.train.batches import BatchPlan

    plan = BatchPlan(np.array([max(len(a), len(b)) for a, b in zip(data.a, data.b)]), batch_size, seed=0)
    candidates = [plan.indices(s) for s in range(min(n, plan.per_epoch))]
    tokens = [sum(len(data.a[i]) + len(data.b[i]) for i in idx) for idx in candidates]
    return candidates[int(np.argsort(tokens)[len(tokens) // 2])], tokens


def _worker_train(args: dict) -> dict:
    """Time training steps of one depth at batch 128 with the full objective, on real pairs."""
    import torch

    from edge_xsent.encode.model import DualEncoder, EncoderConfig
    from edge_xsent.encode.tokenizer import Tokenizer
    from edge_xsent.data.corpus import pair_langs
    from edge_xsent.train.batches import make_batch, tokenize_pairs
    from edge_xsent.train.objectives import punctuation_pieces
    from edge_xsent.config import TrainConfig
    from edge_xsent.threads import set_torch_threads
    from edge_xsent.train.batches import load_texts
    from edge_xsent.train.loop import Trainer, pick_device

    set_torch_threads(args["threads"])
    rss0 = peak_rss_mb()
    tok = Tokenizer.load(args["tokenizer"])
    mcfg = EncoderConfig(vocab_size=tok.vocab_size, n_layers=args["layers"], d_model=args["d_model"],
                         n_heads=args["n_heads"], d_ff=args["d_ff"], max_len=args["max_len"])
    cfg = TrainConfig(data=args["data"], model=mcfg, batch_size=args["batch_size"], device=args["device"])
    device = pick_device(cfg, 0)
    rows = load_texts(cfg, "train")
    data = tokenize_pairs(rows, tok, mcfg.max_len, pair_langs(rows))
    torch.manual_seed(0)
    model = DualEncoder(mcfg).to(device)
    trainer = Trainer(cfg, model, punctuation_pieces(tok), device)  # the loop's own step: lr schedule, clipping, AMP
    chosen, tokens = median_batch(data, cfg.batch_size)
    batch = make_batch(data, chosen, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = time_steps(trainer, lambda step: batch, args["steps"], args["warmup"])
    out = {"layers": args["layers"], "device": str(device), "params_m": round(model.num_parameters() / 1e6, 2),
           "step": summarize(times), "tokens_per_batch": int(sum(tokens) / len(tokens)),
           "timed_batch_tokens": int(np.median(tokens))}
    if device.type == "cuda":
        out["memory_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        out["memory_kind"] = "CUDA max allocated"
    else:
        out["memory_mb"] = round(peak_rss_mb(), 1)
        out["memory_kind"] = "peak RSS (process)"
        out["baseline_rss_mb"] = round(rss0, 1)
    return out


def _worker_infer(args: dict) -> dict:
    """Load one backend of a bundle and time it: load, batch 1 and batch 32 at a fixed length,
    sentences/s through encode() on real sentences, peak RSS."""
    from edge_xsent.encode.encoder import Encoder, parse_backend_name

    backend, precision = parse_backend_name(args["backend"])
    rss0 = peak_rss_mb()
    t = time.perf_counter()
    enc = Encoder.load(args["bundle"], backend=backend, precision=precision or None, threads=args["threads"], verify=False,
                       trust_code=True)  # the bundle this bench exported
    load_s = time.perf_counter() - t
    sentences = args["sentences"]
    # Fixed-length rows of real token ids: the test sentences' tokens, concatenated and cut.
    flat = [t for ids in enc.tokenizer.encode(sentences) for t in ids]
    L = args["seq_len"]
    rows = np.array(flat[: (len(flat) // L) * L], dtype=np.int64).reshape(-1, L)
    out = {"backend": args["backend"], "load_s": round(load_s, 3), "threads": args["threads"], "seq_len": L}
    for bs in (1, 32):
        ids = rows[:bs]
        mask = np.ones_like(ids)
        out[f"batch{bs}"] = timed(lambda: enc.embed_ids(ids, mask), args["repeats"])
    enc.encode(sentences[:64])
    return {**out, **_throughput(lambda s: enc.encode(s, batch_size=32), sentences, rss0)}


def timed(fn, repeats: int, warmup: int = 3) -> dict:
    """`fn()` run `warmup` times untimed, then `repeats` times timed: summarize()'s medians."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return summarize(times)


def interleaved(encoders: dict, sentences: list[str], rounds: int = 9, batch: int = 32) -> dict[str, float]:
    """Sentences/s of each `Encoder` in one process, rounds alternating, medians: a ratio of two models measured
    one after the other in their own workers drifted more than the 10% it was asked to judge (studies/quality-model)."""
    times: dict[str, list[float]] = {k: [] for k in encoders}
    for enc in encoders.values():
        enc.encode(sentences[:64], batch_size=batch)  # warm-up
    for _ in range(rounds):
        for name, enc in encoders.items():
            t = time.perf_counter()
            enc.encode(sentences, batch_size=batch)
            times[name].append(time.perf_counter() - t)
    return {k: round(len(sentences) / float(np.median(v)), 1) for k, v in times.items()}


def speed_sentences(data: str = "sample", n: int = 800) -> list[str]:
    """The speed sentences (train/figures.py's, benchmarks/speed_levers.py's): both sides of n/2 test pairs spread
    over every language of the split."""
    from edge_xsent.data.corpus import read_pairs

    test = list(read_pairs(data, split="test"))
    pairs = test[:: max(1, 2 * len(test) // n)][: n // 2]
    return [p.a for p in pairs] + [p.b for p in pairs]


def pair_speed(encoders: dict, sentences: list[str], rounds: int = 9) -> tuple[dict[str, float], dict[str, float]]:
    """Two models' sentences/s side by side (interleaved): at batch 32 on `sentences`, and at batch 1 on 200 of
    them spread over the list (the default rule's speed clause, studies/quality-model)."""
    batch32 = interleaved(encoders, sentences, rounds=rounds)
    batch1 = interleaved(encoders, sentences[:: max(1, len(sentences) // 200)][:200], rounds=rounds, batch=1)
    return batch32, batch1


def _throughput(encode, sentences: list[str], rss0: float) -> dict:
    """Sentences/s through a whole `encode` call, then the process's peak RSS (last: it includes the call)."""
    t = time.perf_counter()
    encode(sentences)
    return {"sentences_per_s": round(len(sentences) / (time.perf_counter() - t), 1),
            "peak_rss_mb": round(peak_rss_mb(), 1), "baseline_rss_mb": round(rss0, 1)}


def _worker_peer(args: dict) -> dict:
    """A peer encoder, end to end from text (its own tokenizer): load, batch 1 and batch 32 of
    real sentences of median length, sentences/s on the same sentences as ours, peak RSS."""
    from edge_xsent.eval.peers import load_peer

    rss0 = peak_rss_mb()
    t = time.perf_counter()
    peer = load_peer(args["peer"], threads=args["threads"])
    load_s = time.perf_counter() - t
    sentences = args["sentences"]
    by_len = sorted(sentences, key=len)
    half = len(by_len) // 2
    mid = by_len[half - 16: half + 16]  # 32 sentences around the median length
    out = {"peer": peer.label, "layers": peer.spec.layers, "dim": peer.dim, "version": peer.version,
           "size_mb": round(peer.size_mb, 2), "load_s": round(load_s, 3), "threads": args["threads"],
           "median_chars": len(by_len[half])}
    for bs in (1, 32):
        out[f"batch{bs}"] = timed(lambda: peer.encode(mid[:bs], batch_size=bs), args["repeats"], warmup=2)
    return {**out, **_throughput(lambda s: peer.encode(s, batch_size=32), sentences, rss0)}


def exit_reason(code: int) -> str:
    """A subprocess's return code in words: a negative one is the signal that killed it."""
    if code < 0:
        import signal

        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited {code}"


def _spawn(kind: str, args: dict, timeout: int = 1800) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(args.get("threads", 1))}
    res = subprocess.run([sys.executable, "-m", "edge_xsent.train.bench", kind, json.dumps(args)], capture_output=True,
                         text=True, env=env, timeout=timeout)
    if res.returncode != 0:
        raise UserError(f"benchmark worker {kind} ({args.get('backend') or args.get('layers') or args.get('peer')}) "
                        f"{exit_reason(res.returncode)}: {res.stderr.strip()[-800:] or 'nothing on stderr'}")
    return json.loads(res.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- the run

def run(cfg: BenchConfig, progress=print) -> dict:
    from edge_xsent.encode.bundle import save_model
    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.eval.evaluate import average, xsr
    from edge_xsent.export.exporter import export_bundle
    from edge_xsent.encode.model import DualEncoder, EncoderConfig
    from edge_xsent.encode.tokenizer import Tokenizer

    if not cfg.layers:
        raise UserError("--layers needs at least one depth, e.g. --layers 1,2,4,6")
    from edge_xsent.eval.peers import parse_peers

    parse_peers(",".join(cfg.peers))  # a typo fails before the long part
    results: dict = {"config": asdict(cfg), "machine": machine_info(), "training": [], "inference": [], "quality": [],
                     "peers": []}
    test_pairs = list(read_pairs(cfg.data, split="test"))
    sentences = [p.a for p in test_pairs[:400]] + [p.b for p in test_pairs[:400]]
    with tempfile.TemporaryDirectory(prefix="edge-xsent-bench-") as tmp:
        tmp = Path(tmp)
        texts = [t for p in read_pairs(cfg.data, split="train") for t in (p.a, p.b)]
        tok = Tokenizer.train(texts, cfg.vocab_size)
        tok.save(tmp / FILES["tokenizer"])
        for n in cfg.layers:
            progress(f"training cost, {n} layer(s) ...")
            results["training"].append(_spawn("train", {
                "layers": n, "tokenizer": str(tmp / FILES["tokenizer"]), "data": cfg.data, "d_model": cfg.d_model,
                "n_heads": cfg.n_heads, "d_ff": cfg.d_ff, "max_len": cfg.max_len, "batch_size": cfg.batch_size,
                "steps": cfg.train_steps, "warmup": cfg.warmup_steps, "threads": cfg.threads, "device": cfg.device}))
        for n in cfg.layers:
            progress(f"inference, {n} layer(s): export ...")
            trained = cfg.models.get(n)
            folder = Path(trained) if trained else tmp / f"model-{n}"
            if not trained:
                import torch

                torch.manual_seed(0)
                m = DualEncoder(EncoderConfig(vocab_size=tok.vocab_size, n_layers=n, d_model=cfg.d_model,
                                              n_heads=cfg.n_heads, d_ff=cfg.d_ff, max_len=cfg.max_len))
                save_model(folder, m, tok, [], {"note": "untrained: cost only"})
            bundle = tmp / f"bundle-{n}"
            export_bundle(folder, bundle, check_parity=False, torchscript="torchscript" in cfg.backends)  # only what runs
            files = {"torch": FILES["weights"], "onnx-fp32": ONNX_FP32, "onnx-int8": ONNX_INT8,
                     "torchscript": TS_FROZEN}
            sizes = {b: (bundle / files[b]).stat().st_size for b in cfg.backends}
            for b in cfg.backends:
                progress(f"inference, {n} layer(s): {b} ...")
                r = _spawn("infer", {"bundle": str(bundle), "backend": b, "threads": cfg.threads, "seq_len": cfg.seq_len,
                                     "repeats": cfg.infer_repeats, "sentences": sentences})
                r.update(layers=n, size_mb=round(sizes[b] / 2**20, 2),
                         trained=bool(trained))
                results["inference"].append(r)
            if trained:
                from edge_xsent.encode.encoder import Encoder

                enc = Encoder.load(bundle, backend="onnx", precision="int8")
                p1 = average(xsr(test_pairs, lambda s: enc.encode(list(s)), max_queries=2000))
                results["quality"].append({"layers": n, "model": str(trained), "xsr_p1_int8": p1})
    for key in cfg.peers:
        progress(f"inference, peer {key} ...")
        results["peers"].append(_spawn("peer", {"peer": key, "threads": cfg.threads, "repeats": cfg.infer_repeats,
                                                "sentences": sentences}))
    results["ratios"] = ratios(results)
    return results


def ratios(results: dict) -> dict:
    """6-layer / 2-layer ratios (paper: 2.5x memory, 1.8x time) and int8-vs-eager speed-ups."""
    out: dict = {}
    by_layers = {r["layers"]: r for r in results["training"]}
    if 2 in by_layers and 6 in by_layers:
        out["memory_6_over_2"] = round(by_layers[6]["memory_mb"] / by_layers[2]["memory_mb"], 2)
        out["time_6_over_2"] = round(by_layers[6]["step"]["p50_ms"] / by_layers[2]["step"]["p50_ms"], 2)
        out["paper_memory_6_over_2"] = round(PAPER_TABLE5[6][0] / PAPER_TABLE5[2][0], 2)
        out["paper_time_6_over_2"] = round(PAPER_TABLE5[6][1] / PAPER_TABLE5[2][1], 2)
    for n in sorted({r["layers"] for r in results["inference"]}):
        rows = {r["backend"]: r for r in results["inference"] if r["layers"] == n}
        if "torch" in rows and "onnx-int8" in rows:
            out[f"int8_speedup_batch32_{n}L"] = round(rows["torch"]["batch32"]["p50_ms"] / rows["onnx-int8"]["batch32"]["p50_ms"], 2)
            out[f"int8_speedup_batch1_{n}L"] = round(rows["torch"]["batch1"]["p50_ms"] / rows["onnx-int8"]["batch1"]["p50_ms"], 2)
        if "onnx-fp32" in rows and "onnx-int8" in rows:
            out[f"int8_size_ratio_{n}L"] = round(rows["onnx-int8"]["size_mb"] / rows["onnx-fp32"]["size_mb"], 3)
    return out


# ----------------------------------------------------------------------------- output

def to_markdown(results: dict) -> str:
    c, m = results["config"], results["machine"]
    flag = lambda s: " (noisy)" if s["noisy"] else ""  # noqa: E731
    lines = [f"# edge-xsent bench ({time.strftime('%Y-%m-%d')})", "",
             *([f"`{results['command']}`, {time.strftime('%Y-%m-%d')}", ""] if results.get("command") else []),
             f"Machine: {m['cpu']}, {m['cores']} cores" + (f", GPU {m['gpu']}" if "gpu" in m else "") +
             f"; torch {m['torch']}, onnxruntime {m['onnxruntime']}, Python {m['python']}.", "",
             "## Training cost (the paper's Table 5 in shape)", "",
             f"Batch {c['batch_size']} pairs, full objective (UGT + align + sim), d={c['d_model']}, FFN {c['d_ff']}, "
             f"vocabulary {c['vocab_size']}, real pairs from `{c['data']}`, {c['threads']} thread(s). "
             f"{c['train_steps']} steps timed after {c['warmup_steps']} warm-up steps, on one real batch of median length "
             f"(~{results['training'][0]['timed_batch_tokens'] if results['training'] else 0:,d} tokens); minutes per "
             f"{c['per_steps']:,d} steps are the median step time scaled (not a full run).", "",
             "| layers | params (M) | memory (MB) | median step (ms) | min / 10k steps | paper memory (MB) | paper min / 10k |",
             "|---|---|---|---|---|---|---|"]
    for r in results["training"]:
        paper = PAPER_TABLE5.get(r["layers"], ("-", "-"))
        lines.append(f"| {r['layers']} | {r['params_m']} | {r['memory_mb']:,.0f} | {r['step']['p50_ms']:,.0f}{flag(r['step'])} | "
                     f"{r['step']['p50_ms'] * c['per_steps'] / 60000:,.0f} | {paper[0]:,} | {paper[1]} |")
    if results["training"]:
        lines += ["", f"Memory is {results['training'][0]['memory_kind']}."]
    ra = results["ratios"]
    if "memory_6_over_2" in ra:
        lines += ["", f"6 layers / 2 layers: memory {ra['memory_6_over_2']}x (paper {ra['paper_memory_6_over_2']}x), "
                      f"time {ra['time_6_over_2']}x (paper {ra['paper_time_6_over_2']}x)."]
    lines += ["", "## Inference", "",
              f"Fixed length {c['seq_len']} tokens (real token ids), {c['threads']} thread(s), {c['infer_repeats']} "
              "repeats after warm-up; sentences/s through `encode()` on 800 real test sentences.", "",
              "| layers | backend | size (MB) | load (s) | batch 1 p50 / p95 (ms) | batch 32 p50 / p95 (ms) | sent/s | peak RSS (MB) |",
              "|---|---|---|---|---|---|---|---|"]
    for r in results["inference"]:
        lines.append(f"| {r['layers']}{'' if r['trained'] else '*'} | {r['backend']} | {r['size_mb']} | {r['load_s']} | "
                     f"{r['batch1']['p50_ms']:.2f} / {r['batch1']['p95_ms']:.2f}{flag(r['batch1'])} | "
                     f"{r['batch32']['p50_ms']:.1f} / {r['batch32']['p95_ms']:.1f}{flag(r['batch32'])} | "
                     f"{r['sentences_per_s']} | {r['peak_rss_mb']:.0f} |")
    lines += ["", "`*` untrained weights: cost only (speed and size do not depend on training).", "",
              "Ratios: " + ", ".join(f"{k} {v}" for k, v in ra.items())]
    if results.get("peers"):
        lines += ["", "## Peers, same sentences and threads", "",
                  "End to end from text with each peer's own tokenizer: batch 1 and 32 are real test sentences of median "
                  f"length ({results['peers'][0]['median_chars']} characters), so their latency is not the fixed-length "
                  "figure above; sentences/s is measured exactly as for edge-xsent (same 800 sentences, batch 32).", "",
                  "| encoder | layers | dim | size (MB) | load (s) | batch 1 p50 / p95 (ms) | batch 32 p50 / p95 (ms) | "
                  "sent/s | peak RSS (MB) |", "|---|---|---|---|---|---|---|---|---|"]
        for r in results["peers"]:
            lines.append(f"| {r['peer']} {r['version']} | {r['layers']} | {r['dim']} | {r['size_mb']} | {r['load_s']} | "
                         f"{r['batch1']['p50_ms']:.2f} / {r['batch1']['p95_ms']:.2f}{flag(r['batch1'])} | "
                         f"{r['batch32']['p50_ms']:.1f} / {r['batch32']['p95_ms']:.1f}{flag(r['batch32'])} | "
                         f"{r['sentences_per_s']} | {r['peak_rss_mb']:.0f} |")
    if results["quality"]:
        lines += ["", "## Quality", "", "| layers | model | XSR P@1 (int8) |", "|---|---|---|"]
        lines += [f"| {q['layers']} | `{q['model']}` | {100 * q['xsr_p1_int8']:.1f} |" for q in results["quality"]]
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    tr = results["training"]
    if not tr:
        return False
    layers = [r["layers"] for r in tr]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
    a.plot(layers, [r["memory_mb"] for r in tr], "o-", label="this machine")
    a.plot(list(PAPER_TABLE5), [v[0] for v in PAPER_TABLE5.values()], "s--", label="paper (V100)")
    a.set(xlabel="layers", ylabel="training memory (MB)", title="Memory")
    per = results["config"]["per_steps"]
    b.plot(layers, [r["step"]["p50_ms"] * per / 60000 for r in tr], "o-", label="this machine")
    b.plot(list(PAPER_TABLE5), [v[1] for v in PAPER_TABLE5.values()], "s--", label="paper (V100)")
    b.set(xlabel="layers", ylabel=f"minutes per {per:,d} steps", title="Time")
    for ax in (a, b):
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main() -> None:  # the subprocess entry point
    kind, args = sys.argv[1], json.loads(sys.argv[2])
    out = {"train": _worker_train, "infer": _worker_infer, "peer": _worker_peer}[kind](args)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
