"""Float weights derived from the shipped int8 ONNX graph: how close to the trained fp32 weights,
and do they fine-tune as well? (Whether a default can ship one artifact: the int8 graph.)

    python studies/float-weights/measure.py MODEL_FOLDER --data corpus-g5 --steps 150

MODEL_FOLDER holds both the int8 graph and the fp32 weights (the shipped default does). Writes
results.json beside this file.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from edge_xsent.atomic import atomic_write
from edge_xsent.encode.bundle import load_model
from edge_xsent.data.corpus import read_pairs
from edge_xsent.encode.int8_weights import state_from_int8
from edge_xsent.layout import ONNX_INT8

HERE = Path(__file__).parent
def encode(model, tok, texts: list[str]) -> np.ndarray:
    from edge_xsent.encode.tokenizer import pad_batch

    out = []
    with torch.no_grad():
        for i in range(0, len(texts), 64):
            ids, mask = pad_batch(tok.encode(texts[i:i + 64], model.cfg.max_len), 0)
            out.append(model(torch.from_numpy(ids), torch.from_numpy(mask)).numpy())
    v = np.concatenate(out)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def fine_tune_both(model_dir: Path, derived, tok, args) -> dict:
    """The same short run (no teacher, 1 thread) from the fp32 weights and from the derived ones
    (the generative head, absent from the graph, taken from the fp32 model: it would ship beside
    the graph, 0.5 MB); their validation at the end."""
    from edge_xsent.encode.bundle import read_training, save_model
    from edge_xsent.config import TrainConfig
    from edge_xsent.train.loop import train

    work = args.work.expanduser()
    start = work / "derived-start"
    langs = read_training(model_dir).get("langs") or ["en"]
    save_model(start, derived, tok, langs, {"note": "weights derived from the int8 graph"})
    out = {}
    for name, init in (("fp32", model_dir), ("derived", start)):
        cfg = TrainConfig.from_dict({**read_training(model_dir)["train_config"], "data": args.data, "init": str(init),
                                     "out": str(work / f"run-{name}"), "teacher": None, "mono_batch_size": 0,
                                     "max_steps": args.steps, "warmup_steps": 20, "eval_every": args.steps,
                                     "checkpoint_every": args.steps, "max_train_pairs": 100_000, "threads": 1,
                                     "valid_pairs": 1000}, "fine-tuning")
        summary = train(cfg, progress=False, fresh=True)
        last = summary["history"][-1]
        out[name] = {k: round(float(last[k]), 4) for k in ("val_p@1", "val_total", "val_gen", "val_align")}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", type=Path)
    ap.add_argument("--data", default="sample")
    ap.add_argument("--sentences", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=0, help="also fine-tune from each start for this many steps")
    ap.add_argument("--work", type=Path, default=Path("~/edge-xsent-runs/float-weights"))
    args = ap.parse_args()
    original, tok, _ = load_model(args.model)
    derived, _, _ = load_model(args.model)
    state = state_from_int8(args.model / ONNX_INT8, original.cfg)
    missing, unexpected = derived.load_state_dict(state, strict=False)
    pairs = list(read_pairs(args.data, split="test"))[: args.sentences]
    texts = [p.a for p in pairs] + [p.b for p in pairs]
    a, b = encode(original, tok, texts), encode(derived, tok, texts)
    cos = (a * b).sum(1)
    n = len(pairs)
    p1 = {k: float((((v[:n] @ v[n:].T).argmax(1)) == np.arange(n)).mean()) for k, v in (("fp32", a), ("derived", b))}
    diffs = {k: float((state[k] - original.state_dict()[k]).abs().max()) for k in state if k in original.state_dict()}
    out = {"model": str(args.model), "data": args.data, "sentences": len(texts),
           "not_in_graph": sorted(missing), "cosine_mean": float(cos.mean()), "cosine_min": float(cos.min()),
           "p1_en_to_x": p1, "max_abs_weight_diff": {k: round(v, 5) for k, v in sorted(diffs.items(), key=lambda kv: -kv[1])[:6]},
           "date": time.strftime("%Y-%m-%d")}
    if args.steps:
        out["fine_tuning"] = fine_tune_both(args.model, derived, tok, args)
    print(json.dumps(out, indent=1))
    with atomic_write(HERE / "results.json", "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
