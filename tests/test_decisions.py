"""The decision rules of edge_xsent.decisions on tiny tables (the sweep's and the debias rank's
rules are also exercised end to end in test_default_sweep.py and test_debias_rank.py)."""

from edge_xsent.decisions import debias_rank, smallest_near_best, teacher_loss


def test_teacher_loss_prefers_cos_unless_another_is_clearly_better():
    assert teacher_loss({"cos": 40.0, "mse": 40.4, "nce": 39.0}) == "cos"  # 0.4 ahead: a tie
    assert teacher_loss({"cos": 40.0, "mse": 38.0, "nce": 41.0}) == "nce"
    assert teacher_loss({"mse": 30.0, "nce": 31.0}) == "nce"  # cos not run


def test_rules_on_small_tables():
    assert smallest_near_best({"a": {"p1": 90.0, "int8_mb": 9.0}, "b": {"p1": 89.5, "int8_mb": 5.0}}) == "b"
    assert debias_rank({1: {"pair": 96.0, "mixed": 90.0}, 2: {"pair": 95.0, "mixed": 95.0}}) == 1  # costs 1.0 > 0.5
