"""When a run's steps happen: the learning rate of each step, and a run's end in wall time (max_minutes).

A run with `max_minutes` times its steps up to the end of the warm-up (the learning rate until then does
not depend on `max_steps`) and then fixes `max_steps` to what fits before the deadline, so its learning
rate still decays to the floor by its last step (the GPU students' schedule
ended at a deadline: a device lends minutes, not steps). From then on the run is an ordinary one of
that many steps, deterministic and resumable; the fitted length is kept in the checkpoint, so a resumed
run keeps its schedule. A step that ends past the deadline anyway (a slow validation) pauses the run
with a checkpoint, as pause_at does.
"""

from __future__ import annotations

import math
import time

from edge_xsent.config import TrainConfig

TIMED_STEPS = 10  # the fewest steps timed before max_steps is fitted
# The pace is timed over the second half of the warm-up (at least TIMED_STEPS steps, after the first): on a GPU
# the first steps ran 5x slower than the rest (new batch shapes), and a fit on them ended a run at a third of
# the steps its minutes held (studies/gpu-students/README.md).
MARGIN = 0.9  # of the time left, the share given to steps: the rest for validations and the final save


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up, then cosine decay to min_lr_ratio * lr at max_steps."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    t = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t)))


def steps_that_fit(step: int, seconds_per_step: float, seconds_left: float, max_steps: int) -> int:
    """The run's new length: this step plus the steps the time left holds at this pace (at least one
    more), never past max_steps."""
    more = int(max(0.0, seconds_left) * MARGIN / max(seconds_per_step, 1e-9))
    return min(max_steps, step + max(1, more))


class Deadline:
    """A run's end in wall time, `max_minutes` after `started` (None: no deadline)."""

    def __init__(self, cfg: TrainConfig, started: float, fitted: bool):
        """`fitted`: max_steps is fitted already (a resumed run keeps its checkpoint's)."""
        self.cfg, self.fitted = cfg, fitted
        self.end_at = started + 60 * cfg.max_minutes if cfg.max_minutes else None
        self.fit_at = max(1 + TIMED_STEPS, cfg.warmup_steps)  # the step after which max_steps is fitted
        self.time_from = max(1, min(self.fit_at // 2, self.fit_at - TIMED_STEPS))  # the step timing begins at
        self.timing: tuple[int, float] | None = None  # (step, time) when timing began

    def after_step(self, step: int, now: float | None = None) -> bool:
        """Fit max_steps once the pace is known; True when the run must pause now (past the deadline)."""
        if self.end_at is None:
            return False
        now = time.time() if now is None else now
        if not self.fitted:
            if self.timing is None:
                if step >= self.time_from:
                    self.timing = (step, now)
            elif step >= self.fit_at and step - self.timing[0] >= TIMED_STEPS:
                pace = (now - self.timing[1]) / (step - self.timing[0])
                self.cfg.max_steps = steps_that_fit(step, pace, self.end_at - now, self.cfg.max_steps)
                self.fitted = True
        return now >= self.end_at and step < self.cfg.max_steps
