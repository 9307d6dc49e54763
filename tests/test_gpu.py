"""The CUDA paths, run by benchmarks/gpu.py on a lent GPU (`pytest -m gpu`); skipped without one.
CI (no GPU) checks that the GPU script says so and stops."""

import os
import subprocess

import numpy as np
import pytest
import torch

from conftest import ROOT, run_script, tiny_config

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_gpu_script_without_a_gpu_says_so():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the script would run")
    before = set((ROOT / "benchmarks" / "results").glob("gpu-*"))
    res = run_script("benchmarks/gpu.py", "--quick", cwd=ROOT)
    assert res.returncode == 2 and "no CUDA GPU is visible" in res.stderr and "Traceback" not in res.stderr
    assert set((ROOT / "benchmarks" / "results").glob("gpu-*")) == before  # nothing recorded


@pytest.mark.gpu
@cuda
def test_amp_training_on_the_gpu(tmp_path):
    from edge_xsent.train.loop import amp_dtype, train
    from edge_xsent.config import TrainConfig

    cfg = tiny_config(tmp_path / "run", device="cuda", max_steps=20)
    summary = train(cfg, progress=False)
    assert summary["steps"] == 20 and np.isfinite(summary["last"]["total"])
    assert summary["cuda_max_allocated_mb"] > 0
    assert amp_dtype(torch.device("cuda"), TrainConfig()) in (torch.bfloat16, torch.float16)


@pytest.mark.gpu
@cuda
def test_resume_on_the_gpu_continues_the_same_run(tmp_path, monkeypatch):
    """A run paused at step 10 and resumed ends with the same weights, bit for bit, as one that never
    stopped. Both legs keep max_steps = 20 (pause_at stops the first): a first leg with max_steps = 10
    decays its cosine schedule to the end by step 10 and differs on any device. Deterministic kernels
    make CUDA repeatable (two whole runs on an H100 ended 0.0 apart with them, 1.3e-3 apart without)."""
    from edge_xsent.train.loop import train

    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    try:
        whole, part = tmp_path / "whole", tmp_path / "part"
        train(tiny_config(whole, device="cuda", max_steps=20, checkpoint_every=10), progress=False)
        assert train(tiny_config(part, device="cuda", max_steps=20, pause_at=10, checkpoint_every=10),
                     progress=False)["paused"]
        train(tiny_config(part, device="cuda", max_steps=20, checkpoint_every=10), progress=False)
    finally:
        torch.use_deterministic_algorithms(False)
    a = torch.load(whole / "checkpoints/last.pt", weights_only=True)["model"]
    b = torch.load(part / "checkpoints/last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.gpu
@cuda
def test_a_gpu_trained_model_encodes_the_same_on_cpu(tmp_path):
    from edge_xsent import Encoder
    from edge_xsent.encode.bundle import load_model
    from edge_xsent.train.loop import train

    train(tiny_config(tmp_path / "run", device="cuda", max_steps=20), progress=False)
    model, tok, _ = load_model(tmp_path / "run" / "model")
    sentences = ["Save the current document", "Enregistrer le document actuel", "The dog barks at night."]
    cpu = Encoder.load(tmp_path / "run" / "model", backend="torch").encode(sentences)
    ids = tok.encode(sentences, model.cfg.max_len)
    T = max(map(len, ids))
    x = torch.tensor([s + [0] * (T - len(s)) for s in ids]).cuda()
    with torch.no_grad():
        gpu = torch.nn.functional.normalize(model.cuda()(x, (x != 0).long()), dim=-1).cpu().numpy()
    assert (cpu * gpu).sum(1).min() > 0.9999


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="DDP over NCCL needs two GPUs")
def test_ddp_over_nccl(tmp_path):
    res = subprocess.run(["torchrun", "--nproc-per-node", "2", "-m", "edge_xsent.cli", "train", "--data", "sample",
                          "--out", str(tmp_path / "ddp"), "--max-steps", "10", "--vocab-size", "1000", "--n-layers", "1",
                          "--d-model", "32", "--n-heads", "2", "--d-ff", "64", "--batch-size", "16", "--device", "cuda",
                          "--quiet"], cwd=ROOT, capture_output=True, text=True, env={**os.environ})
    assert res.returncode == 0, res.stderr[-2000:]
    digests = __import__("json").loads((tmp_path / "ddp" / "summary.json").read_text())["rank_param_sha256"]
    assert len(set(digests)) == 1
