"""A plain (non-editable) install carries the default model: `Encoder.load()` works outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_ships_the_default_model(tmp_path):
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", str(ROOT), "--no-deps", "--no-build-isolation",
                    "-w", str(wheels)], check=True, capture_output=True, cwd=tmp_path)
    wheel = next(wheels.glob("edge_xsent-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    code = ("import edge_xsent, sys; from edge_xsent import Encoder; "
            "assert edge_xsent.__file__.startswith(sys.argv[1]), edge_xsent.__file__; "
            "v = Encoder.load().encode(['Save the document', 'Enregistrer le document', 'The cat sleeps']); "
            "print(round(float(v[0] @ v[1]), 4), round(float(v[0] @ v[2]), 4))")
    env = {**os.environ, "PYTHONPATH": str(target), "HF_HUB_OFFLINE": "1",
           "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}  # any network use would fail
    done = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, cwd=tmp_path,
                          env=env)
    assert done.returncode == 0, done.stderr
    translation, unrelated = map(float, done.stdout.split())
    assert translation > unrelated + 0.2  # the shipped, trained model: a translation sits far closer
