#!/usr/bin/env bash
# A student measured as it would ship: its bundle (int8 blocks, 4-bit table, no TorchScript), then `oog` and `oog-m1`
# at 1 thread into figures/NAME.json, and the bundle's int8 parity and size. Every snapshot and every run's end is
# measured this way, so their figures compare. A rerun skips an existing bundle and the parts already measured.
#   studies/pruned-student/measure.sh ~/edge-xsent-runs/e5-restart-3l-60k/model-step2500 restart-3l-step2500
set -euo pipefail
model=${1:?usage: studies/pruned-student/measure.sh MODEL NAME}
name=${2:?usage: studies/pruned-student/measure.sh MODEL NAME}
cd "$(dirname "$0")/../.."
bundle=$HOME/edge-xsent-runs/bundles/$name
[ -f "$bundle/manifest.json" ] || python3 -m edge_xsent.cli export "$model" --table-bits 4 --no-torchscript --out "$bundle"
python3 train/figures.py "$bundle" --name "$name" --parts oog,oog_wide --threads 1 \
  --out "studies/pruned-student/figures/$name.json"
python3 - "$bundle" "studies/pruned-student/figures/$name.json" <<'PY'
import json, sys
from pathlib import Path
bundle, figures = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
parity = json.loads((bundle / "manifest.json").read_text())["parity"]["formats"]["onnx-int8"]
print(f"{figures['name']}: oog {figures['oog']['mean']:.1f}, oog-m1 {figures['oog_wide']['mean']:.1f}, "
      f"{figures['int8_mb']} MB, int8 parity {parity['cosine_mean']:.4f} mean cosine")
PY
