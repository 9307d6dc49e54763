#!/usr/bin/env bash
# The package's tests on a fresh machine (the README's test command; .ci/run calls this after installing the
# package): what some tests need beyond pip's extras, then pytest. Rerunning skips what is there.
#   tests/run.sh            # the package's tests (after: pip install torch==2.13.0 -e ".[dev]")
#   tests/run.sh --lab      # the lab's: its scripts (train/, benchmarks/) end to end (pytest.mark.lab); CI runs both
#   tests/run.sh -x -k demo # extra arguments go to pytest (-n 0: one process)
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 DEBIAN_FRONTEND=noninteractive
python3 -m pip install -q torch==2.13.0 -e ".[dev]"  # torch pinned: the CPU wheel, not several GB of CUDA
# The mobile demo's browser test: Debian's Chromium, onnxruntime-web and playwright-core.
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null
fi
[ -d android_demo/node_modules ] || (cd android_demo && npm ci --no-audit --no-fund --loglevel=error)
# transformers.js for tests/test_interop.py; its onnxruntime-node install script would fetch GPU binaries.
[ -d export/interop/node_modules ] || (cd export/interop && ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error)
# The `optimum` extra pins transformers below 4.58, the `hf` extra's sentence-transformers needs 5:
# optimum gets its own environment, sharing the rest (torch, onnxruntime, edge-xsent) with this one.
if [ ! -x .venv-optimum/bin/python ]; then
  python3 -m venv --system-site-packages .venv-optimum
  .venv-optimum/bin/python -m pip install -q -e ".[optimum,fastembed]"  # fastembed beside it: no transformers needed
fi
# One pytest worker per core (pytest-xdist; each test computes at 1 thread): about 5 minutes on 2 cores for the
# package's tests, 3 more for the lab's. `-n 0` after the script runs them in one process again; a `-m` after it
# replaces the tier's. --durations: the 30 slowest tests at the end, so a run shows where the time goes (the budget
# of both tiers: about 15 minutes on 2 cores). Each test's seconds are CI's artifact, never a committed record:
# pytest's JUnit report in $EDGE_XSENT_ARTIFACTS (.ci/artifacts/ by default, git-ignored; benchmarks/suite_time.py
# keeps a series of runs outside the checkout).
TIER="not lab"
REPORT="package"
if [ "${1:-}" = "--lab" ]; then TIER="lab"; REPORT="lab"; shift; fi
ARTIFACTS="${EDGE_XSENT_ARTIFACTS:-.ci/artifacts}"
mkdir -p "$ARTIFACTS"
python3 -m pytest -q -n auto -m "$TIER" --durations=30 --junitxml="$ARTIFACTS/junit-$REPORT.xml" "$@"
