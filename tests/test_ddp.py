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


def test_a_recipe_without_a_generative_task_steps_under_ddp(tmp_path):
    """objective = "none" (a teacher's recipe) leaves the generative head out of the loss; DDP must not wait
    for its gradient (it raised at the second step, before). One gloo process is enough to show it."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from edge_xsent.config import EncoderConfig, TrainConfig
    from edge_xsent.encode.model import DualEncoder
    from edge_xsent.train.loop import data_parallel
    from edge_xsent.train.objectives import Objective

    cfg = TrainConfig(objective="none", align_weight=0.0, sim_weight=0.0, teacher="e5-passage", batch_items=True,
                      teacher_loss="mse+nce", teacher_proj="none")
    model = DualEncoder(EncoderConfig(vocab_size=50, n_layers=1, d_model=16, n_heads=2, d_ff=32, max_len=8))
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        runner = data_parallel(Objective(model, cfg, torch.zeros(50, dtype=torch.bool), teacher_dim=16), cfg,
                               torch.device("cpu"), 0)
        batch = {"m": torch.randint(5, 50, (4, 6)), "mm": torch.ones(4, 6),
                 "tm": F.normalize(torch.randn(4, 16), dim=-1)}
        for _ in range(2):
            runner(batch, torch.Generator())["total"].backward()
        assert model.head_dense.weight.grad is None and model.blocks[0].ff1.weight.grad is not None
    finally:
        dist.destroy_process_group()


def _leave(rank: int, store_file: str, times: dict) -> None:
    """One rank of a two-process gloo group: rank 1 lingers, then records when it starts to leave; rank 0 records
    when it has left."""
    import time

    import torch
    import torch.distributed as dist

    from edge_xsent.train.loop import Processes, leave_process_group

    dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank, world_size=2)
    dist.barrier()
    if rank == 1:
        time.sleep(1.5)
        times[rank] = time.monotonic()
    leave_process_group(Processes(2, rank, rank, torch.device("cpu")))
    if rank == 0:
        times[rank] = time.monotonic()


def test_the_store_host_leaves_the_group_last(tmp_path):
    """Rank 0 hosts the store the others' teardown still talks to: it leaves after every other rank has (the
    two-process run's rank 1 once died in its teardown when rank 0 had gone first)."""
    import torch.multiprocessing as mp

    with mp.Manager() as manager:
        times = manager.dict()
        mp.spawn(_leave, args=(str(tmp_path / "store"), times), nprocs=2, join=True)
        assert times[0] > times[1]
