"""One command for a lent GPU (about 30 minutes, 10 a call): proof and figures.

    python benchmarks/gpu.py            # on a CUDA machine, within ~10 minutes
    python benchmarks/gpu.py --quick    # a smoke run (fewer steps)

In order, each step recorded as it finishes (a stopped run keeps what it measured):
  1. the GPU-marked tests (`pytest -m gpu`): AMP step, checkpoint/resume on the GPU, a GPU-trained
     model encoding on the CPU with the same vectors, DDP over NCCL when two GPUs are present;
  2. the paper's 2-layer model (train/paper-2layer.toml) for a few hundred AMP steps on real pairs:
     pairs/s and peak CUDA memory;
  3. `edge-xsent bench --layers 1,2,3,4,6 --device cuda --backends torch`: the paper's Table 5 on this GPU
     (the inference rows run on the CPU beside it; the onnxruntime rows are the CPU table's job);
  4. inference throughput: torch fp32 / fp16 / bf16 on the GPU, sentences/s of the model alone on
     length-sorted batches of real sentences padded before timing; onnxruntime's CUDA provider where its
     wheel offers it.
Writes benchmarks/results/gpu-<stamp>.md and .json, naming the device. Without a CUDA GPU it
says so and exits 2, having done nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from edge_xsent.failures import user_errors
from edge_xsent.inputs import read_json
from edge_xsent.paths import INTO, Parser, path_arg

ROOT = Path(__file__).resolve().parent.parent

NO_GPU = ("no CUDA GPU is visible to torch: benchmarks/gpu.py needs one (run it through the device tool "
          "when a GPU is lent; see the developers' guide). Nothing was measured.")


def cuda_device() -> str | None:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def gpu_tests() -> dict:
    t0 = time.time()
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", "tests/test_gpu.py"], cwd=ROOT,
                         capture_output=True, text=True)
    lines = res.stdout.strip().splitlines()
    return {"exit_code": res.returncode, "tail": lines[-1:] if res.returncode == 0 else lines[-30:],
            "seconds": round(time.time() - t0)}


def train_paper(steps: int) -> dict:
    from edge_xsent.config import TrainConfig
    from edge_xsent.train.loop import train

    with tempfile.TemporaryDirectory() as tmp:
        cfg = TrainConfig.from_toml(ROOT / "train/paper-2layer.toml", {
            "data": "sample", "out": tmp, "max_steps": steps, "warmup_steps": min(100, steps), "eval_every": steps,
            "checkpoint_every": steps, "valid_pairs": 1000, "device": "cuda", "model": {"vocab_size": 8000}})
        summary = train(cfg, progress=False)
    return {"steps": steps, "pairs_per_s": summary["pairs_per_s"], "cuda_max_allocated_mb": summary.get("cuda_max_allocated_mb"),
            "val_p@1": summary["history"][-1].get("val_p@1") if summary["history"] else None,
            "note": "paper-2layer.toml with an 8k vocabulary (the sample corpus is too small for 50k), AMP"}


def bench(train_steps: int) -> dict:
    from edge_xsent.train.bench import exit_reason

    with tempfile.TemporaryDirectory() as tmp:
        res = subprocess.run([sys.executable, "-m", "edge_xsent.cli", "bench", "--layers", "1,2,3,4,6", "--device", "cuda",
                              "--train-steps", str(train_steps), "--backends", "torch", "--out", tmp], cwd=ROOT, capture_output=True, text=True)
        if res.returncode:
            raise RuntimeError(f"edge-xsent bench {exit_reason(res.returncode)}: {res.stderr[-1500:]}")
        report = next(Path(tmp).glob("bench-*.json"))
        return read_json(report, what="the bench report")


def padded_batches(ids: list[list[int]], size: int, device: str) -> list:
    """Length-sorted batches (as `encode` makes them), padded once and moved to the device before
    any timing, so the timed loop is the model alone: in the first GPU runs, padding in Python each
    batch moved the figures by half between runs and hid the dtypes' difference."""
    from edge_xsent.train.batches import pad

    order = sorted(range(len(ids)), key=lambda k: len(ids[k]))
    batches = (pad([ids[k] for k in order[start: start + size]]) for start in range(0, len(order), size))
    return [(x.to(device), mask.to(device)) for x, mask in batches]


