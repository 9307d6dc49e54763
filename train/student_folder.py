"""A GPU-distilled student of multilingual-e5-small as a bundle every stack loads (edge_xsent/train/student.py).

    python train/student_folder.py student-4block.safetensors --out models/student-4   # a GPU run's student
    python train/student_folder.py STUDENT --out DIR --rows 48000        # a table size of one's own
    python train/student_folder.py out/student/ --out models/student-4   # the parts a device run returned
    python train/student_folder.py STUDENT --out DIR --refit-data corpus   # kept rows refitted
    python train/student_folder.py STUDENT --out DIR --table tiered    # every piece a row: 4 bits, then 1 bit
    python train/student_folder.py e5-small --out DIR --table tiered --max-bytes 40000000   # e5's own 12 blocks
    python train/student_folder.py STUDENT --out DIR --whole          # every row at fp32, no graph: a table-aware run's start
    python train/student_folder.py RUN/model --out DIR --table tiered   # a table-aware run's model as it ships

The table's size follows the rule in student.rows_for_budget (the most rows within --max-bytes);
the build record (rule, rows, graph bytes, parity) is printed as JSON and kept in training.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from edge_xsent.failures import user_errors
from edge_xsent.paths import FOLDER, Parser, Role, path_arg
from edge_xsent.train.refit import RefitConfig
from edge_xsent.train.student import MAX_GRAPH_BYTES, TABLES, build_folder, write_whole


@user_errors
def main(argv: list[str] | None = None) -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("student", type=path_arg(Role("input", literal="e5-small")), help="a student's .safetensors (first k blocks of e5-small), a folder of its "
                                               "parts, a table-aware run's model folder, or e5-small (e5's own 12 "
                                               "blocks, as the same kind of folder)")
    ap.add_argument("--out", type=path_arg(FOLDER), required=True, help="the bundle to write (a new folder)")
    ap.add_argument("--max-bytes", type=int, default=MAX_GRAPH_BYTES, help="the int8 graph's size limit")
    ap.add_argument("--table", choices=TABLES, default="cut", help="the table's form: cut (the rows that fit, the "
                    "rest reading their nearest) or tiered (every piece: the rows that fit at 4 bits, the rest at 1 bit)")
    ap.add_argument("--rows", type=int, help="table rows, 4-bit rows when tiered (default: the rule's, from --max-bytes)")
    ap.add_argument("--refit-data", help="a corpus: train the kept rows on its text towards the whole table's "
                                         "vectors (edge_xsent/train/refit.py); default: no refit")
    ap.add_argument("--refit-steps", type=int, default=RefitConfig.max_steps, help="steps of the refit")
    ap.add_argument("--whole", action="store_true", help="write the model folder with e5's whole table at fp32 and no "
                    "int8 graph: the start and teacher of a table-aware run (train/table-aware.toml)")
    ap.add_argument("--refit-lr", type=float, default=RefitConfig.lr, help="the refit's peak learning rate (Adam)")
    args = ap.parse_args(argv)
    refit = RefitConfig(data=args.refit_data, max_steps=args.refit_steps, lr=args.refit_lr) if args.refit_data else None
    with tempfile.TemporaryDirectory() as tmp:
        if str(args.student) == "e5-small":
            from safetensors.numpy import save_file

            from edge_xsent.train.student import e5_as_student

            args.student = Path(tmp) / "e5-small-12block.safetensors"
            save_file(e5_as_student(12), str(args.student))
        if args.whole:
            print(json.dumps(write_whole(args.student, args.out), indent=1))
            return
        record = build_folder(args.student, args.out, args.max_bytes, args.rows, refit=refit, table=args.table)
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
