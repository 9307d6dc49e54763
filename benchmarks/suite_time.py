"""The test suite's time and line coverage, kept: runs the README's test command (`bash tests/run.sh`) in a
checkout, reads every test's duration from pytest's JUnit report, and appends the run to `suite.json` in
`--results` (default ~/edge-xsent-suite, outside the checkout: timings are a measurement, not a committed record;
each test's seconds, per file and in all) and rewrites `suite.md` there from it.
With `--coverage` it runs the same command under coverage.py (pytest, its xdist workers and every Python process
the tests start measured: `patch = subprocess`) and records the package's line coverage instead of a time, since
coverage slows the suite and its time would not compare.

    python benchmarks/suite_time.py                        # this checkout, timed
    python benchmarks/suite_time.py --coverage             # this checkout, line coverage of edge_xsent/
    python benchmarks/suite_time.py --repo ../old --label before   # another checkout (an earlier commit)
    python benchmarks/suite_time.py --marker lab           # the lab's tests (tests/run.sh runs the package's)
    python benchmarks/suite_time.py --marker "lab or not lab"   # both tiers in one run

tests/run.sh installs the checkout it runs in (pip install -e); after another checkout's run this one is installed
again.

Time it with nothing else running: two CPU jobs on 2 cores slow each other several-fold.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from edge_xsent.atomic import atomic_write
from edge_xsent.failures import UserError, user_errors
from edge_xsent.paths import INPUT, INTO, Parser, path_arg
from edge_xsent.inputs import read_json

CHECKOUT = Path(__file__).resolve().parent.parent
RESULTS = Path.home() / "edge-xsent-suite"  # kept outside the checkout (issue 106: suite timings are no committed record)
COVERAGE_RC = """[run]
source = edge_xsent
parallel = true
patch = subprocess
data_file = {data}
disable_warnings = no-data-collected, module-not-measured, module-not-imported, no-ctracer
"""


def durations(junit: Path) -> dict:
    """Every test's seconds (pytest's JUnit report) and the counts pytest gave."""
    tests, counts = {}, defaultdict(int)
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        tests[name] = round(float(case.get("time", 0)), 3)
        kind = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        counts[kind] += 1
    return {"tests": tests, "counts": dict(counts)}


def file_of(name: str) -> str:
    """'tests.test_cli.TestX::test_y' -> 'test_cli' (JUnit's classname is the module, then any class)."""
    parts = name.split("::")[0].split(".")
    return next((part for part in parts if part.startswith("test_")), parts[-1])


def by_file(tests: dict[str, float]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for name, s in tests.items():
        totals[file_of(name)] += s
    return dict(sorted(((k, round(v, 1)) for k, v in totals.items()), key=lambda kv: -kv[1]))


def suite_env() -> dict[str, str]:
    """The environment the suite runs in: this one without PYTHONPATH, so a checkout's tests import that
    checkout's package (tests/run.sh installs it), not the package this script was started with."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def set_up(repo: Path) -> None:
    """tests/run.sh's installs (a venv, npm packages: minutes on a fresh clone), done before any clock starts."""
    subprocess.run(["bash", "tests/run.sh", "--collect-only", "-q"], cwd=repo, env=suite_env(), check=True,
                   stdout=subprocess.DEVNULL)


def selected(marker: str) -> list[str]:
    """pytest's arguments for the tests `marker` selects (none: every test)."""
    return ["-m", marker] if marker else []


def timed_run(repo: Path, junit: Path, marker: str = "") -> float:
    """The README's test command on a set-up checkout, its wall time in seconds; a failed suite is an error,
    not a figure."""
    set_up(repo)
    t0 = time.perf_counter()
    done = subprocess.run(["bash", "tests/run.sh", f"--junitxml={junit}", *selected(marker)], cwd=repo, env=suite_env())
    if done.returncode != 0:
        raise UserError(f"the suite failed in {repo} (exit {done.returncode}): a time is kept only for a passing run")
    return time.perf_counter() - t0


RUNNER = "import subprocess, sys\nsys.exit(subprocess.run(['bash', 'tests/run.sh', *sys.argv[1:]]).returncode)\n"


def coverage_run(repo: Path, junit: Path, work: Path, marker: str = "") -> float:
    """The README's test command (the tests it selects, or `marker`'s) under coverage.py, through a Python
    process that starts it (coverage measures Python, and every Python process under it: pytest, its workers);
    returns edge_xsent/'s line coverage in percent."""
    set_up(repo)
    rc = work / "coveragerc"
    rc.write_text(COVERAGE_RC.format(data=work / ".coverage"))
    (work / "run_tests.py").write_text(RUNNER)
    env = {**suite_env(), "COVERAGE_RCFILE": str(rc)}
    subprocess.run([sys.executable, "-m", "coverage", "run", str(work / "run_tests.py"), f"--junitxml={junit}",
                    *selected(marker)], cwd=repo, env=env, check=False)
    subprocess.run([sys.executable, "-m", "coverage", "combine", "-q"], cwd=work, env=env, check=True)
    report = work / "coverage.json"
    subprocess.run([sys.executable, "-m", "coverage", "json", "-q", "-o", str(report)], cwd=work, env=env, check=True)
    return read_json(report)["totals"]["percent_covered"]


def commit_of(repo: Path) -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()


def markdown(runs: list[dict]) -> str:
    lines = ["# The test suite: time and coverage",
             "",
             "Measured by `python benchmarks/suite_time.py` (time) and `python benchmarks/suite_time.py --coverage`",
             "(line coverage of `edge_xsent/`, every subprocess measured); each test's seconds are in `suite.json`.",
             f"Kept since {runs[0]['date'].split()[0]} (the first run: a date that stays, for benchmarks/index.py); each",
             "run's date is in the table. A coverage run's failures are its own: the full-disk cases' processes (a",
             "100-byte file limit) cannot write coverage's data file either.",
             "",
             "| date | label | commit | machine | passed | skipped | failed | command (s) | pytest (s) | coverage |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        c = r["counts"]
        failed = c.get("failure", 0) + c.get("error", 0)
        coverage = "" if r.get("coverage") is None else f"{r['coverage']}%"
        label = r["label"] + (f" (`-m \"{r['marker']}\"`)" if r.get("marker") else "")
        lines.append(f"| {r['date']} | {label} | {r['commit']} | {r['machine']} | {c.get('passed', 0)} | "
                     f"{c.get('skipped', 0)} | {failed} | {r.get('command_s', '')} | {r.get('pytest_s', '')} | {coverage} |")
    timed = [r for r in runs if "pytest_s" in r]
    if timed:
        last = timed[-1]
        lines += ["", f"## Where the time goes: {last['label']} ({last['commit']}), seconds per file summed over "
                      "the workers", "", "| file | s |", "|---|---|"]
        lines += [f"| {f} | {s} |" for f, s in list(by_file(last["tests"]).items())[:25]]
        slow = sorted(last["tests"].items(), key=lambda kv: -kv[1])[:20]
        lines += ["", "Slowest tests:", "", "| test | s |", "|---|---|"] + [f"| `{n}` | {s} |" for n, s in slow]
    return "\n".join(lines) + "\n"


def package_dir() -> str:
    """Where `import edge_xsent` resolves in a new interpreter (tests/run.sh's `pip install -e` moves it), started
    outside every checkout: in one, `python -c` finds that checkout's folder first, whatever is installed."""
    return subprocess.run([sys.executable, "-c", "import edge_xsent, os; print(os.path.dirname(edge_xsent.__file__))"],
                          capture_output=True, text=True, env=suite_env(), cwd=tempfile.gettempdir()).stdout.strip()


def measure(repo: Path, coverage: bool, label: str, marker: str = "") -> dict:
    """One run of the suite in `repo` (the tests `marker` selects): its time and each test's seconds, or its coverage."""
    commit = commit_of(repo)
    run = {"date": time.strftime("%Y-%m-%d %H:%M"), "commit": commit, "label": label or commit,
           "machine": f"{os.cpu_count()} cores, {platform.machine()}", **({"marker": marker} if marker else {})}
    with tempfile.TemporaryDirectory(prefix="suite-") as tmp:
        junit = Path(tmp) / "junit.xml"
        if coverage:
            run["coverage"] = round(coverage_run(repo, junit, Path(tmp), marker), 2)
        else:
            run["command_s"] = round(timed_run(repo, junit, marker))
            run["pytest_s"] = round(float(next(ET.parse(junit).getroot().iter("testsuite")).get("time", 0)))
        found = durations(junit)
    run["counts"] = found["counts"]
    if not coverage:
        run["tests"] = found["tests"]
    return run


def keep(run: dict, results: Path) -> None:
    record = results / "suite.json"
    runs = read_json(record) if record.exists() else []
    runs.append(run)
    with atomic_write(record) as f:
        f.write(json.dumps(runs, indent=1) + "\n")
    with atomic_write(results / "suite.md") as f:
        f.write(markdown(runs))


@user_errors
def main() -> None:
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", type=path_arg(INPUT), default=CHECKOUT, help="the checkout whose suite runs (default: this one)")
    p.add_argument("--label", default="", help="a name for the run in the table (default: the commit)")
    p.add_argument("--coverage", action="store_true", help="measure line coverage instead of time")
    p.add_argument("--marker", default="",
                   help='only the tests this marker expression selects, e.g. "lab" (tests/run.sh alone runs "not lab")')
    p.add_argument("--results", type=path_arg(INTO), default=RESULTS, help="where suite.json and suite.md are kept")
    args = p.parse_args()
    installed = package_dir()
    try:
        run = measure(args.repo.resolve(), args.coverage, args.label, args.marker)
    finally:
        if package_dir() != installed:  # another checkout's tests/run.sh installed its package: this one's again
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-e", str(CHECKOUT)], check=True,
                           env=suite_env())
    keep(run, args.results)
    print(markdown([run]).split("## Where")[0])


if __name__ == "__main__":
    main()
