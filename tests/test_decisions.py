"""The decision rules of train/decisions.py on tiny tables."""

import pytest

from decisions import failed_constraints, general_default

pytestmark = pytest.mark.lab  # a lab script's test: tests/run.sh --lab runs it


def row(general, software=96.0, mb=5.0, speed=3.0):
    return {"general": general, "software": software, "int8_mb": mb, "speed_ratio": speed}


def test_general_default_takes_the_best_general_among_those_that_pass():
    rows = {"old": row(48.4), "new": row(60.0), "big": row(70.0, mb=12.0), "soft": row(75.0, software=94.9)}
    assert general_default(rows) == "new"
    assert failed_constraints(rows["big"]) == ["int8 12.0 MB > 10 MB"]
    assert failed_constraints(rows["soft"]) == ["software P@1 94.9 < 95"]
    assert failed_constraints(row(50.0, speed=1.9)) == ["1.90x USE-m's sentences/s < 2x"]


def test_general_default_tie_goes_to_the_smaller_file_and_none_passing_keeps_nothing():
    assert general_default({"a": row(60.0, mb=8.0), "b": row(59.8, mb=5.0)}) == "b"
    assert general_default({"a": row(60.0, mb=8.0), "b": row(59.6, mb=5.0)}) == "a"
    assert general_default({"a": row(60.0, software=90.0)}) is None


def _vocab(size, score, both=True, mb=5.0):
    return {"size": size, "score": score, "both": both, "int8_mb": mb}


def int8_row(cos: float, general: float = 88.5, software: float = 96.7, speed: float = 1000.0) -> dict:
    return {"worst_cosine": cos, "general": general, "software": software, "sentences_per_s": speed}


def test_the_multilingual_default_rule_on_small_tables():
    from decisions import claimed_languages, multilingual_default, multilingual_failed_constraints

    pairs = {"de": 134_700, "ja": 43_200, "vi": 6_500, "ar": 23_500}
    assert claimed_languages(pairs, {"de": 95.0, "ja": 81.0, "vi": 99.0, "ar": 79.9}) == ["de", "ja"]  # vi: too few pairs
    shipped = {"oog_mean": 86.5, "oog_by_lang": {"de": 93.4, "fr": 87.5}, "software": 95.8, "general": 88.0}
    good = {"claimed": [f"l{i}" for i in range(22)], "int8_mb": 13.5, "speed_ratio": 3.1, "oog_mean": 86.2,
            "oog_by_lang": {"de": 92.0, "fr": 88.0}, "software": 95.0, "general": 87.5, "oog_claimed": 70.0}
    assert multilingual_failed_constraints(good, shipped) == []
    old_lost = {**good, "oog_by_lang": {"de": 76.2, "fr": 88.0}, "oog_mean": 80.0}  # what step 6,000 looked like
    failed = multilingual_failed_constraints(old_lost, shipped)
    assert len(failed) == 2 and "oog P@1 of de 17.2 points below" in failed[1]
    assert multilingual_default({"m1": old_lost}, shipped, current="shipped") == "shipped"  # none passes: it stays
    smaller = {**good, "int8_mb": 12.0, "oog_claimed": 69.8}
    assert multilingual_default({"m1": good, "m1-small": smaller}, shipped, "shipped") == "m1-small"  # a tie: smaller file


