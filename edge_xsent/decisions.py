"""The decision rules behind the shipped choices, each fixed before the runs it judges, in
one importable place: the scripts that run the experiments and the model card that reports
them call these, so a rule is written once and tested on tiny tables (tests/test_decisions.py).
"""

from __future__ import annotations

# benchmarks/default_sweep.py: the default's size.
SWEEP_RULE_POINTS = 1.0  # within this many P@1 points of the best, the smallest model wins


def smallest_near_best(rows: dict[str, dict], points: float = SWEEP_RULE_POINTS) -> str:
    """{point: {"p1": P@1, "int8_mb": size}} -> the smallest point within `points` of the best P@1."""
    best = max(r["p1"] for r in rows.values())
    near = [k for k, r in rows.items() if r["p1"] >= best - points]
    return min(near, key=lambda k: rows[k]["int8_mb"])


# benchmarks/debias_rank.py: how many language directions `debias` removes.
DEBIAS_PAIR_COST_MAX = 0.5  # a larger rank may cost the pair pool at most this much P@1
DEBIAS_MIN_GAIN = 0.3  # and must gain at least this much on the mixed pool


def debias_rank(rows: dict[int, dict]) -> int:
    """{rank: {"pair": P@1, "mixed": P@1}} in points -> the rank to ship."""
    base = rows[min(rows)]["pair"]
    best = min(rows)
    for rank in sorted(rows):
        ok = base - rows[rank]["pair"] <= DEBIAS_PAIR_COST_MAX
        if ok and rows[rank]["mixed"] >= rows[best]["mixed"] + DEBIAS_MIN_GAIN:
            best = rank
    return best


# benchmarks/general_ablation.py: the distillation loss.
LOSS_TIE_POINTS = 0.5


def teacher_loss(scores: dict[str, float]) -> str:
    """{loss: general valid P@1} -> the best loss; within LOSS_TIE_POINTS of cos, cos (the simplest)."""
    best = max(scores, key=scores.get)
    return "cos" if "cos" in scores and scores[best] - scores["cos"] < LOSS_TIE_POINTS else best