def inference(repeats: int) -> dict:
    import torch

    from edge_xsent.data.corpus import read_pairs
    from edge_xsent.encode.encoder import DEFAULT_MODEL
    from edge_xsent.encode.bundle import load_model

    model, tok, _ = load_model(DEFAULT_MODEL)
    sentences = [p.a for p in read_pairs("sample", split="test")] * 16
    batches = padded_batches(tok.encode(sentences, model.cfg.max_len), 256, "cuda")
    m = model.to("cuda", dtype=torch.float32).eval()
    out = {}
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        times = []
        for r in range(repeats + 1):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.no_grad(), torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
                for x, mask in batches:
                    m(x, mask)
            torch.cuda.synchronize()
            if r:  # the first pass warms up kernels
                times.append(time.perf_counter() - t0)
        times.sort()
        out[str(dtype).split(".")[-1]] = {"sentences_per_s": round(len(sentences) / times[len(times) // 2]),
                                          "sentences": len(sentences)}
    try:
        import onnxruntime as ort

        out["onnxruntime_cuda"] = "available" if "CUDAExecutionProvider" in ort.get_available_providers() \
            else "not in this onnxruntime wheel (CPU build): not measured"
    except ImportError:
        out["onnxruntime_cuda"] = "onnxruntime missing"
    return out


def to_markdown(report: dict) -> str:
    lines = [f"# GPU run: {report['device']}", "", f"{report['date']}, `python benchmarks/gpu.py`", ""]
    t = report.get("tests")
    if t:
        lines += [f"GPU tests: exit {t['exit_code']}, {' '.join(t['tail'])} ({t['seconds']} s)", ""]
    p = report.get("train")
    if p:
        lines += [f"paper-2layer with AMP, {p['steps']} steps: {p['pairs_per_s']:.0f} pairs/s, peak CUDA memory "
                  f"{p['cuda_max_allocated_mb']} MB ({p['note']})", ""]
    b = report.get("bench")
    if b:
        from edge_xsent.train.bench import to_markdown as bench_md

        lines += ["## Depth (the paper's Table 5)", "", bench_md(b), ""]
    i = report.get("inference")
    if i:
        lines += ["## Inference (the shipped default: the model alone on length-sorted batches of 256 real sentences, "
                  "padded before timing)", ""]
        lines += [f"- {k}: {v['sentences_per_s']:,d} sentences/s" if isinstance(v, dict) else f"- {k}: {v}" for k, v in i.items()]
    return "\n".join(lines) + "\n"


@user_errors
def main() -> int:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="Fewer steps and repeats (a smoke run).")
    ap.add_argument("--out", type=path_arg(INTO), default=ROOT / "benchmarks" / "results",
                    help="Folder for gpu-<stamp>.md/.json (a device run writes where its files come back).")
    args = ap.parse_args()
    device = cuda_device()
    if device is None:
        print(f"error: {NO_GPU}", file=sys.stderr)
        return 2
    from edge_xsent.train.bench import write_report

    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = args.out / f"gpu-{stamp}"
    report: dict = {"device": device, "date": time.strftime("%Y-%m-%d %H:%M")}
    steps = [("tests", gpu_tests), ("train", lambda: train_paper(50 if args.quick else 400)),
             ("bench", lambda: bench(5 if args.quick else 30)), ("inference", lambda: inference(3 if args.quick else 10))]
    for name, step in steps:
        t0 = time.time()
        try:
            report[name] = step()
        except Exception as e:  # record and go on: the lease is short, every figure counts
            report[name + "_error"] = f"{type(e).__name__}: {e}"
        print(f"{name}: done in {time.time() - t0:.0f} s", file=sys.stderr)
        write_report(base.with_suffix(".md"), to_markdown(report), report)
    print(to_markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
