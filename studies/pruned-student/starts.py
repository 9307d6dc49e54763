"""The untrained starts of `init = "e5-small"` (edge_xsent/train/prune.py) at several depths, exported as
they would ship (int8 ONNX), so that their size, speed and out-of-genre P@1 can be measured before
any distillation: the baseline the distillation probe must beat, and the size rule's first check.

    python studies/pruned-student/starts.py --data ~/edge-xsent-data/corpus-m1 --layers 1,2,3,4,6 \
        --vocab-size 30000 --out ~/edge-xsent-runs/e5-starts
    # then, per depth: python train/figures.py OUT/bundle-4 --name start-4 --parts oog,oog_wide,speed \
    #     --out studies/pruned-student/figures/start-4.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

from edge_xsent.atomic import check_output
from edge_xsent.config import DEFAULT_INT8_ACTIVATIONS, INT8_ACTIVATIONS
from edge_xsent.failures import script_errors


@script_errors
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="the corpus whose train split the vocabulary rule reads")
    ap.add_argument("--layers", default="1,2,3,4,6", help="depths: the first k blocks of e5-small")
    ap.add_argument("--vocab-size", type=int, default=30000)
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--int4", action="store_true", help="also a 4-bit graph (MatMul and the table's Gather)")
    ap.add_argument("--d-ff", type=int, default=1536, help="feed-forward width: under 1536 keeps the most important units")
    ap.add_argument("--table-bits", type=int, choices=(8, 4), default=8, help="the int8 graph's token table (export)")
    ap.add_argument("--int8-activations", choices=INT8_ACTIVATIONS, default=DEFAULT_INT8_ACTIVATIONS,
                    help="the int8 graph's activation scales (export); per-row lets the 6-block start pass the gate")
    ap.add_argument("--out", type=Path, required=True, help="bundle-K folders go here")
    args = ap.parse_args()
    from edge_xsent.config import EncoderConfig, TrainConfig
    from edge_xsent.export.exporter import export_bundle
    from edge_xsent.train.prune import start_folder

    for k in (int(x) for x in args.layers.split(",")):
        out = args.out.expanduser() / f"bundle-{k}"
        check_output(out, [args.data], folder=True)
        model = EncoderConfig(vocab_size=args.vocab_size, n_layers=k, d_model=384, n_heads=12, d_ff=args.d_ff,
                              max_len=args.max_len, dropout=0.0)
        cfg = TrainConfig(model=model, data=args.data, init="e5-small", init_layers=list(range(k)))
        start = start_folder(cfg)
        parity = export_bundle(start, out, torchscript=False, parity_pairs=200, int4=args.int4, table_bits=args.table_bits,
                               int8_activations=args.int8_activations)
        for precision in ("int8", "int4") if args.int4 else ("int8",):
            mb = (out / "onnx" / f"model_{precision}.onnx").stat().st_size / 2**20
            cos = parity["formats"][f"onnx-{precision}"]
            print(f"{k} layer(s): {start} -> {out}: {precision} {mb:.1f} MB, parity (cosine) mean "
                  f"{cos['cosine_mean']:.4f}, min {cos['cosine_min']:.4f}")


if __name__ == "__main__":
    main()