def test_the_student_rule_claims_out_of_genre_and_picks_the_smallest_fastest_passing_student():
    """studies/pruned-student/README.md: claims on oog-m1 beside e5-small; <= 20 MB; >= 1.0x USE-m; within 3 of
    e5-small on oog; among those that pass, fewest layers, then fastest."""
    import decisions as rule

    e5 = {f"l{i:02d}": 90.0 for i in range(32)}
    assert rule.student_claims({**dict.fromkeys(e5, 86.0), "l00": 84.9, "xx": 99.0}, e5) == sorted(set(e5) - {"l00"})
    assert rule.student_claims({"l01": 79.9}, {"l01": 80.0}) == []  # under 80 even when near e5-small
    ok = {"claimed": list(e5), "int8_mb": 17.3, "speed_ratio": 1.3, "oog_mean": 90.0, "n_layers": 3}
    rows = {"3l": ok, "2l-slow": {**ok, "n_layers": 2, "speed_ratio": 1.1}, "2l": {**ok, "n_layers": 2, "speed_ratio": 1.4},
            "1l-weak": {**ok, "n_layers": 1, "oog_mean": 88.9}}
    assert rule.student_failed_constraints(rows["1l-weak"], 92.0) == ["oog 3.1 below e5-small (> 3)"]
    assert rule.student_default(rows, 92.0, "shipped") == "2l"
    unmeasured = {**ok, "speed_ratio": None}
    assert rule.student_failed_constraints(unmeasured, 92.0) == ["speed not measured"]
    assert rule.student_default({"a": unmeasured}, 92.0, "shipped") == "shipped"
    assert rule.student_failed_constraints({**ok, "int8_mb": None}, 92.0) == ["no int8 graph"]


def test_the_gpu_student_rule_takes_the_best_oog_m1_and_within_half_a_point_the_faster():
    import decisions as rule

    shipped = {"oog_mean": 87.0, "oog_wide_mean": 72.8}
    row = lambda size, speed, oog, wide: {"int8_bytes": size, "speed_ratio": speed, "oog_mean": oog,  # noqa: E731
                                          "oog_wide_mean": wide}
    rows = {"six": row(19_900_000, 0.6, 90.0, 85.0), "four": row(19_900_000, 0.85, 88.0, 83.0),
            "three": row(19_800_000, 1.1, 86.0, 82.6), "two": row(19_000_000, 1.6, 81.5, 79.0),
            "big": row(20_000_001, 2.0, 95.0, 90.0), "one": row(18_000_000, 2.2, 81.9, 72.8)}
    assert rule.gpu_student_default(rows, shipped) == "three"  # 82.6 is within 0.5 of four's 83.0, and faster
    fails = {k: rule.gpu_student_failures(r, shipped) for k, r in rows.items()}
    assert fails["six"] == ["0.60x USE-m's sentences/s (< 0.8x, short by 0.20)"]
    assert fails["big"] == ["int8 graph 20,000,001 bytes (> 20,000,000)"]
    assert fails["one"] == ["oog-m1 mean 72.8, not above the shipped 72.8", "oog mean 5.1 below the shipped (> 5, over by 0.1)"]
    assert rule.gpu_student_default({"six": rows["six"]}, shipped) is None
    assert rule.gpu_student_failures(row(19_000_000, None, 88.0, 83.0), shipped) == ["speed not measured"]


def test_the_gpu_run_rules_reproduce_within_a_point_and_keep_a_lever_at_half_a_point():
    from decisions import lever_failures, reproduction_failures

    run = lambda steps, oog, wide: {"steps": steps, "oog_mean": oog, "oog_wide_mean": wide}  # noqa: E731
    record = run(5434, 88.42, 79.12)
    assert reproduction_failures(run(5434, 87.42, 80.12), record) == []  # each exactly 1.0 away: within
    assert reproduction_failures(run(5434, 84.02, 73.43), record) == [  # the first run of the trainer (C)
        "oog mean 84.02, -4.40 from the record's 88.42 (within 1 needed)",
        "oog-m1 mean 73.43, -5.69 from the record's 79.12 (within 1 needed)"]
    assert "not judged" in reproduction_failures(run(1721, 88.4, 79.1), record)[0]  # cut short by its deadline
    a = run(5434, 88.0, 79.0)
    assert lever_failures(run(5434, 87.5, 79.5), a) == []  # +0.5 and -0.5: both at the boundary, kept
    assert lever_failures(run(5434, 87.4, 79.4), a) == ["oog-m1 mean +0.40 (at least +0.5 needed)",
                                                        "oog mean -0.60 (at most 0.5 below allowed)"]
    assert "not the same as" in lever_failures(run(6000, 90.0, 82.0), a)[0]  # J or T must run A's steps
    assert lever_failures(run(9000, 88.0, 80.0), a, longer=True) == []
    assert "more than" in lever_failures(run(5434, 88.0, 80.0), a, longer=True)[0]
