"""How a run's threads wait: passively, so a long run shares the machine with other work.

OpenMP threads that wait by spinning hold their core while a thread they wait for is off it:
beside one or two other jobs on 2 cores a 2-thread training step took 5.5 s against 1.2 s at
1 thread (4.6x slower); with a passive wait 2 threads were no worse than 1 (measured again by
benchmarks/training_cost.py). torch's OpenMP runtime reads OMP_WAIT_POLICY once, when torch is
first imported, so the CLI sets it before any command imports torch; a Python program that
imports torch itself sets the variable first, or gets a warning from `train` at more than 1
thread. Torch-free: the CLI imports this at start.
"""

from __future__ import annotations

import os
import sys

from .errors import UserError

WAIT_POLICY = "OMP_WAIT_POLICY"


def passive_openmp_wait() -> None:
    """Ask for a passive wait unless the user chose a policy or torch (and OpenMP) already started."""
    if "torch" not in sys.modules:
        os.environ.setdefault(WAIT_POLICY, "PASSIVE")


def spinning_warning(threads: int) -> str | None:
    """A warning for a run of more than one thread whose OpenMP threads may spin, else None."""
    if threads > 1 and os.environ.get(WAIT_POLICY, "").upper() != "PASSIVE":
        return (f"{threads} threads with OpenMP's default (spinning) wait: beside other jobs a step can be "
                f"several times slower. Set {WAIT_POLICY}=PASSIVE before Python starts (the edge-xsent command "
                "does), or threads = 1")
    return None


def max_threads() -> int:
    """The most threads a run may ask for: 4x the cores (more only thrash; a million grew to 21.8 GB)."""
    return 4 * (os.cpu_count() or 1)


def check_threads(threads) -> int | None:
    """`threads` as given (None: the library's default), or a UserError naming the range."""
    import numbers

    if threads is None:
        return None
    cap = max_threads()
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or not 1 <= threads <= cap:
        raise UserError(f"threads={threads!r}: a whole number from 1 to {cap} (4x this machine's "
                        f"{os.cpu_count()} cores) is needed")
    return int(threads)
