import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.slow
def test_two_process_gloo_ddp_keeps_weights_identical(tmp_path):
    """torchrun, 2 CPU processes, gloo: each takes half of every global batch; DDP averages
    the gradients, so both replicas must end with bit-identical weights."""
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", "29533",
           "-m", "edge_xsent.cli", "train", "--data", "sample", "--out", str(out), "--vocab-size", "1000",
           "--n-layers", "1", "--d-model", "32", "--n-heads", "2", "--d-ff", "64", "--max-len", "32", "--batch-size", "16",
           "--max-steps", "12", "--warmup-steps", "2", "--eval-every", "6", "--checkpoint-every", "6",
           "--valid-pairs", "64", "--threads", "1", "--device", "cpu", "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    digests = summary["rank_param_sha256"]
    assert len(digests) == 2 and digests[0] == digests[1]
    assert summary["steps"] == 12
    assert "2 processes" in res.stderr
    assert (out / "model" / "model.safetensors").exists()
